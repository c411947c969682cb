"""Many kills per recovery mode: the distribution of kill-to-next-step times and the slowest recoveries (issue 23).

    python bench/kills.py --json                      # 100 kills per mode, restart and inplace
    python bench/kills.py --kills 20 --budget-s 600   # fewer: at most 20 kills or 600 s per mode

bench/recovery.py gives medians of a few kills; a recovery that hangs once in 24 kills (README.md)
needs many. Each mode runs a two-node synthetic job (CPU, gloo) on the harnesses the tests use
(training-image/elastic_trainer/local/localrun.py: torchrun with etcd-v2; inplacerun.py: torchft replica
groups and a Lighthouse) and repeats: train for a random 0.2-3 s (seeded), SIGKILL one node's whole
process tree (alternating, so sometimes the one holding rank 0), time until the survivor's next step
at world size 1, start a replacement, time until both train again. A job is replaced by a fresh one
every ``--per-job`` kills, so each job's log folder is small; the folders of the slowest recoveries
(and of every one that gave up) are kept, the others removed.

A recovery that takes longer than ``--give-up-s`` is recorded as given up (``null``, with its
folder), its job is stopped and the next kills run in a fresh job: one hang does not end the run.

Figures (seconds): ``kill_to_step_s`` median, p95 (nearest rank), max; the same for ``join_s``;
the machine's load average before and after (quote it with the figures: this machine is shared).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "training-image"))

from elastic_trainer.local import Etcd, LocalJob
from elastic_trainer.local.inplacerun import InplaceJob

CHECKPOINT_EVERY = 20
SCRIPT_ARGS = ["--total-steps=100000000", "--global-batch-size=16", f"--checkpoint-every={CHECKPOINT_EVERY}",
               "--step-delay-s=0.02", "--keep-checkpoints=2"]
MODES = ("restart", "inplace")


def _say(quiet: bool, text: str) -> None:
    if not quiet:
        print(text, file=sys.stderr, flush=True)


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100) of ``values``; None for none."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def distribution(values: list[float | None]) -> dict:
    done = [v for v in values if v is not None]
    return {"n": len(values), "gave_up": len(values) - len(done),
            "median": round(statistics.median(done), 3) if done else None,
            "p95": percentile(done, 95), "max": max(done) if done else None}


class _Job:
    """One two-node job of either mode: ``start(slot)``, the survivor's ``world``-1 step, a replacement's join."""

    def __init__(self, mode: str, folder: Path, etcd: Etcd | None) -> None:
        self.mode, self.folder = mode, folder
        if mode == "inplace":
            self.job = InplaceJob(folder, SCRIPT_ARGS, groups=2)
        else:
            self.job = LocalJob(etcd_endpoint=etcd.endpoint, run_id=f"kills-{uuid.uuid4().hex[:8]}", workdir=folder,
                                script_args=SCRIPT_ARGS, nnodes="1:2")
        self.spare = 0
        self.slot: dict[str, int] = {}

    def __enter__(self) -> _Job:
        self.job.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.job.__exit__(*exc)

    def start(self, slot: int):
        name = f"node{self.spare}"
        self.spare += 1
        node = self.job.start_group(slot, name=name) if self.mode == "inplace" else self.job.start_node(name)
        self.slot[name] = slot
        return node

    def step_at(self, world: int, since: float, timeout: float, node: str | None = None):
        return self.job.events.wait_for(
            lambda e: e.kind == "step" and e.t > since and e["world"] == world and (node is None or e.node == node),
            timeout, describe=f"a step at world size {world}" + (f" on {node}" if node else ""))


def run_mode(mode: str, root: Path, kills: int, per_job: int, budget_s: float, give_up_s: float, seed: int,
             quiet: bool) -> list[dict]:
    """Up to ``kills`` kills (fewer if ``budget_s`` runs out), ``per_job`` per fresh job."""
    rng = random.Random(seed)
    samples: list[dict] = []
    ends = time.monotonic() + budget_s
    etcd = Etcd().start() if mode == "restart" else None
    try:
        while len(samples) < kills and time.monotonic() < ends:
            folder = root / mode / f"job{len(samples):03d}"
            with _Job(mode, folder, etcd) as job:
                try:
                    nodes = [job.start(0), job.start(1)]
                    job.step_at(2, 0.0, max(give_up_s, 240))
                except TimeoutError as exc:  # the job never formed: say so, try a fresh one
                    samples.append({"mode": mode, "folder": str(folder), "kill_to_step_s": None, "join_s": None,
                                    "error": f"never trained with 2 nodes: {str(exc).splitlines()[0]}"})
                    continue
                for i in range(per_job):
                    if len(samples) >= kills or time.monotonic() >= ends:
                        break
                    time.sleep(rng.uniform(0.2, 3.0))  # kills land in every phase of a step and a checkpoint
                    alive = [n for n in nodes if n.running()]
                    if len(alive) < 2:  # a node ended by itself: a defect, not a kill's recovery
                        samples.append({"mode": mode, "folder": str(folder), "kill_to_step_s": None, "join_s": None,
                                        "error": f"only {len(alive)} node(s) running before kill {len(samples) + 1}"})
                        break
                    victim, survivor = alive[i % 2], alive[1 - i % 2]
                    last = max((e["step"] for e in job.job.events.snapshot() if e.kind == "step"), default=0)
                    killed_at = victim.kill()
                    sample = {"mode": mode, "folder": str(folder), "victim": victim.name, "survivor": survivor.name,
                              "last_step": last, "killed_at_wall": round(time.time(), 3), "kill_to_step_s": None,
                              "join_s": None}
                    samples.append(sample)
                    try:
                        went_on = job.step_at(1, killed_at, give_up_s,
                                              node=survivor.name if mode == "inplace" else None)
                        sample["kill_to_step_s"] = round(went_on.t - killed_at, 3)
                        replacement = job.start(job.slot[victim.name])
                        nodes = [survivor, replacement]
                        joined = job.step_at(2, replacement.started_at, give_up_s)
                        sample["join_s"] = round(joined.t - replacement.started_at, 3)
                    except TimeoutError as exc:
                        sample["error"] = str(exc).splitlines()[0]
                        _say(quiet, f"  {mode}: GAVE UP after {give_up_s:.0f} s ({sample['error']}); {folder} kept")
                        break  # a fresh job for the next kills
                    _say(quiet, f"  {mode} {len(samples)}: kill {victim.name} -> next step in "
                                f"{sample['kill_to_step_s']} s, replacement joined in {sample['join_s']} s")
    finally:
        if etcd is not None:
            etcd.stop()
    return samples


def keep_slowest(samples: list[dict], slowest: int) -> list[dict]:
    """The ``slowest`` recoveries that came; job folders holding none of them and no given-up one are removed."""
    top = sorted((s for s in samples if s["kill_to_step_s"] is not None), key=lambda s: -s["kill_to_step_s"])[:slowest]
    keep = {s["folder"] for s in top} | {s["folder"] for s in samples if s.get("error")}
    for folder in {s["folder"] for s in samples} - keep:
        shutil.rmtree(folder, ignore_errors=True)
    return top


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print only the JSON object on stdout")
    parser.add_argument("--kills", type=int, default=100, help="kills per mode (default 100)")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated: restart, inplace")
    parser.add_argument("--budget-s", type=float, default=math.inf,
                        help="stop a mode's kills after this many seconds (default: no limit)")
    parser.add_argument("--per-job", type=int, default=10, help="kills per job before a fresh one (default 10)")
    parser.add_argument("--give-up-s", type=float, default=180.0,
                        help="a recovery or join slower than this is recorded as given up (default 180)")
    parser.add_argument("--slowest", type=int, default=5, help="slowest recoveries to report per mode (default 5)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the kills' random timing")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="keep the slowest recoveries' job folders here (default: a new folder under /tmp, "
                             "printed; the others are removed)")
    args = parser.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        parser.error(f"--modes={args.modes}: each must be one of {', '.join(MODES)}")
    for flag, value in (("--kills", args.kills), ("--per-job", args.per_job), ("--slowest", args.slowest)):
        if value < 1:
            parser.error(f"{flag}={value}: must be a whole number >= 1")
    if not args.give_up_s > 0 or not args.budget_s > 0:
        parser.error("--give-up-s and --budget-s must be positive numbers of seconds")
    root = args.workdir or Path(tempfile.mkdtemp(prefix="tf-kills-"))
    root.mkdir(parents=True, exist_ok=True)

    result: dict = {"load_avg_before": [round(v, 2) for v in os.getloadavg()], "cpus": os.cpu_count(),
                    "checkpoint_every": CHECKPOINT_EVERY, "give_up_s": args.give_up_s, "logs": str(root)}
    for mode in modes:
        started = time.monotonic()
        samples = run_mode(mode, root, args.kills, args.per_job, args.budget_s, args.give_up_s, args.seed, args.json)
        result[mode] = {
            "kill_to_step_s": distribution([s["kill_to_step_s"] for s in samples]),
            "join_s": distribution([s["join_s"] for s in samples if "victim" in s]),
            "wall_s": round(time.monotonic() - started, 1),
            "slowest": keep_slowest(samples, args.slowest),
            "gave_up": [s for s in samples if s.get("error")],
            "samples": [s["kill_to_step_s"] for s in samples],
        }
        _say(args.json, f"{mode}: {json.dumps(result[mode]['kill_to_step_s'])}")
    result["load_avg_after"] = [round(v, 2) for v in os.getloadavg()]
    print(json.dumps(result, indent=None if args.json else 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
