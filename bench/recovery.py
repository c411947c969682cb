"""Recovery figures of an elastic job on this machine (a benchmark, not a timed test).

    python bench/recovery.py --json

Runs a two-node synthetic job (etcd-v2, gloo, CPU) with Torchfleet's launcher defaults, and
repeatedly: SIGKILLs one node's whole process tree (a spot reclaim), measures until the
survivor takes its next step, starts a replacement and measures until both train together.
Then SIGTERMs one node (a spot notice) and measures until its checkpoint is committed. The
same kill/rejoin cycle is then measured with torchrun's default rendezvous settings, in the
same run, so the ratio shows what the tuned defaults buy (the launcher's other defaults are
unchanged in that baseline), and once more with the tuned settings but workers started as fresh
interpreters (``TORCHFLEET_PRELOAD=0``), which shows what the forkserver preload buys. Medians
are reported, with every sample. Uses the harness in training-image/elastic_trainer/local/localrun.py
(shared with the tests and `torchfleet demo`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "training-image"))

from elastic_trainer.launch.rdzvconf import TORCH_DEFAULT_RDZV_CONF, TUNED_RDZV_CONF, format_rdzv_conf
from elastic_trainer.local import (
    Etcd,
    LocalJob,
    add_node_and_join,
    kill_and_resume,
    sigterm_and_checkpoint,
)

CHECKPOINT_EVERY = 20


def _say(quiet: bool, text: str) -> None:
    if not quiet:
        print(text, file=sys.stderr, flush=True)


def cycles(etcd: Etcd, workdir: Path, rdzv_conf: dict[str, str], repeats: int, sigterm: bool, quiet: bool,
           preload: bool = True) -> dict:
    job = LocalJob(
        etcd_endpoint=etcd.endpoint,
        run_id=f"bench-{uuid.uuid4().hex[:8]}",
        workdir=workdir,
        script_args=["--total-steps=1000000", "--global-batch-size=16",
                     f"--checkpoint-every={CHECKPOINT_EVERY}", "--step-delay-s=0.02"],
        rdzv_conf=format_rdzv_conf(rdzv_conf),
        extra_env={} if preload else {"TORCHFLEET_PRELOAD": "0"},
    )
    kills, joins = [], []
    with job:
        job.start_node("node0"), job.start_node("node1")
        job.wait_for("step", 180, world=2)
        spare = 2
        for i in range(repeats):
            time.sleep(1.5)  # let both train for a while, mid checkpoint interval on average
            alive = [n for n in job.nodes if n.running()]
            victim = alive[i % len(alive)]  # alternate: sometimes the node holding rank 0
            kills.append(kill_and_resume(job, victim, world_after=1))
            _say(quiet, f"  kill {victim.name}: resumed in {kills[-1]['kill_to_resume_s']} s, "
                        f"lost {kills[-1]['lost_steps']} steps")
            joins.append(add_node_and_join(job, f"node{spare}", world_after=2))
            spare += 1
            _say(quiet, f"  {joins[-1]['node']} joined in {joins[-1]['replacement_join_s']} s")
        notice = None
        if sigterm:
            time.sleep(1.5)
            notice = sigterm_and_checkpoint(job, [n for n in job.nodes if n.running()][-1])
            _say(quiet, f"  SIGTERM: checkpoint committed in {notice['sigterm_checkpoint_s']} s, "
                        f"exit code {notice['exit_code']}")
    return {"kills": kills, "joins": joins, "sigterm": notice}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print only the JSON object on stdout")
    parser.add_argument("--repeats", type=int, default=3, help="kill/rejoin cycles with the tuned settings")
    parser.add_argument("--baseline-repeats", type=int, default=2,
                        help="kill/rejoin cycles with torchrun's default settings (about 55 s each)")
    parser.add_argument("--no-preload-repeats", type=int, default=2,
                        help="kill/rejoin cycles with the tuned settings but workers started as fresh interpreters")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="keep the nodes' logs and checkpoints here (default: a temporary directory, removed)")
    args = parser.parse_args(argv)
    quiet = args.json

    with Etcd() as etcd, tempfile.TemporaryDirectory(prefix="tf-bench-") as scratch:
        tmp = args.workdir or scratch
        _say(quiet, f"tuned: {format_rdzv_conf(TUNED_RDZV_CONF)}")
        tuned = cycles(etcd, Path(tmp) / "tuned", TUNED_RDZV_CONF, args.repeats, sigterm=True, quiet=quiet)
        _say(quiet, f"torchrun defaults: {format_rdzv_conf(TORCH_DEFAULT_RDZV_CONF)}")
        base = cycles(etcd, Path(tmp) / "defaults", TORCH_DEFAULT_RDZV_CONF, args.baseline_repeats,
                      sigterm=False, quiet=quiet)
        fresh = None
        if args.no_preload_repeats:
            _say(quiet, "tuned, without the forkserver preload (TORCHFLEET_PRELOAD=0)")
            fresh = cycles(etcd, Path(tmp) / "fresh", TUNED_RDZV_CONF, args.no_preload_repeats,
                           sigterm=False, quiet=quiet, preload=False)

    def median(runs: list[dict], key: str) -> float | None:
        values = [r[key] for r in runs]
        return round(statistics.median(values), 2) if values else None  # None: that part was not run (0 repeats)

    def samples(runs: list[dict], key: str) -> list[float]:
        return [r[key] for r in runs]

    result = {
        "kill_to_resume_s": median(tuned["kills"], "kill_to_resume_s"),
        "replacement_join_s": median(tuned["joins"], "replacement_join_s"),
        "lost_steps": max(r["lost_steps"] for r in tuned["kills"]),
        "checkpoint_interval_steps": CHECKPOINT_EVERY,
        "sigterm_checkpoint_s": tuned["sigterm"]["sigterm_checkpoint_s"],
        "sigterm_exit_code": tuned["sigterm"]["exit_code"],
        "kill_to_resume_s_torch_defaults": median(base["kills"], "kill_to_resume_s"),
        "replacement_join_s_torch_defaults": median(base["joins"], "replacement_join_s"),
        "samples": {
            "kill_to_resume_s": samples(tuned["kills"], "kill_to_resume_s"),
            "replacement_join_s": samples(tuned["joins"], "replacement_join_s"),
            "lost_steps": samples(tuned["kills"], "lost_steps"),
            "kill_to_resume_s_torch_defaults": samples(base["kills"], "kill_to_resume_s"),
            "replacement_join_s_torch_defaults": samples(base["joins"], "replacement_join_s"),
        },
        "rdzv_conf": format_rdzv_conf(TUNED_RDZV_CONF),
        "rdzv_conf_torch_defaults": format_rdzv_conf(TORCH_DEFAULT_RDZV_CONF),
        "statistic": "median",
        "nodes": 2,
        "cpus": os.cpu_count(),
    }
    if fresh:
        result["kill_to_resume_s_without_preload"] = median(fresh["kills"], "kill_to_resume_s")
        result["replacement_join_s_without_preload"] = median(fresh["joins"], "replacement_join_s")
        result["samples"]["kill_to_resume_s_without_preload"] = samples(fresh["kills"], "kill_to_resume_s")
        result["samples"]["replacement_join_s_without_preload"] = samples(fresh["joins"], "replacement_join_s")
    if result["kill_to_resume_s_torch_defaults"] is not None:
        result["speedup_vs_torch_defaults"] = round(
            result["kill_to_resume_s_torch_defaults"] / result["kill_to_resume_s"], 1
        )
    print(json.dumps(result, indent=None if args.json else 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
