"""Property (issue 12, item 3, the command-line half): whatever a user types, `torchfleet` exits 0
or 2 and never prints a traceback.

Hypothesis builds argument lists two ways: random lines (a command, then the CLI's own flags with
values close to right ones or any text, stray tokens, a command after `--`) and mutations of valid
submit/sweep/synth/check/list/status/logs/delete/tensorboard/completion/demo lines (job files and
`-o` formats among them) (a flag given another value, options
added, a token replaced, dropped, repeated or moved, the line cut short, `-- ''` appended). The run
is in-process (`torchfleet.cli.main`, as the console script calls it), bounded and derandomized so
CI sees the same examples every time.

Nothing leaves the machine and nothing outside a temporary folder is written: submit and sweep
lines carry --dry-run, a fake stands in for the cluster client (after the real kubeconfig checks)
and for Pulumi's stack outputs, no user config file or TORCHFLEET_* variable is seen, synth
returns one stack's result after the real stack-file loader (the stack half is
tests/property/test_stack_configs.py), the demo stops after its checks, and
the run's working folder is a temporary one, into which the paths given to --out,
--policy-config-out and --workdir are redirected unless they are on a short list that cannot be
written.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import tempfile
from pathlib import Path
from unittest import mock

import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.harness import REPO
from torchfleet import demo
from torchfleet.cli import build_parser, main
from torchfleet.jobs import manifests
from torchfleet.jobs.errors import JobNotFoundError
from torchfleet.preview.stack_file import load_stack_file

KUBECONFIG = {
    "apiVersion": "v1", "kind": "Config", "current-context": "test",
    "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}],
    "users": [{"name": "u", "user": {"token": "t"}}],
    "contexts": [{"name": "test", "context": {"cluster": "c", "user": "u"}}],
}
IMAGE = "registry.example.com/team/train:1.4.2"
VALID_LINES = [
    ["submit", "resnet", "--gpu", "t4", "--nodes", "2:8", "--image", IMAGE, "--dry-run", "--", "python", "train.py"],
    ["submit", "tiny", "--stack", "local", "--cpu", "--cpus", "1", "--memory", "2Gi", "--image", IMAGE,
     "--allow-egress", "0.0.0.0/0", "--dry-run", "--", "python", "-m", "team.train", "--lr", "0.1"],
    ["submit", "r", "--stack", "aws-usw2", "--gpu", "a10g", "--zone", "us-west-2a", "--env", "A=1", "--mount",
     "/data", "--run-as-user", "2000", "--operator", "kubeflow", "-n", "research", "--image", IMAGE, "--dry-run",
     "--", "train.py"],
    ["submit", "az", "--stack", "azure-eus", "--gpu", "t4", "--zone", "1", "--dry-run", "--image", IMAGE,
     "--", "bash", "run.sh"],
    ["sweep", "grid", "--gpu", "t4", "--param", "lr=0.1,0.01", "--param", "batch=64", "--image", IMAGE,
     "--dry-run", "--", "python", "train.py"],
    ["synth", "--stack-file", "stacks/Pulumi.local.yaml", "--out", "manifests"],
    ["check", "--stack-file", "stacks/Pulumi.local.yaml", "--policy-config-out", "policy.json"],
    ["list", "--kubeconfig", "kubeconfig"],
    ["list", "--stack", "gcp-usc1"],
    ["status", "resnet", "--shared-dir", "shared", "--context", "test"],
    ["logs", "resnet", "--rank", "1", "--tail", "10", "-f"],
    ["delete", "resnet", "--namespace", "elastic-job"],
    # issue 13: job files, output formats, watching, kubectl-style delete and logs, completion, TensorBoard
    ["submit", "-f", "job.yaml", "--nodes", "2:4", "--dry-run"],
    ["submit", "resnet", "--gpu", "t4", "--image", IMAGE, "--dry-run", "-o", "job", "--", "python", "train.py"],
    ["sweep", "-f", "sweep.yaml", "--dry-run"],
    ["synth", "--stack", "local"],
    ["check", "--stack", "stacks/Pulumi.local.yaml"],
    ["list", "-o", "json", "--stack", "local"],
    ["status", "resnet", "-o", "yaml", "--watch"],
    ["logs", "resnet", "--all-ranks", "--previous", "-f"],
    ["delete", "--all", "--yes"],
    ["delete", "-l", "torchfleet.io/sweep=grid"],
    ["tensorboard", "resnet", "--port", "6006", "--mount", "/data"],
    ["tensorboard", "resnet", "--dry-run", "--image", IMAGE, "--stack", "aws-usw2"],
    ["completion", "bash"],
    ["--version"],
    [],
    ["demo", "--steps", "400", "--checkpoint-every", "20", "--step-delay", "0.05", "--workdir", "demo"],
]


def _command_options() -> dict[str, list[argparse.Action]]:
    """Each command's own options, read from the parser itself."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {name: [a for a in p._actions if a.option_strings and a.dest != "help"] for name, p in sub.choices.items()}


