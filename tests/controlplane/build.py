"""Build the real control plane's binaries from their pinned Go modules (tests/controlplane/modules/).

    python -m tests.controlplane.build            # every tool, one timed line each
    python -m tests.controlplane.build kwok etcd  # only these

Each module under modules/ is a tools module: its go.mod pins one upstream release with `tool`
lines, its go.sum is committed, and `go build -mod=readonly` refuses anything not pinned there.
The binaries land in .cache/controlplane/bin (git-ignored) with a stamp of the go.sum they came
from, so a second run only compares stamps; a changed pin rebuilds, and Go's build cache makes
that quick. One line per tool: "[build] kube-apiserver: go build k8s.io/kubernetes v1.35.4 (412 s, 690 CPU-s)",
the CPU time of the go command and its compilers and linker together (what a fresh machine pays, whatever
else shares its cores).

Builds may run at once: `.ci/run` builds in the background while the suite starts (issue 31, item 5), and
a test that needs a tool calls `ensure(name)`, which takes the tool's lock (a `flock` on BIN/.NAME.lock):
it waits while another process builds that tool, then finds its stamp current, or builds it itself when
nothing else does (so the README's test command needs no build step first). A build that failed in this
process is not tried again by it: every later `ensure` raises the same error.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import resource
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODULES = HERE / "modules"
REPO = HERE.parents[1]
BIN = Path(os.environ.get("TORCHFLEET_CONTROLPLANE_BIN", REPO / ".cache" / "controlplane" / "bin"))


@dataclass(frozen=True)
class Tool:
    name: str  # the binary's name in BIN
    module: str  # the folder under modules/ whose go.mod pins it
    package: str  # the Go package of its main
    # The Go string a release build links its version into (-ldflags -X); without it the binary
    # reports none. The value is `version`, else the pinned version ('v3.274.0').
    version_var: str = ""
    # The release this build stands for, where go.mod's pin is a pseudo-version that names its commit.
    version: str = ""
    # Run `go generate PACKAGE` first, with VERSION set as above: for a main of the tools module
    # itself that embeds files a release build generates (modules/pulumi-kubernetes).
    generate: bool = False


_PULUMI_VERSION = "github.com/pulumi/pulumi/sdk/v3/go/common/version.Version"
_KUBE_VERSION = "k8s.io/component-base/version.gitVersion"
TOOLS = (
    Tool("etcd", "etcd", "go.etcd.io/etcd/server/v3"),
    # etcdctl 3.5, as the etcd image has it, for the start script's test (tests/k8s/test_etcd_bootstrap.py).
    Tool("etcdctl", "etcdctl", "go.etcd.io/etcd/etcdctl/v3"),
    # Kubernetes' release builds link their version in (hack/lib/version.sh); without it the API
    # server's /version says v0.0.0-master, which clients (kubectl, the Pulumi provider) compare.
    Tool("kube-apiserver", "kubernetes", "k8s.io/kubernetes/cmd/kube-apiserver", _KUBE_VERSION),
    Tool("kube-controller-manager", "kubernetes", "k8s.io/kubernetes/cmd/kube-controller-manager", _KUBE_VERSION),
    Tool("kube-scheduler", "kubernetes", "k8s.io/kubernetes/cmd/kube-scheduler", _KUBE_VERSION),
    Tool("kubectl", "kubernetes", "k8s.io/kubernetes/cmd/kubectl", _KUBE_VERSION),
    Tool("kwok", "kwok", "sigs.k8s.io/kwok/cmd/kwok"),
    # The real node (tests/controlplane/node.py): kubelet and kube-proxy from the same k8s.io/kubernetes
    # v1.35.4 (tagged 2026-04-15) in a module of their own (modules/kubernetes-node), and CoreDNS
    # v1.15.0 (github.com/coredns/coredns, tagged 2026-10-21; its version is a constant, no -X), from a main of
    # the module's own with only the plugins the node uses (modules/coredns/cmd/coredns/main.go).
    Tool("kubelet", "kubernetes-node", "k8s.io/kubernetes/cmd/kubelet", _KUBE_VERSION),
    Tool("kube-proxy", "kubernetes-node", "k8s.io/kubernetes/cmd/kube-proxy", _KUBE_VERSION),
    Tool("coredns", "coredns", "torchfleet.local/coredns/cmd/coredns"),
    # NetworkPolicy on the real node (node.py's network_policy): kube-router v2.1.0's policy controller
    # (github.com/cloudnativelabs/kube-router, tagged 2024-03-03; modules/kube-router/go.mod says why not
    # kube-network-policies). Its Makefile links the release into pkg/version.Version.
    Tool(
        "kube-router",
        "kube-router",
        "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router",
        "github.com/cloudnativelabs/kube-router/v2/pkg/version.Version",
    ),
    # The training controllers the project installs: tests/controlplane/operators.py.
    Tool("elasticjob-controller", "elasticjob", "github.com/pytorch/elastic/kubernetes"),
    Tool("training-operator", "kubeflow", "github.com/kubeflow/training-operator/cmd/training-operator.v1"),
    # The Pulumi CLI (the engine) and the Kubernetes provider: tests/controlplane/pulumi_engine.py.
    Tool("pulumi", "pulumi", "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi", _PULUMI_VERSION),
    Tool(
        "pulumi-resource-kubernetes",
        "pulumi-kubernetes",
        "torchfleet.local/pulumi-kubernetes/cmd/pulumi-resource-kubernetes",
        "github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version",
        version="4.25.0",
        generate=True,
    ),
)
BY_NAME = {tool.name: tool for tool in TOOLS}


class BuildError(RuntimeError):
    pass


def path(name: str) -> Path:
    """Where the binary NAME lies once built (whether or not it is built yet)."""
    return BIN / BY_NAME[name].name


def pinned_version(tool: Tool) -> str:
    """The version go.mod pins for the tool's package: 'k8s.io/kubernetes v1.35.4'.

    A main of the tools module itself builds its one direct requirement (`require M V`, not
    indirect): that is the pin shown.
    """
    lines = (MODULES / tool.module / "go.mod").read_text().splitlines()
    module = next(line.split()[1] for line in lines if line.startswith("module "))
    for line in lines:
        words = line.split()
        if words[:1] == ["require"]:
            words = words[1:]  # a one-line require
        if len(words) < 2 or not words[1].startswith("v"):
            continue
        own = tool.package.startswith(module + "/") and "// indirect" not in line
        if tool.package.startswith(words[0]) or own:
            return f"{words[0]} {words[1]}"
    raise BuildError(f"modules/{tool.module}/go.mod pins no module holding {tool.package}")


@functools.cache
def _go_version() -> str:
    return subprocess.run(["go", "env", "GOVERSION"], capture_output=True, text=True, check=True).stdout


def _stamp(tool: Tool) -> str:
    go_version = _go_version()
    digest = hashlib.sha256((MODULES / tool.module / "go.sum").read_bytes())
    digest.update((MODULES / tool.module / "go.mod").read_bytes())
    digest.update(f"{tool.package}\n{go_version}".encode())
    digest.update(" ".join(_ldflags(tool)).encode())
    return digest.hexdigest()


def _release(tool: Tool) -> str:
    return tool.version or pinned_version(tool).split()[1]


def _ldflags(tool: Tool) -> list[str]:
    # -s -w: no symbol table and no DWARF, as Kubernetes' release builds link (k8s.io/kubernetes v1.35.4
    # hack/lib/golang.sh, "disable symbols and DWARF"): nothing here runs them under a debugger, a panic's
    # trace still names its functions, and the linker has less to write on a fresh machine.
    version = [f"-X {tool.version_var}={_release(tool)}"] if tool.version_var else []
    return ["-ldflags", " ".join(["-s", "-w", *version])]


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)  # the go command's own children counted once it is reaped
    return usage.ru_utime + usage.ru_stime


def _current(tool: Tool) -> bool:
    stamp_file = BIN / f".{tool.name}.stamp"
    return (BIN / tool.name).exists() and stamp_file.exists() and stamp_file.read_text() == _stamp(tool)


def built(name: str) -> bool:
    """Whether the binary NAME is built and current now: nothing built, no lock taken (tests/scheduling.py
    asks this to hand out the files whose tools are ready)."""
    return _current(BY_NAME[name])


def build(tool: Tool) -> str:
    """Build one tool unless its stamp says the binary is current; return the line to print.

    Holds the tool's lock throughout: a second builder of the same tool waits, then finds it current."""
    if shutil.which("go") is None:
        raise BuildError("the Go toolchain is not on PATH (Go 1.26 or later builds the control plane)")
    BIN.mkdir(parents=True, exist_ok=True)
    with open(BIN / f".{tool.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or when this process dies
        return _build_locked(tool)


def _build_locked(tool: Tool) -> str:
    out = BIN / tool.name
    stamp_file = BIN / f".{tool.name}.stamp"
    if _current(tool):
        return f"[build] {tool.name}: present ({pinned_version(tool)})"
    stamp = _stamp(tool)
    stamp_file.unlink(missing_ok=True)  # a build cut off half-way must not leave a binary that looks current
    started, cpu_before = time.monotonic(), _children_cpu_s()
    env = {**os.environ, "GOFLAGS": "-mod=readonly -buildvcs=false", "CGO_ENABLED": "0", "GOTOOLCHAIN": "local"}
    if tool.generate:
        done = subprocess.run(
            ["go", "generate", tool.package],
            cwd=MODULES / tool.module,
            env={**env, "VERSION": _release(tool)},
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise BuildError(f"go generate {tool.package} in modules/{tool.module} failed:\n{done.stderr[-4000:]}")
    done = subprocess.run(
        ["go", "build", "-trimpath", *_ldflags(tool), "-o", str(out), tool.package],
        cwd=MODULES / tool.module,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise BuildError(f"go build {tool.package} in modules/{tool.module} failed:\n{done.stderr[-4000:]}")
    stamp_file.write_text(stamp)
    seconds, cpu = time.monotonic() - started, _children_cpu_s() - cpu_before
    shown = f"{seconds:.1f}" if seconds < 10 else f"{seconds:.0f}"
    return f"[build] {tool.name}: go build {pinned_version(tool)} ({shown} s, {cpu:.0f} CPU-s)"


_FAILED: dict[str, BuildError] = {}
_ENSURED: set[str] = set()  # current once seen current: cluster.binary asks at every kubectl call


def ensure(*names: str) -> list[Path]:
    """The binaries NAMES, built first where they are not current (waiting for another builder of the same
    tool); a BuildError that says why when one cannot be built."""
    paths = []
    for name in names:
        tool = BY_NAME[name]
        if name in _FAILED:
            raise _FAILED[name]
        if name not in _ENSURED:
            try:
                build(tool)
            except BuildError as error:
                _FAILED[name] = error
                raise
            _ENSURED.add(name)
        paths.append(BIN / tool.name)
    return paths


def main(argv: list[str]) -> int:
    unknown = [name for name in argv if name not in BY_NAME]
    if unknown:
        print(f"unknown tool(s) {', '.join(unknown)}; choose from {', '.join(BY_NAME)}", file=sys.stderr)
        return 2
    try:
        for tool in [BY_NAME[name] for name in argv] or TOOLS:
            print(build(tool), flush=True)
    except BuildError as error:
        print(f"[build] {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
