"""A throwaway single-member etcd with the v2 API, for jobs on one machine (torch's etcd-v2 rendezvous needs it).

The etcd of the local runs, the tests and ``torchfleet demo``: pinned 3.5.x with ``--enable-v2=true``
(docs/facts.md, "Rendezvous"), on loopback ports, its data in a temporary directory removed at stop.

That directory is in memory (/dev/shm) where there is one: the member is thrown away, and on disk
every rendezvous write waits for an fsync, seconds each on a disk busy with other work (CI builds
its Go tools beside the tests). Its log goes to a file there, not a pipe nobody reads while it
runs: a pipe's 64 KiB, once full, would block etcd's next log line and every request with it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from elastic_trainer.local.processes import free_port

# An etcd binary that is not on PATH (a GPU machine with no etcd installed gets one copied in).
ENV_ETCD_BINARY = "TORCHFLEET_ETCD_BINARY"


def etcd_binary() -> str | None:
    """The etcd to run: ``$TORCHFLEET_ETCD_BINARY``, else ``etcd`` on PATH or /usr/bin; None if none exists."""
    chosen = os.environ.get(ENV_ETCD_BINARY)
    if chosen:
        return chosen if os.access(chosen, os.X_OK) else None
    return shutil.which("etcd") or shutil.which("/usr/bin/etcd")


# mkdtemp makes the directory itself, mode 0700 with a random name, so a shared /dev/shm is safe here.
SHARED_MEMORY = "/dev/shm"  # noqa: S108


def memory_dir() -> str | None:
    """SHARED_MEMORY when it is a writable directory, else None (the system's temporary directory)."""
    return SHARED_MEMORY if os.path.isdir(SHARED_MEMORY) and os.access(SHARED_MEMORY, os.W_OK) else None


class Etcd:
    """A throwaway single-member etcd with the v2 API (torch's etcd-v2 rendezvous needs it)."""

    def __init__(self, binary: str | None = None) -> None:
        self.binary = binary or os.environ.get(ENV_ETCD_BINARY) or etcd_binary() or "/usr/bin/etcd"
        self.proc: subprocess.Popen[bytes] | None = None
        self.data_dir: str | None = None
        self.endpoint = ""

    def start(self, timeout: float = 20.0) -> Etcd:
        last_error = ""
        for _ in range(3):  # a free port can be taken between picking and binding it
            client, peer = free_port(), free_port()
            self.data_dir = tempfile.mkdtemp(prefix="tf-etcd-", dir=memory_dir())
            with open(os.path.join(self.data_dir, "etcd.log"), "wb") as log:  # etcd keeps its own copy
                self.proc = subprocess.Popen(
                    [
                        self.binary,
                        "--name=tf",
                        f"--data-dir={self.data_dir}",
                        f"--listen-client-urls=http://127.0.0.1:{client}",
                        f"--advertise-client-urls=http://127.0.0.1:{client}",
                        f"--listen-peer-urls=http://127.0.0.1:{peer}",
                        f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                        f"--initial-cluster=tf=http://127.0.0.1:{peer}",
                        "--enable-v2=true",
                        "--log-level=error",
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=log,
                )
            self.endpoint = f"127.0.0.1:{client}"
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    with urllib.request.urlopen(f"http://{self.endpoint}/v2/keys", timeout=1) as reply:
                        if reply.status == 200:
                            return self
                except OSError:
                    time.sleep(0.1)
            last_error = self.log_tail() if self.proc.poll() is not None else ""
            self.stop()
        raise RuntimeError(f"etcd did not start: {last_error or 'timeout'}")

    def log_tail(self, size: int = 2000) -> str:
        """The end of etcd's log (errors only: ``--log-level=error``)."""
        try:
            with open(os.path.join(self.data_dir or "", "etcd.log"), "rb") as log:
                log.seek(max(0, os.fstat(log.fileno()).st_size - size))
                return log.read().decode(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is not None:
            with suppress(ProcessLookupError):
                self.proc.kill()
            self.proc.wait()
            self.proc = None
        if self.data_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            self.data_dir = None

    def __enter__(self) -> Etcd:
        return self.start() if self.proc is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextmanager
def etcd_server() -> Iterator[Etcd]:
    with Etcd() as etcd:
        yield etcd
