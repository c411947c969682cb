"""Rendezvous at scale on this machine: 4 to 64 nodes in one job, 20 jobs at once (issue 15).

    python bench/rendezvous.py            # sizes 4..64 and 20 x 4, one etcd member and three
    python bench/rendezvous.py --quick    # sizes 4 and 8 and 5 x 4, one member, one repeat

Each node is a process running torch's own etcd-v2 dynamic rendezvous handler, as every torchrun
agent does, without the agent's workers (training-image/elastic_trainer/local/rdzvnode.py: torch's
rendezvous code without ``import torch``, so 64 of them fit in memory). For each size, with the
settings the launcher picks for that maximum node count (``--conf`` to try others), every repeat
starts a fresh job and measures, on one clock:

- form: all nodes call ``next_rendezvous`` together; until every node is in one round;
- kill: one node SIGKILLed, the survivors re-enter at once; until they are in one round without it
  (a node is dropped when its heartbeats stop: keep_alive_interval x keep_alive_max_attempt, then
  the last call);
- replace: a new node joins; until all are in one round again;

and, from etcd's /metrics and the handlers' own counters, writes per second (raft proposals: every
heartbeat, join and failed compare-and-swap is one) and compare-and-swap conflicts, in each phase
and over ``--steady-s`` of heartbeats after the group formed (with etcd's CPU), and how many
times a live node was declared dead while forming (its heartbeat older than interval x attempts:
contention, or CPU starvation, so a figure here, not an assert in the tests). Jobs use
``--nnodes=N/2:N``. Medians with every sample. A group that does not form within ``--timeout`` is
reported as failed. Last, etcd's memory after ``--etcd-memory-writes`` writes of the largest state
measured, with etcd's default ``--snapshot-count`` and with k8s/base/etcd's: etcd keeps every write
since its last snapshot in memory, so that, not the tiny v2 store, sizes its memory limit.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "training-image"))

from elastic_trainer.launch.rdzvconf import format_rdzv_conf, parse_rdzv_conf, rdzv_conf_for_nodes
from elastic_trainer.local import etcd_binary, free_port
from elastic_trainer.local.rdzvfleet import (
    NodeHost,
    RdzvJob,
    RendezvousFailed,
    etcd_metrics,
    rendezvous_state_bytes,
)

WRITES = "etcd_server_proposals_committed_total"
CPU = "etcd_cpu_seconds"


def _say(quiet: bool, text: str) -> None:
    if not quiet:
        print(text, file=sys.stderr, flush=True)


class EtcdCluster:
    """etcd members on loopback, one cluster (k8s/base/etcd runs three); v2 API on."""

    def __init__(self, members: int = 3, extra_args: Sequence[str] = ()) -> None:
        self.members = members
        self.extra_args = list(extra_args)
        self.procs: list[subprocess.Popen[bytes]] = []
        self.dirs: list[str] = []
        self.endpoints: list[str] = []

    def __enter__(self) -> EtcdCluster:
        binary = etcd_binary() or "/usr/bin/etcd"
        ports = [(free_port(), free_port()) for _ in range(self.members)]
        cluster = ",".join(f"m{i}=http://127.0.0.1:{peer}" for i, (_, peer) in enumerate(ports))
        for i, (client, peer) in enumerate(ports):
            self.dirs.append(tempfile.mkdtemp(prefix="tf-etcd-"))
            self.procs.append(subprocess.Popen(
                [binary, f"--name=m{i}", f"--data-dir={self.dirs[-1]}",
                 f"--listen-client-urls=http://127.0.0.1:{client}",
                 f"--advertise-client-urls=http://127.0.0.1:{client}",
                 f"--listen-peer-urls=http://127.0.0.1:{peer}",
                 f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                 f"--initial-cluster={cluster}", "--initial-cluster-state=new",
                 "--enable-v2=true", "--log-level=error", *self.extra_args],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            self.endpoints.append(f"127.0.0.1:{client}")
        deadline = time.monotonic() + 30
        for endpoint in self.endpoints:
            while True:
                try:
                    with urllib.request.urlopen(f"http://{endpoint}/health", timeout=1) as reply:
                        if json.loads(reply.read()).get("health") == "true":
                            break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    self.__exit__()
                    raise RuntimeError("the etcd cluster did not become healthy in 30 s")
                time.sleep(0.2)
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in self.procs:
            with suppress(ProcessLookupError):
                proc.kill()
            proc.wait()
        for directory in self.dirs:
            shutil.rmtree(directory, ignore_errors=True)


def _rss_kb(pid: int, field: str = "VmRSS") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def etcd_memory(snapshot_count: int, writes: int, value_bytes: int, clients: int = 8) -> dict:
    """etcd's resident memory after ``writes`` v2 writes of ``value_bytes`` to one key, as heartbeats do.

    etcd keeps every raft entry since its last snapshot in memory (plus 5,000 for slow followers),
    so the v2 store's small size says little: --snapshot-count bounds the memory.
    """
    import http.client
    import threading

    value = "x" * value_bytes
    with EtcdCluster(1, [f"--snapshot-count={snapshot_count}"]) as etcd:
        pid = etcd.procs[0].pid
        start_kb, start_cpu = _rss_kb(pid), _cpu_seconds(pid)
        host, port = etcd.endpoints[0].split(":")
        body = urllib.parse.urlencode({"value": value, "ttl": 7200})
        started = time.monotonic()

        def writer(count: int) -> None:
            conn = http.client.HTTPConnection(host, int(port), timeout=30)
            for _ in range(count):
                conn.request("PUT", "/v2/keys/torch/elastic/rendezvous/bench", body,
                             {"Content-Type": "application/x-www-form-urlencoded"})
                conn.getresponse().read()
            conn.close()

        threads = [threading.Thread(target=writer, args=(writes // clients,)) for _ in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        seconds = time.monotonic() - started
        return {"snapshot_count": snapshot_count, "writes": writes // clients * clients, "value_bytes": value_bytes,
                "writes_per_s": round(writes / seconds),
                "cpu_s_per_1000_writes": round((_cpu_seconds(pid) - start_cpu) / writes * 1000, 2),
                "rss_start_mb": round(start_kb / 1024),
                "rss_end_mb": round(_rss_kb(pid) / 1024), "rss_peak_mb": round(_rss_kb(pid, "VmHWM") / 1024)}


def _median(values: Sequence[float]) -> float | None:
    return round(statistics.median(values), 2) if values else None


def _summary(samples: Sequence[float]) -> dict:
    return {"median": _median(samples), "samples": list(samples)}


def _rate(before: Mapping[str, float], after: Mapping[str, float], seconds: float, key: str = WRITES) -> float:
    return round((after[key] - before[key]) / max(seconds, 1e-3), 2 if key == CPU else 1)


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def metrics_of(endpoint: str, pids: Sequence[int]) -> Callable[[], dict[str, float]]:
    """etcd's counters, plus the CPU seconds its members have used (``CPU``)."""
    return lambda: {**etcd_metrics(endpoint), CPU: sum(_cpu_seconds(pid) for pid in pids)}


