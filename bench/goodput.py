"""Goodput under chaos: the same job, the same fault schedule, in-place recovery against restart (issue 14).

    python bench/goodput.py --json            # 10 minutes per mode: a node killed every 60 s, replaced 20 s later
    python bench/goodput.py --quick --json    # 60 s per mode: every 20 s, replaced 7 s later
    python bench/goodput.py --overhead --json # one replica group (a GPU): wrapper overhead, heal times

``--overhead`` (goodput_overhead.py) is the issue's GPU run: one replica group against the bare
loop, and heal times; it runs unchanged on a CPU (``--quick``).

Three nodes of the synthetic job (CPU, gloo) run for ``--duration`` seconds under the schedule,
once per mode:

- ``restart``: Torchfleet's launcher (torchrun, etcd-v2 rendezvous, ``--nnodes=2:3``); a kill and a
  join each restart every worker, which resume from the last checkpoint (localrun.py);
- ``inplace``: ``TORCHFLEET_RECOVERY=inplace``, one replica group per node and a real torchft
  Lighthouse (inplacerun.py); the survivors go on, the replacement heals from a peer;

and without faults: ``baseline`` (the restart mode's launcher and loop, the plain job) and the
in-place job.

Figures, medians with every sample:

- ``goodput``: useful steps per second under chaos / steps per second of the same mode without
  faults (``baseline`` for restart; a fault-free in-place run for inplace, whose rate against the
  baseline is ``inplace_overhead``: the wrapper's per-step quorum and commit vote). Useful steps
  are the net progress of the step counter over the window (a step redone after a restore counts
  once); ``goodput_vs_bare`` (inplace): against ``baseline``, both costs together;
- ``sample_goodput`` (inplace): the same, counting each step by the share of the global batch
  it trained (a step of 2 groups out of 3 trains 2/3 of it, docs/recovery-modes.md),
  so the two modes can also be compared by samples;
- ``resume_s``: from a SIGKILL until the survivors' next step; ``join_s``: from a replacement's
  start until it trains with the others;
- ``redone_steps``: per fault, committed steps lost and trained again (the restart mode resumes
  from the last checkpoint; the in-place mode loses at most the uncommitted step in flight,
  which is dropped, not counted here).

The machine's load is printed with the figures (``load_avg``): on a shared machine, say so when
quoting them.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "training-image"))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # goodput_overhead, also when loaded by a test

from elastic_trainer.local import Etcd, LocalJob
from elastic_trainer.local.inplacerun import InplaceJob
from goodput_overhead import TASKS, bare_loop
from goodput_overhead import run as run_overhead

NODES = 3
CHECKPOINT_EVERY = 50
SCRIPT_ARGS = ["--total-steps=100000000", "--global-batch-size=48", f"--checkpoint-every={CHECKPOINT_EVERY}",
               "--step-delay-s=0.02", "--keep-checkpoints=2"]
FULL = {"duration": 600.0, "period": 60.0, "replace_after": 20.0, "baseline": 120.0}
QUICK = {"duration": 60.0, "period": 20.0, "replace_after": 7.0, "baseline": 30.0}


def _say(quiet: bool, text: str) -> None:
    if not quiet:
        print(text, file=sys.stderr, flush=True)


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 3) if values else None


class Run:
    """One job under the schedule; ``start(name)``/``kill(node)`` hide which harness it is."""

    def __init__(self, mode: str, workdir: Path, etcd: Etcd | None) -> None:
        self.mode = mode
        if mode == "inplace":
            self.job = InplaceJob(workdir, SCRIPT_ARGS, groups=NODES)
        else:
            self.job = LocalJob(etcd_endpoint=etcd.endpoint, run_id=f"goodput-{uuid.uuid4().hex[:8]}",
                                workdir=workdir, script_args=SCRIPT_ARGS, nnodes=f"2:{NODES}")
        self.slot_of: dict[str, int] = {}

    def __enter__(self) -> Run:
        self.job.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.job.__exit__(*exc)

    def start(self, slot: int, name: str):
        node = self.job.start_group(slot, name=name) if self.mode == "inplace" else self.job.start_node(name)
        self.slot_of[name] = slot
        return node

    def steps(self) -> list:
        return [e for e in self.job.events.snapshot() if e.kind == "step"]


def progress(steps: list, start: float, end: float) -> tuple[int, int]:
    """(step counter at ``start``, highest step reached by ``end``): its net progress over the window."""
    before = [e["step"] for e in steps if e.t <= start]
    within = [e["step"] for e in steps if start < e.t <= end]
    first = max(before, default=0)
    return first, max(within, default=first)


def trained_share(steps: list, start: float, end: float, groups: int) -> float:
    """Global batches trained over the window, each step counted by the share of groups that took part."""
    share: dict[int, float] = {}
    for event in steps:
        if start < event.t <= end:
            share[event["step"]] = event["world"] / groups
    return sum(share.values())


def _first_step_after(events: list, since: float, mode: str, world: int):
    """The survivors' first step after a kill (``mode`` restart: after the restore the kill caused)."""
    if mode == "restart":
        restored = next((e for e in events if e.kind in ("resumed", "start") and e.t > since), None)
        if restored is None:
            return None, None
        return next((e for e in events if e.kind == "step" and e.t > restored.t), None), restored
    return next((e for e in events if e.kind == "step" and e.t > since and e["world"] == world), None), None


