"""A throwaway single-member etcd with the v2 API, for jobs on one machine (torch's etcd-v2 rendezvous needs it).

The etcd of the local runs, the tests and ``torchfleet demo``: pinned 3.5.x with ``--enable-v2=true``
(docs/facts.md, "Rendezvous"), on loopback ports, its data in a temporary directory removed at stop.
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
            self.data_dir = tempfile.mkdtemp(prefix="tf-etcd-")
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
                stderr=subprocess.PIPE,
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
            last_error = self.proc.stderr.read().decode(errors="replace")[-2000:] if self.proc.poll() else ""
            self.stop()
        raise RuntimeError(f"etcd did not start: {last_error or 'timeout'}")

    def stop(self) -> None:
        if self.proc is not None:
            with suppress(ProcessLookupError):
                self.proc.kill()
            self.proc.wait()
            if self.proc.stderr:
                self.proc.stderr.close()
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