def _conflicts(host: NodeHost, names: Sequence[str]) -> dict[str, int]:
    """Each node's compare-and-swap conflicts so far."""
    return {name: counts["conflicts"] for name, counts in host.counters(names).items()}


def _expiries(host: NodeHost, names: Sequence[str]) -> dict:
    """Live nodes declared dead so far (each declaration by each node counted), the oldest any node's
    own heartbeat was in a state it read, and the oldest heartbeat of a node declared dead (seconds):
    a live node is declared dead when its heartbeat is older than interval x attempts (contention
    or CPU starvation delaying it), which tests/training_image/test_rdzvfleet.py cannot assert
    against at every load."""
    counts = host.counters(names).values()
    return {"declared_dead": sum(c["declared_dead"] for c in counts),
            "late_s": max((c["late_s"] for c in counts), default=0.0),
            "dead_age_s": max((c["dead_age_s"] for c in counts), default=0.0)}


def _delta(before: Mapping[str, int], after: Mapping[str, int]) -> int:
    """Conflicts between two readings, over the nodes alive at the second (a new node starts at 0)."""
    return sum(count - before.get(name, 0) for name, count in after.items())


def _timed(phase: Callable[[], dict], metrics: Callable[[], dict]) -> tuple[dict, float]:
    before = metrics()
    result = phase()
    after = metrics()
    return result, _rate(before, after, result["seconds"])