def measure_fault(events: list, fault: dict, mode: str, t0: float) -> dict:
    """Resume and join times and redone steps of one kill and its replacement, from the event log."""
    killed_at, started_at = fault["killed_at"], fault.get("replaced_at")
    last_before = max((e["step"] for e in events if e.kind == "step" and e.t <= killed_at), default=0)
    sample = {"node": fault["node"], "at_s": round(killed_at - t0, 3), "last_step": last_before,
              "resume_s": None, "redone_steps": None, "join_s": None, "join_redone_steps": None}
    first, restored = _first_step_after(events, killed_at, mode, NODES - 1)
    if first is not None:
        sample["resume_s"] = round(first.t - killed_at, 3)
        resumed_from = restored.data.get("step", 0) if restored is not None else first["step"] - 1
        sample["redone_steps"] = max(0, last_before - resumed_from)
    if started_at is not None:
        before_join = max((e["step"] for e in events if e.kind == "step" and e.t <= started_at), default=0)
        joined = next((e for e in events if e.kind == "step" and e.t > started_at and e["world"] == NODES), None)
        if joined is not None:
            sample["join_s"] = round(joined.t - started_at, 3)
            restores = [e for e in events if e.kind == "resumed" and started_at < e.t <= joined.t]
            sample["join_redone_steps"] = max(0, before_join - restores[-1]["step"]) if restores else 0
    return sample


def run_mode(mode: str, workdir: Path, etcd: Etcd | None, schedule: dict, faults: bool, quiet: bool) -> dict:
    """The job under the schedule: kills and replacements by the clock, figures from the events afterwards."""
    duration = schedule["duration"] if faults else schedule["baseline"]
    injected: list[dict] = []
    with Run(mode, workdir, etcd) as run:
        nodes = [run.start(slot, f"node{slot}") for slot in range(NODES)]
        run.job.events.wait_for(lambda e: e.kind == "step" and e["world"] == NODES, 240,
                                describe=f"a step of all {NODES} nodes")
        time.sleep(2.0)  # past the first steps' warm-up
        t0 = time.monotonic()
        end = t0 + duration
        plan: list[tuple[float, str, int]] = []  # (when, "kill"|"replace", slot)
        if faults:
            kill_at = t0 + schedule["period"] / 2
            slot = 0
            while kill_at < end:
                plan.append((kill_at, "kill", slot % NODES))
                plan.append((kill_at + schedule["replace_after"], "replace", slot % NODES))
                kill_at += schedule["period"]
                slot += 1
        spare = NODES
        for when, action, slot in sorted(plan):
            while time.monotonic() < when:
                time.sleep(min(0.1, max(0.0, when - time.monotonic())))
            if action == "kill":
                victim = next(n for n in nodes if n.running() and run.slot_of[n.name] == slot)
                injected.append({"node": victim.name, "killed_at": victim.kill()})
                _say(quiet, f"  {mode}: killed {victim.name} at {round(injected[-1]['killed_at'] - t0, 1)} s")
            else:
                replacement = run.start(slot, f"node{spare}")
                spare += 1
                nodes.append(replacement)
                injected[-1]["replaced_at"] = replacement.started_at
        while time.monotonic() < end:
            time.sleep(0.1)
        # progress counts only inside the window; a resume or join still pending at its end is
        # waited for (up to 60 s), so every fault has its figures
        settle = time.monotonic() + 60
        while time.monotonic() < settle and injected:
            pending = measure_fault(run.job.events.snapshot(), injected[-1], mode, t0)
            if pending["resume_s"] is not None and (pending["join_s"] is not None or "replaced_at" not in injected[-1]):
                break
            time.sleep(0.5)
        time.sleep(1.0)  # the window's last events
        events = run.job.events.snapshot()
    steps = [e for e in events if e.kind == "step"]
    samples = [measure_fault(events, fault, mode, t0) for fault in injected]
    for sample in samples:
        _say(quiet, f"  {mode}: {sample}")
    first, last = progress(steps, t0, end)
    result = {"mode": mode, "faults": faults, "duration_s": duration, "steps": last - first,
              "steps_per_s": round((last - first) / duration, 3), "faults_injected": len(samples), "samples": samples}
    if mode == "inplace":
        result["batches_trained"] = round(trained_share(steps, t0, end, NODES), 3)
    return result


