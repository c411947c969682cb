"""``python -m elastic_trainer.etcd_gate --listen 0.0.0.0:2379 --etcd etcd-0.etcd-peers:2379 ...``

In a cluster, pods are resolved through the API server with the pod's own service account
(resolvers.Pods.in_cluster: list pods and get jobs in its namespace, k8s/base/etcd-gate/role.yaml);
``--static ADDRESS=RUN_ID`` (repeatable) replaces that with a fixed table, as local runs and tests use.
Every ``--sweep-interval-s`` the gate deletes the store's empty directories (sweep.py).
"""

from __future__ import annotations

import argparse
import signal
import sys

from elastic_trainer.etcd_gate.resolvers import Pods, Static
from elastic_trainer.etcd_gate.rules import Limits
from elastic_trainer.etcd_gate.server import Upstream, serve
from elastic_trainer.etcd_gate.sweep import INTERVAL_S, Sweeper, count_held


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m elastic_trainer.etcd_gate")
    parser.add_argument("--listen", default="0.0.0.0:2379", help="HOST:PORT to serve (default %(default)s)")
    parser.add_argument("--etcd", action="append", required=True, help="an etcd client HOST:PORT (repeatable)")
    parser.add_argument("--static", action="append", default=[], metavar="ADDRESS=RUN_ID")
    parser.add_argument("--max-value-bytes", type=int, default=Limits.max_value_bytes)
    parser.add_argument("--max-store-keys", type=int, default=Limits.max_store_keys)
    parser.add_argument("--max-ttl-s", type=int, default=Limits.max_ttl_s)
    parser.add_argument("--max-store-value-bytes", type=int, default=Limits.max_store_value_bytes)
    parser.add_argument("--max-store-bytes", type=int, default=Limits.max_store_bytes)
    parser.add_argument("--max-run-write-bytes-per-s", type=int, default=Limits.max_run_write_bytes_per_s)
    parser.add_argument("--max-run-write-burst-bytes", type=int, default=Limits.max_run_write_burst_bytes)
    parser.add_argument("--max-gate-write-bytes-per-s", type=int, default=Limits.max_gate_write_bytes_per_s)
    parser.add_argument("--max-gate-write-burst-bytes", type=int, default=Limits.max_gate_write_burst_bytes)
    parser.add_argument("--max-held-bytes", type=int, default=Limits.max_held_bytes)
    parser.add_argument("--sweep-interval-s", type=int, default=INTERVAL_S, help="(default %(default)s)")
    args = parser.parse_args(argv)
    problems = []
    table = {}
    for entry in args.static:
        address, sep, run_id = entry.partition("=")
        if not sep or not address or not run_id:
            problems.append(f"--static must be ADDRESS=RUN_ID, got {entry!r}")
        table[address] = run_id
    host, sep, port = args.listen.rpartition(":")
    if not sep or not port.isdigit():
        problems.append(f"--listen must be HOST:PORT, got {args.listen!r}")
    for endpoint in args.etcd:
        if not endpoint.rpartition(":")[2].isdigit():
            problems.append(f"--etcd must be HOST:PORT, got {endpoint!r}")
    try:
        limits = Limits(
            max_value_bytes=args.max_value_bytes,
            max_store_keys=args.max_store_keys,
            max_ttl_s=args.max_ttl_s,
            max_store_value_bytes=args.max_store_value_bytes,
            max_store_bytes=args.max_store_bytes,
            max_run_write_bytes_per_s=args.max_run_write_bytes_per_s,
            max_run_write_burst_bytes=args.max_run_write_burst_bytes,
            max_gate_write_bytes_per_s=args.max_gate_write_bytes_per_s,
            max_gate_write_burst_bytes=args.max_gate_write_burst_bytes,
            max_held_bytes=args.max_held_bytes,
        )
    except ValueError as error:
        problems.extend(f"--{problem.replace('_', '-')}" for problem in str(error).split("; "))
    if args.sweep_interval_s < 1:
        problems.append(f"--sweep-interval-s must be a whole number >= 1, got {args.sweep_interval_s}")
    if problems:
        for problem in problems:
            print(f"etcd-gate: {problem}", file=sys.stderr)
        return 2
    resolver = Static(table) if table else Pods.in_cluster()
    upstream = Upstream(args.etcd)
    gate = serve((host, int(port)), upstream, resolver, limits)
    try:  # what all runs hold, before the first sweep (budget.Held); etcd away: the sweep's turn
        count_held(upstream, gate.held)
    except (ConnectionError, ValueError, KeyError, RecursionError) as error:  # RecursionError: sweep.py Sweeper
        print(f"etcd-gate: could not count what etcd holds yet: {error}", file=sys.stderr, flush=True)
    sweeper = Sweeper(upstream, args.sweep_interval_s, gate.held).start()
    print(f"etcd-gate: serving {host}:{gate.server_address[1]} for {', '.join(args.etcd)}", file=sys.stderr, flush=True)
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    sweeper.stop()
    gate.shutdown()
    return 0


if __name__ == "__main__":
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    sys.exit(main())