COMMAND_OPTIONS = _command_options()
COMMANDS = sorted(COMMAND_OPTIONS)  # every command the CLI has, as registered
FLAGS = sorted({t for line in VALID_LINES for t in line if t.startswith("-")} | {
    "--help", "--stacks-dir", "--cloud", "--gpus-per-node", "--node", "--stack-file", "--out", "--follow",
    "--file", "--output", "--selector", "--all-ranks",
})
# Absolute paths left as typed: ones nothing can write, even root.
UNWRITABLE = ["/proc/nope", "/proc/nope/x.json", "/proc/nope/deeper", "/dev/null", "/sys/nope"]
NEAR_MISSES = [
    "", " ", "--", "-", "-n", "0", "-1", "1:0", "2:8", "99999999999999999999", "1e9", "nan", "inf", "1.5", "500m",
    "t4", "T4", "k80", "a100-80gb", "us-west-2a", "a b", "1", "eastus-1", "local", "aws-usw2", "../x", "x/y",
    "python", "train.py", "python3", "-m", "-u", "''", "A=1", "A", "TORCHFLEET_JOB=x", "lr=1,2", "lr=", "lr",
    "0.0.0.0/0", "::/0", "169.254.169.254/32", "fd00:ec2::254/128", "168.63.129.16/32", "10.1.2.3/8",
    "repo:1.0", ":1.0", "Repo/T:1", "r/t@sha256:zzz", "r/t:latest", "r/t:1\n", "r\tt:1", "/mnt/../etc", "//proc",
    "/dev/shm", "/data", "mnt", "2147483647", "2147483648", "kubeflow", "torchelastic", "Bad_NS", "x" * 70,
    "stacks/Pulumi.local.yaml", "stacks", "kubeconfig", "bad-kubeconfig", "manifests", "policy.json", *UNWRITABLE,
    "job.yaml", "sweep.yaml", "bad-job.yaml", "json", "yaml", "wide", "job", "bash", "zsh", "a=b", "a=b c",
]
values = st.one_of(
    st.sampled_from(NEAR_MISSES), st.text(max_size=20),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
)
tokens = st.one_of(
    st.sampled_from(FLAGS), st.sampled_from(COMMANDS), values,
    st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=12).map(lambda t: "--" + t),
)
options = st.lists(st.one_of(st.tuples(st.sampled_from(FLAGS), values), st.tuples(tokens)), max_size=6)


def _flatten(pairs) -> list[str]:
    return [token for pair in pairs for token in pair]


