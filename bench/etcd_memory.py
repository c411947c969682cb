"""etcd's resident memory before and after one hostile run's writes through the etcd gate.

    .venv/bin/python bench/etcd_memory.py [--etcd BINARY] [--snapshot-count N] [--keys N] [--rewrites N]

A real etcd (v2 enabled, the StatefulSet's --snapshot-count and GOMEMLIMIT, k8s/base/etcd/statefulset.yaml)
and the gate in this process (elastic_trainer.etcd_gate), the run's pod at 127.0.0.1. Three runs, each on
a fresh etcd:

- ``old``: the gate's limits before the store's byte bounds (store values of 64 KiB, 20,000 keys): the run
  writes ``--keys`` store values of 64 KiB;
- ``new``: today's Limits: the run writes store values at the store-value limit until the gate refuses;
- ``state``: today's Limits: the run rewrites its state key, a value of ``--max-value-bytes`` (64 KiB),
  ``--rewrites`` times (each write is a raft entry kept in memory until a snapshot, and
  ``DefaultSnapshotCatchUpEntries`` = 5,000 after it: etcd-io/etcd server/v3@v3.5.35
  etcdserver/server.go).

Prints etcd's VmRSS (/proc/PID/status) before and after, its peak (VmHWM), the bytes the gate
accepted, and the seconds taken.
"""

from __future__ import annotations

import argparse
import http.client
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "training-image"))

from elastic_trainer.etcd_gate import Limits, Upstream, serve  # noqa: E402
from elastic_trainer.etcd_gate.resolvers import Static  # noqa: E402

RUN = "bench-0a1b2c3d"
TIER_ETCD = ROOT / ".cache/controlplane/bin/etcd"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mib(pid: int, field: str = "VmRSS") -> float:
    """Resident memory (VmRSS) or its peak since the start (VmHWM), from /proc/PID/status."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field}")


class EtcdProcess:
    def __init__(self, binary: str, snapshot_count: int, gomemlimit: str):
        self.dir = tempfile.mkdtemp(prefix="etcd-mem-")
        client, peer = free_port(), free_port()
        self.endpoint = f"127.0.0.1:{client}"
        env = dict(os.environ, GOMEMLIMIT=gomemlimit) if gomemlimit else dict(os.environ)
        self.proc = subprocess.Popen(
            [binary, "--name=m", f"--data-dir={self.dir}/data", "--enable-v2=true",
             f"--listen-client-urls=http://{self.endpoint}", f"--advertise-client-urls=http://{self.endpoint}",
             f"--listen-peer-urls=http://127.0.0.1:{peer}", f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
             f"--initial-cluster=m=http://127.0.0.1:{peer}", f"--snapshot-count={snapshot_count}"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                c = http.client.HTTPConnection(*self.endpoint.split(":"), timeout=2)
                c.request("GET", "/v2/keys/")
                if c.getresponse().status == 200:
                    return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("etcd did not start")

    def close(self):
        self.proc.terminate()
        self.proc.wait(30)
        shutil.rmtree(self.dir, ignore_errors=True)


def put(conn: http.client.HTTPConnection, key: str, **form) -> int:
    conn.request(
        "PUT", "/v2/keys" + key, body=urlencode(form), headers={"Content-Type": "application/x-www-form-urlencoded"}
    )
    response = conn.getresponse()
    response.read()
    return response.status


def hostile(args, name: str, limits: Limits, writes: list[tuple[str, int]]) -> None:
    etcd = EtcdProcess(args.etcd, args.snapshot_count, args.gomemlimit)
    gate = serve(("127.0.0.1", 0), Upstream([etcd.endpoint]), Static({"127.0.0.1": RUN}), limits)
    try:
        time.sleep(1)
        before = rss_mib(etcd.proc.pid)
        conn = http.client.HTTPConnection("127.0.0.1", gate.server_address[1], timeout=60)
        assert put(conn, f"/torch/elastic/store/{RUN}", dir="true", prevExist="false") == 201
        started, accepted, refused = time.monotonic(), 0, ""
        for key, size in writes:
            status = put(conn, key, value="x" * size, ttl=7200)
            if status >= 300:
                refused = f", refused from then on ({status})"
                break
            accepted += size
        took = time.monotonic() - started
        time.sleep(2)
        after, peak = rss_mib(etcd.proc.pid), rss_mib(etcd.proc.pid, "VmHWM")
        print(
            f"{name:6} {Path(args.etcd).name} {version(args.etcd)} snapshot-count={args.snapshot_count} "
            f"GOMEMLIMIT={args.gomemlimit or '-'}: accepted {accepted / 2**20:.1f} MiB{refused}; "
            f"etcd {before:.0f} -> {after:.0f} MiB resident, peak {peak:.0f} ({took:.0f} s)",
            flush=True,
        )
    finally:
        gate.shutdown()
        gate.server_close()
        etcd.close()


def version(binary: str) -> str:
    out = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
    return out.split("\n")[0].split()[-1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--etcd", default=str(TIER_ETCD) if TIER_ETCD.exists() else shutil.which("etcd"))
    parser.add_argument("--snapshot-count", type=int, default=10_000)  # k8s/base/etcd/statefulset.yaml
    parser.add_argument("--gomemlimit", default="800MiB")  # k8s/base/etcd/statefulset.yaml
    parser.add_argument("--keys", type=int, default=300)
    parser.add_argument("--rewrites", type=int, default=2000)
    parser.add_argument("--only", choices=["old", "new", "state"], action="append")
    parser.add_argument("--max-value-bytes", type=int, default=Limits.max_value_bytes, help="the state's limit")
    args = parser.parse_args()
    store = f"/torch/elastic/store/{RUN}/k"
    new = Limits(max_value_bytes=args.max_value_bytes)
    old = Limits(max_store_value_bytes=new.max_value_bytes, max_store_bytes=2**40)
    runs = {
        "old": (old, [(f"{store}{i}", old.max_store_value_bytes) for i in range(args.keys)]),
        "new": (new, [(f"{store}{i}", new.max_store_value_bytes) for i in range(new.max_store_keys + 1)]),
        "state": (new, [(f"/torch/elastic/rendezvous/{RUN}", new.max_value_bytes)] * args.rewrites),
    }
    for name in args.only or list(runs):
        hostile(args, name, *runs[name])


if __name__ == "__main__":
    main()
