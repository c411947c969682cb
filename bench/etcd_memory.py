"""etcd's resident memory before and after hostile runs' writes through the etcd gate.

    .venv/bin/python bench/etcd_memory.py [--etcd BINARY] [--snapshot-count N] [--catchup-entries N]
        [--keys N] [--rewrites N] [--only old|new|state|attack] [--runs N] [--seconds S] [--direct]

A real etcd (v2 enabled, the StatefulSet's --snapshot-count, --experimental-snapshot-catchup-entries and
GOMEMLIMIT, k8s/base/etcd/statefulset.yaml; ``--catchup-entries 0`` leaves etcd's default, as 3.4 has no
such flag) and the gate in this process (elastic_trainer.etcd_gate), the run's pod at 127.0.0.1. Four runs,
each on a fresh etcd:

- ``old``: the gate's limits before the store's byte bounds (store values of 64 KiB, 20,000 keys): the run
  writes ``--keys`` store values of 64 KiB;
- ``new``: today's Limits: the run writes store values at the store-value limit until the gate refuses;
- ``state``: today's Limits but no rate or total bound: the run rewrites its state key, a value of
  ``--max-value-bytes`` (16 KiB; 96d3e26 measured 64 KiB), ``--rewrites`` times as fast as it can (each
  write is a raft entry kept in memory until a snapshot, and the catch-up entries after it: 5,000 unless
  set, etcd-io/etcd server/v3@v3.5.35 etcdserver/server.go DefaultSnapshotCatchUpEntries);
- ``attack``: today's Limits, the attacker's worst case: two gate replicas (the Deployment's), ``--runs``
  runs (a pod address each, processes of their own), half through each replica. Each run writes its state
  at the state's limit, then 4 KiB store values until refused (its store's bytes or what all runs hold),
  then rewrites its state for ``--seconds``, paced at its run's rate (hammering past it only meets 429s).
  This machine's gates pass fewer writes than their bound, so ``--direct`` sends the same writes straight
  to etcd at the two replicas' bound (``--gate-rate`` each) and each run its share of what all runs hold.

Prints etcd's VmRSS (/proc/PID/status) before and after, its peak (VmHWM), the largest heap live after
a collection (GODEBUG=gctrace=1 on etcd's stderr), the bytes the gate accepted, and the seconds taken.
docs/benchmarks.md "etcd's memory under hostile runs" has the figures.
"""

from __future__ import annotations

import argparse
import http.client
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "training-image"))

import multiprocessing  # noqa: E402

from elastic_trainer.etcd_gate import Limits, Upstream, serve  # noqa: E402
from elastic_trainer.etcd_gate.budget import write_cost  # noqa: E402
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
    def __init__(self, binary: str, snapshot_count: int, gomemlimit: str, catchup: int = 0, extra=()):
        self.dir = tempfile.mkdtemp(prefix="etcd-mem-")
        client, peer = free_port(), free_port()
        self.endpoint = f"127.0.0.1:{client}"
        env = dict(os.environ, GOMEMLIMIT=gomemlimit) if gomemlimit else dict(os.environ)
        env["GODEBUG"] = "gctrace=1"  # each collection's live heap on stderr (max_live_mib)
        self.log = open(f"{self.dir}/stderr", "wb")  # noqa: SIM115 (closed in close())
        self.proc = subprocess.Popen(
            [binary, "--name=m", f"--data-dir={self.dir}/data", "--enable-v2=true",
             f"--listen-client-urls=http://{self.endpoint}", f"--advertise-client-urls=http://{self.endpoint}",
             f"--listen-peer-urls=http://127.0.0.1:{peer}", f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
             f"--initial-cluster=m=http://127.0.0.1:{peer}", f"--snapshot-count={snapshot_count}",
             *([f"--experimental-snapshot-catchup-entries={catchup}"] if catchup else []), *extra],
            env=env, stdout=subprocess.DEVNULL, stderr=self.log,
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

    def max_live_mib(self) -> float:
        """The largest heap left live after a collection (gctrace's "A->B->C MB": C), in MiB."""
        lives = [int(m) for m in re.findall(rb"->\d+->(\d+) MB", Path(f"{self.dir}/stderr").read_bytes())]
        return max(lives, default=0) * 10**6 / 2**20

    def close(self):
        self.proc.terminate()
        self.proc.wait(30)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def put(conn: http.client.HTTPConnection, key: str, **form) -> int:
    conn.request(
        "PUT", "/v2/keys" + key, body=urlencode(form), headers={"Content-Type": "application/x-www-form-urlencoded"}
    )
    response = conn.getresponse()
    response.read()
    return response.status


def hostile(args, name: str, limits: Limits, writes: list[tuple[str, int]]) -> None:
    etcd = EtcdProcess(args.etcd, args.snapshot_count, args.gomemlimit, args.catchup_entries)
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
            f"{name:6} {Path(args.etcd).name} {version(args.etcd)} {flags(args)} "
            f": accepted {accepted / 2**20:.1f} MiB{refused}; "
            f"etcd {before:.0f} -> {after:.0f} MiB resident, peak {peak:.0f}, live after a collection at most "
            f"{etcd.max_live_mib():.0f} MiB ({took:.0f} s)",
            flush=True,
        )
    finally:
        gate.shutdown()
        gate.server_close()
        etcd.close()