@st.composite
def mutated_line(draw) -> list[str]:
    line = list(draw(st.sampled_from(VALID_LINES)))
    for _ in range(draw(st.integers(min_value=0, max_value=4))):
        kind = draw(st.sampled_from(["value", "value", "value", "option", "option", "replace", "drop", "repeat",
                                     "swap", "cut", "empty-command"]))
        i = draw(st.integers(min_value=0, max_value=max(len(line) - 1, 0)))
        flags = [k for k, t in enumerate(line[:-1]) if t.startswith("-") and t != "--"]
        if kind == "value" and flags:  # the most useful mutation: a flag given a wrong value
            line[draw(st.sampled_from(flags)) + 1] = draw(values)
        elif kind == "option":
            end = line.index("--") if "--" in line else len(line)
            line[end:end] = _flatten(draw(options))
        elif kind == "replace" and line:
            line[i] = draw(tokens)
        elif kind == "drop" and line:
            del line[i]
        elif kind == "repeat" and line:
            line.insert(i, line[i])
        elif kind == "swap" and len(line) > 1:
            j = draw(st.integers(min_value=0, max_value=len(line) - 1))
            line[i], line[j] = line[j], line[i]
        elif kind == "cut":
            line = line[:i]
        elif kind == "empty-command":
            line += ["--", ""]
    return line


NAMES = st.one_of(st.sampled_from(["resnet", "a", "job-1", "x" * 54, "x" * 55, "Bad", "1job", "-x", "a_b", ""]),
                  st.text(max_size=12))


@st.composite
def well_formed_option(draw, command: str) -> list[str]:
    """One of the command's options as argparse accepts it, with a value near or far from right."""
    action = draw(st.sampled_from(COMMAND_OPTIONS[command]))
    flag = draw(st.sampled_from(action.option_strings))
    if action.nargs == 0:
        return [flag]
    if action.choices and draw(st.booleans()):
        return [flag, draw(st.sampled_from(sorted(action.choices)))]
    value = draw(values)
    return [f"{flag}={value}"] if value.startswith("-") or draw(st.integers(0, 4)) == 0 else [flag, value]


@st.composite
def random_line(draw) -> list[str]:
    command = draw(st.sampled_from([*COMMANDS, "", "sub", "--help"]))
    line = [command]
    if command in ("submit", "sweep", "status", "logs", "delete", "tensorboard") and draw(st.integers(0, 3)):
        line.append(draw(NAMES))
    # mostly lines argparse accepts (completion has no options to draw from)
    if COMMAND_OPTIONS.get(command) and draw(st.integers(0, 3)):
        line += _flatten(draw(st.lists(well_formed_option(command), max_size=8)))
    else:
        line += _flatten(draw(options))
    if command in ("submit", "sweep"):
        line += ["--dry-run"] * draw(st.integers(0, 3)).__bool__()
        line += ["--", *draw(st.one_of(st.just(["python", "train.py"]), st.lists(values, max_size=3)))]
    elif draw(st.integers(0, 7)) == 0:
        line += ["--", *draw(st.lists(values, max_size=2))]
    return line


# Values for the job options that argparse accepts, so nearly every line reaches the validators.
INT_VALUES = st.one_of(st.integers(min_value=-(2**70), max_value=2**70),
                       st.sampled_from([0, 1, 2, 4, 8, 1000, 10001, 2**31 - 1, 2**31])).map(str)
OPTION_VALUES = {
    "--gpu": st.sampled_from(["t4", "a10g", "l4", "k80", "h100", "T4", "", "z99"]),
    "--nodes": st.sampled_from(["1", "2:8", "0:2", "8:2", "1:5000", "1:5001", "1:99999999999999999999", "a:b"]),
    "--image": st.sampled_from([IMAGE, "r/t:1", ":1.0", "R/T:1", "r/t:latest", "r/t@sha256:" + "a" * 64,
                                "r/t@sha256:zzz", "r/t:1\n", "localhost:5000/r:1", "[::1]:5000/r:1"]),
    "--zone": st.sampled_from(["us-west-2a", "us-west-2c", "1", "eastus-1", "a b", "US-WEST-2A", ""]),
    "--mount": st.sampled_from(["/data", "/mnt/../etc", "//proc", "/dev/shm", "/", "/var", "rel", "/a b", ""]),
    "--env": st.sampled_from(["A=1", "A", "TORCHFLEET_JOB=x", "POD_IP=1", "=1", "A=", "1A=2"]),
    "--allow-egress": st.sampled_from(["0.0.0.0/0", "::/0", "169.254.169.254/32", "fd00:ec2::254/128",
                                       "168.63.129.16/32", "169.254.0.0/16", "10.1.2.3/8", "nope", ""]),
    "--cpus": st.sampled_from(["1", "0", "500m", "two", ""]),
    "--memory": st.sampled_from(["2Gi", "16Mi", "4096", ""]),
    "--stack": st.sampled_from(["local", "aws-usw2", "gcp-usc1", "azure-eus", "nope", "../x", ""]),
    "--namespace": st.sampled_from(["research", "Bad_NS", "", "x" * 64]),
    "--context": st.sampled_from(["test", "", "nope"]),
    "--gpus-per-node": INT_VALUES,
    "--run-as-user": INT_VALUES,
    "--cloud": st.sampled_from(["aws", "gcp", "azure", "local"]),
    "--operator": st.sampled_from(["torchelastic", "kubeflow"]),
    "--file": st.sampled_from(["job.yaml", "sweep.yaml", "bad-job.yaml", "missing.yaml", "stacks", "/dev/null"]),
    "--output": st.sampled_from(["manifest", "job", "json"]),
}