def one_job(host: NodeHost, endpoints: Sequence[str], metrics: Callable[[], dict], nodes: int,
            conf: Mapping[str, str], timeout: float, steady_s: float) -> dict:
    """form, steady heartbeats, kill -> re-form, replacement join, for one fresh job of ``nodes``."""
    job = RdzvJob(host, f"b{nodes}-{uuid.uuid4().hex[:6]}", endpoints, max(1, nodes // 2), nodes, conf)
    out: dict = {}
    try:
        host.spawn(job.start(nodes))
        memory = [host.memory_kb(name) for name in job.live]
        out["rss_mb"] = round(statistics.median(m["rss_kb"] for m in memory) / 1024, 1)
        out["pss_mb"] = round(statistics.median(m["pss_kb"] for m in memory) / 1024, 1)

        def form() -> dict:
            return job.wait_formed(host.signal(job.live, signal.SIGUSR1), timeout)

        out["form"], out["form_writes_per_s"] = _timed(form, metrics)
        out["form_expiries"] = _expiries(host, job.live)
        out["state_bytes"] = rendezvous_state_bytes(endpoints[0], job.run_id)
        # at least two heartbeats per node in the window (a heartbeat is due every keep_alive_interval)
        window = max(steady_s, 2 * float(conf.get("keep_alive_interval", 5)))
        before, start = _conflicts(host, job.live), metrics()
        time.sleep(window)
        after, end = _conflicts(host, job.live), metrics()
        out["steady_writes_per_s"] = _rate(start, end, window)
        out["steady_etcd_cpu"] = _rate(start, end, window, CPU)
        out["steady_conflicts_per_s"] = round(_delta(before, after) / window, 1)

        before = _conflicts(host, job.live)

        def kill() -> dict:
            _, killed_at = job.kill_one()
            return job.wait_formed(killed_at, timeout)

        out["kill"], out["kill_writes_per_s"] = _timed(kill, metrics)

        def replace() -> dict:
            requests = job.start(1)
            host.spawn(requests)
            return job.wait_formed(host.signal([requests[0]["name"]], signal.SIGUSR1), timeout)

        out["replace"], out["replace_writes_per_s"] = _timed(replace, metrics)
        out["conflicts_kill_and_replace"] = _delta(before, _conflicts(host, job.live))
    except RendezvousFailed as exc:
        out["failed"] = str(exc)[:300]
    finally:
        host.signal(job.live, signal.SIGKILL)
    return out


def concurrent_jobs(host: NodeHost, endpoints: Sequence[str], metrics: Callable[[], dict], jobs: int, nodes: int,
                    timeout: float, steady_s: float) -> dict:
    """``jobs`` jobs of ``nodes`` on one etcd, all started together, then one node of each killed and replaced."""
    conf = rdzv_conf_for_nodes(nodes)
    group = [RdzvJob(host, f"c{i}-{uuid.uuid4().hex[:6]}", endpoints, max(1, nodes // 2), nodes, conf)
             for i in range(jobs)]
    out: dict = {"jobs": jobs, "nodes_per_job": nodes, "rdzv_conf": format_rdzv_conf(conf)}
    try:
        host.spawn([r for job in group for r in job.start(nodes)])
        start = metrics()
        since = host.signal([n for job in group for n in job.live], signal.SIGUSR1)
        formed = [job.wait_formed(since, timeout) for job in group]
        out["form_s"] = _summary([f["seconds"] for f in formed])
        out["form_s"]["max"] = max(f["seconds"] for f in formed)
        out["partial_rounds"] = sum(f["partial_rounds"] for f in formed)
        out["form_writes_per_s"] = _rate(start, metrics(), max(f["seconds"] for f in formed))
        out["form_expiries"] = _expiries(host, [n for job in group for n in job.live])
        start = metrics()
        window = max(steady_s, 2 * float(conf["keep_alive_interval"]))
        time.sleep(window)
        end = metrics()
        out["steady_writes_per_s"] = _rate(start, end, window)
        out["steady_etcd_cpu"] = _rate(start, end, window, CPU)
        kills = [job.kill_one() for job in group]
        reformed = [job.wait_formed(at, timeout) for job, (_, at) in zip(group, kills, strict=True)]
        out["kill_s"] = _summary([f["seconds"] for f in reformed])
        out["kill_s"]["max"] = max(f["seconds"] for f in reformed)
        requests = [job.start(1)[0] for job in group]
        host.spawn(requests)
        since = host.signal([r["name"] for r in requests], signal.SIGUSR1)
        joined = [job.wait_formed(since, timeout) for job in group]
        out["replace_s"] = _summary([f["seconds"] for f in joined])
        out["replace_s"]["max"] = max(f["seconds"] for f in joined)
    except RendezvousFailed as exc:
        out["failed"] = str(exc)[:300]
    finally:
        host.signal([n for job in group for n in job.live], signal.SIGKILL)
    return out


def sweep(host: NodeHost, endpoints: Sequence[str], metrics: Callable[[], dict], sizes: Sequence[int],
          args: argparse.Namespace) -> list[dict]:
    repeats, conf_text, timeout, steady_s, quiet = args.repeats, args.conf, args.timeout, args.steady_s, args.json
    rows = []
    for nodes in sizes:
        conf = parse_rdzv_conf(conf_text) if conf_text else rdzv_conf_for_nodes(nodes)
        runs = []
        for _ in range(repeats):
            runs.append(one_job(host, endpoints, metrics, nodes, conf, timeout, steady_s))
            run = runs[-1]
            _say(quiet, f"  {nodes} nodes ({format_rdzv_conf(conf)}): " + (
                f"FAILED {run['failed']}" if "failed" in run else
                f"form {run['form']['seconds']} s ({run['form']['rounds']} rounds, "
                f"{run['form_expiries']['declared_dead']} declared dead), kill {run['kill']['seconds']} s, "
                f"replace {run['replace']['seconds']} s, steady {run['steady_writes_per_s']} writes/s"))
        ok = [r for r in runs if "failed" not in r]

        def pick(key: str, field: str | None = None, runs: list[dict] = ok) -> dict:
            return _summary([r[key][field] if field else r[key] for r in runs if key in r])

        rows.append({
            "nodes": nodes, "nnodes": f"{max(1, nodes // 2)}:{nodes}", "rdzv_conf": format_rdzv_conf(conf),
            "failed": len(runs) - len(ok), "failures": [r["failed"] for r in runs if "failed" in r],
            "form_s": pick("form", "seconds", [r for r in runs if "form" in r]),
            "form_rounds": pick("form", "rounds", [r for r in runs if "form" in r]),
            "form_declared_dead": pick("form_expiries", "declared_dead", [r for r in runs if "form_expiries" in r]),
            "form_late_s": pick("form_expiries", "late_s", [r for r in runs if "form_expiries" in r]),
            "kill_to_reformed_s": pick("kill", "seconds"), "kill_rounds": pick("kill", "rounds"),
            "replacement_join_s": pick("replace", "seconds"), "replace_rounds": pick("replace", "rounds"),
            "etcd_cpu_cores_steady": pick("steady_etcd_cpu"),
            "writes_per_s": {"form": pick("form_writes_per_s"), "steady": pick("steady_writes_per_s"),
                             "kill": pick("kill_writes_per_s"), "replace": pick("replace_writes_per_s")},
            "cas_conflicts": {"steady_per_s": pick("steady_conflicts_per_s"),
                              "kill_and_replace": pick("conflicts_kill_and_replace")},
            "state_bytes": pick("state_bytes"), "rss_mb": pick("rss_mb"), "pss_mb": pick("pss_mb"),
        })
    return rows


def table(result: dict) -> str:
    """The medians as a Markdown table (README.md's "Rendezvous at scale" is written from it)."""
    def short(text: str) -> str:
        conf = parse_rdzv_conf(text)
        return (f"{conf['keep_alive_interval']} s x {conf['keep_alive_max_attempt']}, "
                f"last call {conf['last_call_timeout']} s")

    lines = ["| etcd | nodes | heartbeat, last call | form | kill -> re-formed | replacement | writes/s | etcd CPU "
             "| state |",
             "|---|---|---|---|---|---|---|---|---|"]
    for run in result["runs"]:
        for row in run["sizes"]:
            failed = f" ({row['failed']} failed)" if row["failed"] else ""
            lines.append(
                f"| {run['etcd_members']} | {row['nodes']} | {short(row['rdzv_conf'])} "
                f"| {row['form_s']['median']} s{failed} "
                f"| {row['kill_to_reformed_s']['median']} s | {row['replacement_join_s']['median']} s "
                f"| {row['writes_per_s']['steady']['median']} | {row['etcd_cpu_cores_steady']['median']} "
                f"| {row['state_bytes']['median']} B |")
        if "concurrent" in run:
            c = run["concurrent"]
            if "failed" in c:
                lines.append(f"| {run['etcd_members']} | {c['jobs']} x {c['nodes_per_job']} | {short(c['rdzv_conf'])} "
                             f"| FAILED: {c['failed']} | | | | | |")
            else:
                lines.append(
                    f"| {run['etcd_members']} | {c['jobs']} x {c['nodes_per_job']} | {short(c['rdzv_conf'])} "
                    f"| {c['form_s']['median']} s (max {c['form_s']['max']}) | {c['kill_s']['median']} s "
                    f"(max {c['kill_s']['max']}) | {c['replace_s']['median']} s (max {c['replace_s']['max']}) "
                    f"| {c['steady_writes_per_s']} | {c['steady_etcd_cpu']} | |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print only the JSON object on stdout")
    parser.add_argument("--quick", action="store_true", help="sizes 4 and 8, 5 jobs x 4, one member, one repeat")
    parser.add_argument("--sizes", default="4,8,16,32,64", help="comma-separated node counts of one job")
    parser.add_argument("--repeats", type=int, default=3, help="fresh jobs per size")
    parser.add_argument("--jobs", type=int, default=20, help="concurrent jobs of --job-nodes nodes (0: skip)")
    parser.add_argument("--job-nodes", type=int, default=4)
    parser.add_argument("--members", default="1,3", help="etcd cluster sizes to run against")
    parser.add_argument("--conf", help="rdzv_conf for every size instead of the launcher's choice, e.g. "
                                       "keep_alive_interval=1,keep_alive_max_attempt=3,last_call_timeout=1")
    parser.add_argument("--timeout", type=float, default=120, help="seconds a phase may take before it counts "
                                                                   "as failed")
    parser.add_argument("--steady-s", type=float, default=5, help="seconds of heartbeats measured after forming")
    parser.add_argument("--etcd-memory-writes", type=int, default=30_000,
                        help="writes of the largest state to one etcd, with --snapshot-count 100000 (etcd's default) "
                             "and 10000, for its memory (0: skip)")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.repeats, args.jobs, args.members, args.steady_s = "4,8", 1, 5, "1", 3
        args.etcd_memory_writes = min(args.etcd_memory_writes, 3000)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    quiet = args.json
    load = os.getloadavg()
    result: dict = {"cpus": os.cpu_count(), "loadavg_at_start": [round(x, 2) for x in load], "statistic": "median",
                    "runs": []}
    with tempfile.TemporaryDirectory(prefix="tf-bench-rdzv-") as tmp, NodeHost(Path(tmp) / "host.log") as host:
        result["host_rss_mb"] = round(_rss_kb(host.proc.pid) / 1024, 1)
        for members in [int(m) for m in args.members.split(",")]:
            _say(quiet, f"etcd: {members} member(s)")
            with EtcdCluster(members) as etcd:
                metrics = metrics_of(etcd.endpoints[0], [proc.pid for proc in etcd.procs])
                run = {"etcd_members": members, "sizes": sweep(host, etcd.endpoints, metrics, sizes, args)}
                if args.jobs:
                    run["concurrent"] = concurrent_jobs(host, etcd.endpoints, metrics, args.jobs, args.job_nodes,
                                                        args.timeout, args.steady_s)
                    _say(quiet, f"  {args.jobs} jobs x {args.job_nodes}: {json.dumps(run['concurrent'])}")
                result["runs"].append(run)
    if args.etcd_memory_writes:
        # the largest state measured above is what a 64-node job's heartbeats write
        largest = max((row["state_bytes"]["median"] or 0 for run in result["runs"] for row in run["sizes"]),
                      default=0) or 7000
        result["etcd_memory"] = []
        for count in (100_000, 10_000):
            result["etcd_memory"].append(etcd_memory(count, args.etcd_memory_writes, int(largest)))
            _say(quiet, f"  etcd memory: {json.dumps(result['etcd_memory'][-1])}")
    result["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    _say(quiet, table(result))
    print(json.dumps(result, indent=None if args.json else 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