def summarize(run: dict, baseline_rate: float, bare_rate: float | None = None) -> dict:
    """``goodput`` against ``baseline_rate``: the same mode without faults (what the faults cost);
    ``goodput_vs_bare`` against the plain loop without faults, where that is another run."""
    if run.get("error"):
        return {"goodput": None, "resume_s": None, "redone_steps": None, "error": run["error"]}
    samples = run["samples"]
    resume = [s["resume_s"] for s in samples if s.get("resume_s") is not None]
    out = {
        "goodput": round(run["steps_per_s"] / baseline_rate, 4) if baseline_rate else None,
        "fault_free_steps_per_s": baseline_rate,
        "resume_s": _median(resume),
        "redone_steps": sum((s.get("redone_steps") or 0) + (s.get("join_redone_steps") or 0) for s in samples),
        "join_s": _median([s["join_s"] for s in samples if s.get("join_s") is not None]),
        "steps_per_s": run["steps_per_s"],
        "faults": run["faults_injected"],
        "samples": samples,
    }
    if "batches_trained" in run:
        out["sample_goodput"] = round(run["batches_trained"] / run["duration_s"] / baseline_rate, 4)
    if bare_rate:
        out["goodput_vs_bare"] = round(run["steps_per_s"] / bare_rate, 4)
    return out