@st.composite
def submit_line(draw) -> list[str]:
    """A submit or sweep line argparse accepts, some of its options given near-miss or odd values."""
    sweep = draw(st.booleans())
    name = draw(st.one_of(st.just("resnet"), NAMES))
    line = ["sweep" if sweep else "submit", name or "x"]
    given = {"--gpu": "t4", "--image": IMAGE} if draw(st.integers(0, 3)) else {"--cpu": None, "--image": IMAGE}
    for flag in draw(st.lists(st.sampled_from(sorted(OPTION_VALUES)), unique=True, max_size=4)):
        given[flag] = draw(st.one_of(OPTION_VALUES[flag], OPTION_VALUES[flag], values))
    for flag, value in given.items():
        line += [flag] if value is None else [f"{flag}={value}"] if value.startswith("-") else [flag, value]
    if sweep:
        line += ["--param", draw(st.sampled_from(["lr=0.1,0.01", "lr", "lr=1,", "+x.y=1,2,3"]))]
    command = draw(st.one_of(st.just(["python", "train.py"]), st.lists(values, max_size=3)))
    return [*line, "--dry-run", "--", *command]


WRITERS = ("--out", "--policy-config-out", "--workdir")  # the flags whose path the CLI writes to


def _confined_path(path: str) -> str:
    path = path.replace("..", "__")
    if path.startswith(("/", "~")) and path not in UNWRITABLE:
        path = "abs-" + path.lstrip("/~")
    return path


def confined(argv: list[str]) -> list[str]:
    """The line with every path the CLI could write kept inside the run's folder (see the module
    docstring); everything else as generated."""
    out = []
    for i, token in enumerate(argv):
        flag, sep, value = token.partition("=")
        if i > 0 and argv[i - 1] in WRITERS:
            token = _confined_path(token)
        elif sep and flag in WRITERS:
            token = f"{flag}={_confined_path(value)}"
        out.append(token)
    return out


class FakeJobs:
    """The cluster after a successful connect: no jobs, and every create accepted."""

    def __init__(self, api, namespace: str, operator: str) -> None:
        self.namespace = namespace
        self.resource = manifests.RESOURCES[operator]

    def exists(self, name: str) -> bool:
        return False

    def create(self, job: dict) -> dict:
        return {**job, "metadata": {**job["metadata"], "uid": "0"}}

    def create_owned(self, document: dict, owner: dict | None) -> None:
        pass

    def adopt(self, policy: dict, owner: dict) -> None:  # the job's policies are created first, then owned
        pass

    def delete_policy(self, policy: dict) -> None:
        pass

    def list(self) -> list:
        return []

    def pods(self, selector: str) -> list:
        return []

    def get(self, name: str) -> dict:
        raise JobNotFoundError(f"NAME: no job {name!r} in namespace {self.namespace}")

    delete = get


