"""A containerd of its own for the image's archive: `ctr images import` as a node imports it.

Debian's containerd 1.6 (the version the tier's node runs), started in a temporary folder with its
own root, state, sockets and no CRI plugin, so it shares nothing with a node's containerd on the
same machine (its shims' sockets are named after this socket's address). Used by
tests/containers/test_image_import.py and bench/container.py.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.containers import image as image_build

NAMESPACE = "k8s.io"  # the kubelet's (CRI's) namespace: where a node's import must land


class ContainerdError(RuntimeError):
    pass


@dataclass(frozen=True)
class Containerd:
    root: Path

    @property
    def address(self) -> str:
        return str(self.root / "containerd.sock")

    def ctr(self, *args: str, timeout: float = 1800, **kwargs) -> subprocess.CompletedProcess:
        argv = ["ctr", "--address", self.address, "--namespace", NAMESPACE, *args]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False, **kwargs)
        if proc.returncode != 0:
            raise ContainerdError(f"{' '.join(argv)} exited {proc.returncode}: {(proc.stderr or proc.stdout)[-3000:]}")
        return proc

    def import_image(self, image: image_build.Image) -> float:
        """The image's OCI archive streamed into `ctr images import -` (nothing written but
        containerd's own content store and snapshots); returns the seconds it took."""
        started = time.monotonic()
        argv = ["ctr", "--address", self.address, "--namespace", NAMESPACE, "images", "import", "-"]
        ctr = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            image_build.archive(image, ctr.stdin)
        finally:
            ctr.stdin.close()
        out = ctr.stdout.read().decode()
        if ctr.wait() != 0:
            raise ContainerdError(f"{' '.join(argv)} exited {ctr.returncode}: {out[-3000:]}")
        return time.monotonic() - started

    def run(self, ref: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        """`ctr run --rm --read-only REF`: the image's config (user, env, workdir) on containerd's
        default spec (new network namespace with no interface but lo); ARGS replace the process."""
        return self.ctr("run", "--rm", "--read-only", ref, f"tf-{time.monotonic_ns()}", *args, timeout=timeout)


@contextmanager
def throwaway(workdir: Path) -> Iterator[Containerd]:
    """containerd in WORKDIR (root/, state/, the socket), stopped and its mounts gone on exit."""
    if shutil.which("containerd") is None or shutil.which("ctr") is None:
        raise ContainerdError("containerd not installed: apt-get install containerd")
    c = Containerd(workdir)
    config = workdir / "config.toml"
    config.write_text(
        "version = 2\n"
        f'root = "{workdir / "root"}"\nstate = "{workdir / "state"}"\n'
        'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n'
        f'[grpc]\n  address = "{c.address}"\n'
        f'[ttrpc]\n  address = "{workdir / "containerd.ttrpc.sock"}"\n'
        '[debug]\n  address = ""\n[metrics]\n  address = ""\n')
    log = open(workdir / "containerd.log", "wb")  # noqa: SIM115 (closed below)
    proc = subprocess.Popen(["containerd", "--config", str(config)], stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 120
        while subprocess.run(["ctr", "--address", c.address, "version"], capture_output=True).returncode != 0:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise ContainerdError(f"containerd did not answer on {c.address}: "
                                      f"{(workdir / 'containerd.log').read_text()[-2000:]}")
            time.sleep(0.3)
        yield c
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        # the overlay snapshots it left mounted, if a container was still up
        mounts = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()
                  if line.split()[4].startswith(str(workdir))]
        for mount in sorted(mounts, reverse=True):
            subprocess.run(["umount", "-l", mount], capture_output=True)