def attempt(mode: str, workdir: Path, etcd: Etcd, schedule: dict, faults: bool, quiet: bool) -> dict:
    """``run_mode``, or what went wrong: a job that never trained at full size (seen with the restart
    mode's rendezvous at a load average of 30 on 2 cores) is reported, and the other runs still go."""
    try:
        return run_mode(mode, workdir, etcd, schedule, faults, quiet)
    except TimeoutError as exc:
        _say(quiet, f"  {mode}: {str(exc).splitlines()[0]}")
        return {"mode": mode, "faults": faults, "error": str(exc).splitlines()[0], "steps_per_s": None,
                "samples": [], "faults_injected": 0}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print only the JSON object on stdout")
    parser.add_argument("--quick", action="store_true", help="60 s per mode, a fault every 20 s (the default is "
                                                              "10 minutes, every 60 s)")
    parser.add_argument("--modes", default="inplace,restart", help="comma-separated: inplace, restart")
    parser.add_argument("--workdir", type=Path, default=None, help="keep the runs' logs here (default: a temporary "
                                                                      "directory, removed)")
    parser.add_argument("--overhead", action="store_true", help="one replica group (a GPU's run): the wrapper's "
                        "steps/s against the bare loop, heal from the store and from a peer")
    parser.add_argument("--task", default=None, help=f"with --overhead: one of {', '.join(TASKS)} (default gpt)")
    parser.add_argument("--repeats", default=None, help="with --overhead: samples per figure (default 3)")
    parser.add_argument("--bare-loop", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.bare_loop:
        print(json.dumps(bare_loop(json.loads(args.bare_loop))))
        return 0
    if args.overhead:
        return overhead(parser, args)
    for flag, value in (("--task", args.task), ("--repeats", args.repeats)):
        if value is not None:
            parser.error(f"{flag}={value}: only with --overhead")
    modes = [m for m in args.modes.split(",") if m]
    unknown = [m for m in modes if m not in ("inplace", "restart")]
    if unknown:
        parser.error(f"--modes: unknown mode(s) {', '.join(unknown)}; use inplace and/or restart")
    schedule = QUICK if args.quick else FULL
    quiet = False
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="tf-goodput-") as scratch, Etcd() as etcd:
        tmp = args.workdir or scratch
        _say(quiet, f"baseline: {schedule['baseline']:.0f} s without faults")
        baseline = attempt("restart", Path(tmp) / "baseline", etcd, schedule, faults=False, quiet=quiet)
        rate = baseline["steps_per_s"]
        _say(quiet, f"  {rate} steps/s")
        inplace_free = None
        if "inplace" in modes:
            _say(quiet, "inplace without faults (the fault-tolerant wrapper's overhead)")
            inplace_free = attempt("inplace", Path(tmp) / "inplace-free", etcd, schedule, faults=False, quiet=quiet)
            _say(quiet, f"  {inplace_free['steps_per_s']} steps/s")
        results = {}
        for mode in modes:
            _say(quiet, f"{mode}: {schedule['duration']:.0f} s, a node killed every {schedule['period']:.0f} s, "
                        f"replaced {schedule['replace_after']:.0f} s later")
            chaos = attempt(mode, Path(tmp) / mode, etcd, schedule, faults=True, quiet=quiet)
            if mode == "inplace":
                results[mode] = summarize(chaos, inplace_free["steps_per_s"], bare_rate=rate)
            else:
                results[mode] = summarize(chaos, rate)
    report = {
        **results,
        "baseline": {"goodput": 1.0 if rate else None, "resume_s": None, "redone_steps": 0, "steps_per_s": rate,
                     "duration_s": baseline.get("duration_s"), **({"error": baseline["error"]} if baseline.get(
                         "error") else {})},
        # the fault-tolerant wrapper's cost without faults: quorum and commit vote per step
        "inplace_overhead": {"steps_per_s": inplace_free["steps_per_s"],
                             "vs_bare": round(inplace_free["steps_per_s"] / rate, 4)
                             if rate and inplace_free["steps_per_s"] else None} if inplace_free else None,
        "schedule": {**schedule, "nodes": NODES, "quick": args.quick},
        "load_avg": {"before": [round(x, 2) for x in load_before], "after": [round(x, 2) for x in os.getloadavg()]},
        "cpus": os.cpu_count(),
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for mode in ("inplace", "restart"):
            if mode in report:
                r = report[mode]
                if r.get("error"):
                    print(f"{mode:8s} {r['error']}")
                    continue
                print(f"{mode:8s} goodput {r['goodput']}  resume {r['resume_s']} s  join {r['join_s']} s  "
                      f"redone {r['redone_steps']} steps  ({r['faults']} faults)")
        print(f"baseline {rate} steps/s; load average {report['load_avg']}")
    return 0


def overhead_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[str, int]:
    """--task and --repeats of ``--overhead``; a bad one is a usage error (exit 2) naming it."""
    if args.modes != parser.get_default("modes"):
        parser.error(f"--modes={args.modes}: --overhead runs one replica group of the in-place mode; drop --modes")
    task = args.task or "gpt"
    if task not in TASKS:
        parser.error(f"--task={task}: use one of {', '.join(TASKS)}")
    try:
        repeats = int(args.repeats) if args.repeats is not None else 3
    except ValueError:
        repeats = 0
    if repeats < 1:
        parser.error(f"--repeats={args.repeats}: must be a whole number >= 1")
    return task, repeats


def overhead(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    task, repeats = overhead_options(parser, args)
    if task == "resnet" and importlib.util.find_spec("torchvision") is None:
        parser.error("--task=resnet: needs torchvision, which is not installed; use --task=gpt")
    with tempfile.TemporaryDirectory(prefix="tf-overhead-") as scratch:
        report = run_overhead(task, args.quick, repeats, args.workdir or Path(scratch), quiet=False)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        t, store, peer = report["throughput"], report["heal_from_store"], report["heal_from_peer"]
        print(f"{report['task']} on {report['device']}: bare {t['bare_steps_per_s']} steps/s, in-place "
              f"{t['inplace_steps_per_s']} ({t['ratio']:.1%}, target {t['target']:.0%})")
        print(f"heal from the store: kill -> next step {store['kill_to_next_step_s']} s, "
              f"{store['redone_steps']} steps redone; from a peer: start -> step with it "
              f"{peer['start_to_step_with_peer_s']} s (healed {peer['start_to_healed_s']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