@contextlib.contextmanager
def sandbox():
    """A working folder holding copies of the stacks and a kubeconfig; the fakes in place."""
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        shutil.copytree(REPO / "stacks", root / "stacks")
        (root / "kubeconfig").write_text(yaml.safe_dump(KUBECONFIG))
        (root / "bad-kubeconfig").write_text("clusters: [\n")
        (root / "shared").mkdir()
        # Job files (issue 13): a valid one per command, and one whose values are wrong.
        (root / "job.yaml").write_text(f"name: resnet\ngpu: t4\nnodes: 2:8\nimage: {IMAGE}\n"
                                       "command: python train.py --lr 0.1\nenv: {A: 1}\n")
        (root / "sweep.yaml").write_text(f"name: grid\ncpu: true\nstack: local\nimage: {IMAGE}\n"
                                         "params: {lr: [0.1, 0.01]}\ncommand: [python, train.py]\n")
        (root / "bad-job.yaml").write_text("name: Bad\nnodes: [1]\nimage: r/t:latest\nnode: 2\n")
        previous = os.getcwd()
        os.chdir(root)
        try:
            # The client reads $KUBECONFIG once, at import: its default path is patched instead.
            # No user config file or TORCHFLEET_* variable changes what a line means (issue 13's defaults).
            with mock.patch.dict(os.environ, {"XDG_CONFIG_HOME": str(root / "xdg")}), \
                 mock.patch.dict(os.environ, {}) as environ, \
                 mock.patch("kubernetes.config.kube_config.KUBE_CONFIG_DEFAULT_LOCATION", str(root / "kubeconfig")), \
                 mock.patch("torchfleet.jobs.cluster.JobClient", FakeJobs), \
                 mock.patch("torchfleet.jobs.target.read_stack_outputs", lambda stack: {"kubeconfig": KUBECONFIG}), \
                 mock.patch("torchfleet.preview.runner.synth_file", _synth_after_loading), \
                 mock.patch.object(demo, "_demo", lambda args, workdir: 0):
                for variable in [v for v in environ if v.startswith("TORCHFLEET_") and v != "TORCHFLEET_DEBUG"]:
                    del environ[variable]
                yield root
        finally:
            os.chdir(previous)


_LOCAL = None


def _synth_after_loading(path):
    """The real stack-file loader, then the local stack's synth (computed once)."""
    global _LOCAL
    load_stack_file(path)
    if _LOCAL is None:
        from tests.harness import synth_stack

        _LOCAL = synth_stack("local")
    return _LOCAL


def run_cli(argv: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with sandbox(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(confined(argv))
        except SystemExit as exit_:  # argparse: usage errors (2) and --help (0)
            code = exit_.code
    return code, out.getvalue() + err.getvalue()


@settings(max_examples=250, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(argv=st.one_of(mutated_line(), random_line()))
def test_any_command_line_exits_0_or_2_without_a_traceback(argv):
    code, output = run_cli(argv)
    event(f"{argv[0] if argv else '(empty)'}: exit {code}")  # shown by --hypothesis-show-statistics
    assert code in (0, 2), f"exit {code} for {argv!r}:\n{output}"
    assert "Traceback" not in output, f"{argv!r}:\n{output}"


@settings(max_examples=250, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(argv=submit_line())
def test_any_submit_line_exits_0_or_2_without_a_traceback(argv):
    code, output = run_cli(argv)
    event(f"exit {code}")
    assert code in (0, 2), f"exit {code} for {argv!r}:\n{output}"
    assert "Traceback" not in output, f"{argv!r}:\n{output}"


def test_the_unmutated_lines_succeed():
    # The control: every line the property starts from is valid, so mutations explore the edges.
    for line in VALID_LINES:
        code, output = run_cli(line)
        # the fake cluster has no jobs: looking one up is the user's error
        expected = 2 if line[:1] in (["status"], ["logs"], ["tensorboard"]) and "--dry-run" not in line else 0
        expected = 2 if line[:2] == ["delete", "resnet"] else expected
        assert code == expected, f"{line}:\n{output}"
        if expected == 2:
            assert "NAME: no" in output and "'resnet'" in output, output
