"""The real node's two small images, built here without a registry, as OCI archives for containerd.

    python -m tests.controlplane.node_images    # build or find both; one timed line each

- pause: the sandbox image every pod's network namespace is held by. containerd 1.6's CRI would
  pull registry.k8s.io/pause from a registry; here it is Kubernetes' own pause.c from the pinned
  k8s.io/kubernetes module (build/pause/linux/pause.c, the same v1.35.4 as the kubelet), compiled
  static with this machine's gcc, alone in one layer, ENTRYPOINT ["/pause"] as its Dockerfile has it.
- smoke: Debian bookworm minbase (mmdebstrap, the mirror tests/containers/image.py uses) plus
  busybox (an httpd and wget for the Service test) and a page at /srv/index.html; the tests run it
  as uid 10001 on a read-only root.

Each lands in ~/.cache/torchfleet/node/<name>-<hash of its inputs>/image.tar (an OCI image layout
as a tar, the form `ctr images import` reads), with the tag as the index's ref.name; a second run
only checks the stamp. umoci writes the layouts, as tests/containers/image.py does.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tests.containers.image import MIRROR, SUITE

CACHE = Path(os.environ.get("TORCHFLEET_NODE_IMAGE_CACHE", Path.home() / ".cache" / "torchfleet" / "node"))
GOMODCACHE_PAUSE = "k8s.io/kubernetes@v1.35.4/build/pause/linux/pause.c"
SMOKE_PACKAGES = ("busybox",)
SMOKE_PAGE = "torchfleet-node-smoke\n"
# Bumped when a recipe below changes (the cache key holds the inputs, not this file's bytes, so that
# an edit elsewhere here does not rebuild the 10-minute smoke image).
PAUSE_RECIPE, SMOKE_RECIPE = "2", "1"


class NodeImageError(RuntimeError):
    pass


@dataclass(frozen=True)
class NodeImage:
    name: str  # the containerd name once imported: torchfleet.local/NAME:TAG
    archive: Path  # the OCI archive (a tar of the layout)


def _run(argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)
    if done.returncode != 0:
        raise NodeImageError(f"{shlex.join(argv)} exited {done.returncode}: {(done.stderr or done.stdout)[-3000:]}")
    return done


def _pause_source() -> Path:
    modcache = _run(["go", "env", "GOMODCACHE"]).stdout.strip()
    source = Path(modcache) / GOMODCACHE_PAUSE
    if not source.is_file():
        # build.py's kubelet build downloads the module; `go mod download` fetches it alone.
        _run(
            ["go", "mod", "download", "k8s.io/kubernetes@v1.35.4"],
            cwd=Path(__file__).parent / "modules" / "kubernetes-node",
            env={**os.environ, "GOFLAGS": "-mod=mod"},
        )
    return source


def _key(*parts: bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(hashlib.sha256(part).digest())
    return digest.hexdigest()[:16]


def _layout(tree: Path, out: Path, tag: str, entrypoint: list[str], user: str, history: str) -> None:
    """TREE as the one layer of an OCI image tagged TAG, written as the archive OUT."""
    with tempfile.TemporaryDirectory(dir=out.parent) as scratch:
        layout = Path(scratch) / "oci"
        _run(["umoci", "init", "--layout", str(layout)])
        _run(["umoci", "new", "--image", f"{layout}:{tag}"])
        _run(["umoci", "insert", "--image", f"{layout}:{tag}", "--history.created_by", history, str(tree), "/"])
        _run(
            [
                "umoci",
                "config",
                "--image",
                f"{layout}:{tag}",
                "--config.user",
                user,
                *(f"--config.entrypoint={a}" for a in entrypoint),
                "--author=tests/controlplane/node_images.py",
                "--config.env=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            ]
        )
        _run(["umoci", "gc", "--layout", str(layout)])
        _run(["tar", "-C", str(layout), "-cf", str(out), "."])


def _cached(name: str, key: str, make, log) -> NodeImage:
    started = time.monotonic()
    folder = CACHE / f"{name}-{key}"
    image = NodeImage(f"torchfleet.local/{name}:{key[:8]}", folder / "image.tar")
    if (folder / "done").is_file():
        log(f"[node-image] {image.name}: cached {image.archive}")
        return image
    work = CACHE / f"tmp-{name}-{key}-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        make(work, key[:8])
        (work / "done").write_text("")
        shutil.rmtree(folder, ignore_errors=True)
        work.rename(folder)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    size = image.archive.stat().st_size / 2**20
    log(f"[node-image] {image.name}: built in {time.monotonic() - started:.0f} s ({size:.1f} MiB archive)")
    return image


def pause(log=print) -> NodeImage:
    source = _pause_source()
    gcc = _run(["gcc", "--version"]).stdout.splitlines()[0]

    def make(work: Path, tag: str) -> None:
        tree = work / "tree"
        tree.mkdir()
        # As build/pause/Makefile builds it: static, -Os, VERSION linked in.
        _run(
            [
                "gcc",
                "-Os",
                "-Wall",
                "-Werror",
                "-static",
                "-DVERSION=v3.10-torchfleet",
                "-o",
                str(tree / "pause"),
                str(source),
            ]
        )
        _run(["strip", str(tree / "pause")])
        (tree / "pause").chmod(0o755)  # a pod's sandbox runs it as the pod's runAsUser
        # 65535: the pause image's USER (build/pause/Dockerfile).
        _layout(tree, work / "image.tar", tag, ["/pause"], "65535:65535", f"gcc -static {GOMODCACHE_PAUSE}")
        shutil.rmtree(tree)

    return _cached("pause", _key(source.read_bytes(), gcc.encode(), PAUSE_RECIPE.encode()), make, log)


def smoke(log=print) -> NodeImage:
    def make(work: Path, tag: str) -> None:
        tree = work / "tree"
        hook = f'--customize-hook=mkdir -p "$1/srv" && printf %s {shlex.quote(SMOKE_PAGE)} > "$1/srv/index.html"'
        _run(
            [
                "mmdebstrap",
                "--quiet",
                "--variant=minbase",
                f"--include={','.join(SMOKE_PACKAGES)}",
                '--aptopt=Acquire::Languages "none"',
                "--dpkgopt=path-exclude=/usr/share/doc/*",
                "--dpkgopt=path-exclude=/usr/share/man/*",
                "--dpkgopt=path-exclude=/usr/share/locale/*",
                hook,
                SUITE,
                str(tree),
                MIRROR,
            ]
        )
        _layout(
            tree,
            work / "image.tar",
            tag,
            ["/bin/bash"],
            "10001:10001",
            f"mmdebstrap --variant=minbase {SUITE} {' '.join(SMOKE_PACKAGES)}",
        )
        shutil.rmtree(tree)

    key = _key(
        SUITE.encode(), MIRROR.encode(), " ".join(SMOKE_PACKAGES).encode(), SMOKE_PAGE.encode(), SMOKE_RECIPE.encode()
    )
    return _cached("smoke", key, make, log)


def main() -> int:
    try:
        pause()
        smoke()
    except NodeImageError as err:
        print(f"[node-image] {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