def flags(args) -> str:
    catchup = f" catchup-entries={args.catchup_entries}" if args.catchup_entries else ""
    return f"snapshot-count={args.snapshot_count}{catchup} GOMEMLIMIT={args.gomemlimit or '-'}"


def attacker(port: int, source: str, run: str, limits: Limits, seconds: float, out, rate: float, share: int) -> None:
    """One hostile run (a process of its own): its state, its store until refused (or, straight to etcd, its
    ``share`` of what the gates let all runs hold), then state rewrites paced at ``rate`` bytes a second,
    each costing what the gate charges (budget.write_cost)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60, source_address=(source, 0))
    state, store = f"/torch/elastic/rendezvous/{run}", f"/torch/elastic/store/{run}"
    value = "x" * limits.max_value_bytes
    counts = {"state": put(conn, state, value=value, ttl=7200), "store": 0, "rewrites": 0, "refused": 0}
    put(conn, store, dir="true", prevExist="false")
    held = len(state) + len(value)
    while held < share:
        key = f"{store}/k{counts['store']}"
        if put(conn, key, value="s" * limits.max_store_value_bytes, ttl=7200) >= 300:
            break
        counts["store"] += 1
        held += len(key) + limits.max_store_value_bytes
    interval = write_cost(state, value) / rate
    started = next_at = time.monotonic()
    while time.monotonic() - started < seconds:
        status = put(conn, state, value=value, ttl=7200)
        counts["rewrites" if status < 300 else "refused"] += 1
        next_at += interval
        time.sleep(max(0.0, next_at - time.monotonic()))
    out.put(counts)


def attack(args, limits: Limits) -> None:
    etcd = EtcdProcess(args.etcd, args.snapshot_count, args.gomemlimit, args.catchup_entries, args.etcd_flag)
    print(f"etcd at {etcd.endpoint}", file=sys.stderr, flush=True)
    table = {f"127.0.1.{i + 1}": f"attack-{i:04d}" for i in range(args.runs)}
    gates = [serve(("127.0.0.1", 0), Upstream([etcd.endpoint]), Static(table), limits) for _ in range(2)]
    context = multiprocessing.get_context("spawn")
    out = context.Queue()
    try:
        time.sleep(1)
        before = rss_mib(etcd.proc.pid)
        if args.direct:  # what the two gates pass at most, straight to etcd: this machine's gates pass less
            port, rate = int(etcd.endpoint.split(":")[1]), 2 * limits.max_gate_write_bytes_per_s / args.runs
            share = 2 * limits.max_held_bytes // args.runs
        else:
            port, rate, share = None, limits.max_run_write_bytes_per_s, 2**62
        workers = [
            context.Process(
                target=attacker,
                args=(port or gates[i % 2].server_address[1], source, run, limits, args.seconds, out, rate, share),
            )
            for i, (source, run) in enumerate(table.items())
        ]
        started = time.monotonic()
        for worker in workers:
            worker.start()
        heap = Sampler(etcd.endpoint).start()
        counts = [out.get(timeout=args.seconds + 600) for _ in workers]
        heap.stop()
        for worker in workers:
            worker.join(60)
        took = time.monotonic() - started
        time.sleep(2)
        after, peak = rss_mib(etcd.proc.pid), rss_mib(etcd.proc.pid, "VmHWM")
        rewrites = sum(c["rewrites"] for c in counts)
        held = sum(c["store"] * (limits.max_store_value_bytes + 40) for c in counts)
        print(
            f"attack {Path(args.etcd).name} {version(args.etcd)} {flags(args)}: {args.runs} runs "
            f"{'straight to etcd at the 2 gates bound' if args.direct else 'through 2 gates'}, "
            f"{sum(c['store'] for c in counts)} store values of {limits.max_store_value_bytes} B, held "
            f"~{held / 2**20:.1f} MiB; {rewrites} state rewrites of {limits.max_value_bytes} B in {args.seconds} s "
            f"({rewrites / args.seconds:.0f}/s, {rewrites * limits.max_value_bytes / args.seconds / 2**20:.1f} MiB/s "
            f"accepted, "
            f"{sum(c['refused'] for c in counts)} refused); etcd {before:.0f} -> {after:.0f} MiB resident, "
            f"peak {peak:.0f}, Go heap in use at most {heap.peak / 2**20:.0f}, live after a collection at most "
            f"{etcd.max_live_mib():.0f} MiB ({took:.0f} s)",
            flush=True,
        )
    finally:
        for gate in gates:
            gate.shutdown()
            gate.server_close()
        etcd.close()


class Sampler:
    """The largest ``go_memstats_heap_inuse_bytes`` etcd reports (its /metrics), sampled every 0.2 s."""

    def __init__(self, endpoint: str):
        self.endpoint, self.peak, self.done = endpoint, 0.0, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Sampler:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.done.set()
        self.thread.join()

    def _run(self) -> None:
        while not self.done.wait(0.2):
            try:
                conn = http.client.HTTPConnection(*self.endpoint.split(":"), timeout=5)
                conn.request("GET", "/metrics")
                for line in conn.getresponse().read().decode().splitlines():
                    if line.startswith("go_memstats_heap_inuse_bytes "):
                        self.peak = max(self.peak, float(line.split()[1]))
                conn.close()
            except OSError:
                pass


def version(binary: str) -> str:
    out = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
    return out.split("\n")[0].split()[-1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--etcd", default=str(TIER_ETCD) if TIER_ETCD.exists() else shutil.which("etcd"))
    parser.add_argument("--snapshot-count", type=int, default=5000)  # k8s/base/etcd/statefulset.yaml
    parser.add_argument("--catchup-entries", type=int, default=1000)  # k8s/base/etcd/statefulset.yaml
    parser.add_argument("--runs", type=int, default=24)
    parser.add_argument("--direct", action="store_true", help="attack: straight to etcd at the gates' bound")
    parser.add_argument("--etcd-flag", action="append", default=[], help="more etcd flags (--enable-pprof)")
    parser.add_argument("--seconds", type=int, default=120)
    parser.add_argument("--gomemlimit", default="800MiB")  # k8s/base/etcd/statefulset.yaml
    parser.add_argument("--keys", type=int, default=300)
    parser.add_argument("--rewrites", type=int, default=2000)
    parser.add_argument("--only", choices=["old", "new", "state", "attack"], action="append")
    parser.add_argument("--max-value-bytes", type=int, default=Limits.max_value_bytes, help="the state's limit")
    parser.add_argument("--max-held-bytes", type=int, default=Limits.max_held_bytes, help="per gate replica")
    parser.add_argument("--gate-rate", type=int, default=Limits.max_gate_write_bytes_per_s, help="per gate replica")
    args = parser.parse_args()
    store = f"/torch/elastic/store/{RUN}/k"
    new = Limits(max_value_bytes=args.max_value_bytes, max_held_bytes=args.max_held_bytes,
                 max_gate_write_bytes_per_s=args.gate_rate)  # fmt: skip
    # Without the bounds of all runs (budget.py): no rate, no total held.
    free = dict(max_held_bytes=2**40, max_run_write_bytes_per_s=2**40, max_run_write_burst_bytes=2**40,
                max_gate_write_bytes_per_s=2**40, max_gate_write_burst_bytes=2**40)  # fmt: skip
    old = Limits(max_value_bytes=64 * 1024, max_store_value_bytes=64 * 1024, max_store_bytes=2**40, **free)
    unpaced = Limits(max_value_bytes=args.max_value_bytes, **free)
    runs = {
        "old": (old, [(f"{store}{i}", old.max_store_value_bytes) for i in range(args.keys)]),
        "new": (new, [(f"{store}{i}", new.max_store_value_bytes) for i in range(new.max_store_keys + 1)]),
        "state": (unpaced, [(f"/torch/elastic/rendezvous/{RUN}", new.max_value_bytes)] * args.rewrites),
    }
    for name in args.only or [*runs, "attack"]:
        if name == "attack":
            attack(args, new)
        else:
            hostile(args, name, *runs[name])


if __name__ == "__main__":
    main()
