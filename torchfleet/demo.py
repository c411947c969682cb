"""`torchfleet demo`: an elastic job surviving a spot interruption, on this machine.

No cloud and no Kubernetes: it starts etcd (v2 API) on a free loopback port and two "nodes",
each the training image's launcher (torchrun with Torchfleet's defaults) running the synthetic
example on CPU with gloo. It then kills one node's whole process tree, as a spot reclaim
would, starts a replacement, and prints a timeline with the recovery figures. Every process it
started is stopped on the way out, also on Ctrl-C or SIGTERM.

The orchestration is the same harness the real-run tests and bench/recovery.py use
(training-image/elastic_trainer/local/localrun.py).
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import tempfile
import time
from pathlib import Path

from torchfleet import demo_inplace, output_paths
from torchfleet.jobs.errors import JobError, Problems
from torchfleet.local_nodes import (
    Timeline,
    checkpoints_note,
    interruptible,
    missing_prerequisite,
    run_watched,
    status_view,
    watch_restart_nodes,
)

# The kill lands mid checkpoint interval 1.5 intervals after training starts, and node0 holds a
# quarter of the steps before the end for node2: a job shorter than 4 intervals ends before the
# kill. At least MIN_STEPS, so the timeline has something to show.
MIN_STEPS = 40
MAX_STEPS = 1_000_000
MAX_STEP_DELAY = 10.0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="run an elastic job locally, kill a node, watch it recover",
        description=__doc__.split("\n\n")[1],
    )
    parser.add_argument("--steps", type=int, default=400, help="global steps of the job (default 400)")
    parser.add_argument("--checkpoint-every", type=int, default=20, help="steps between checkpoints")
    parser.add_argument("--step-delay", type=float, default=0.05,
                        help="seconds added to each step, so there is time to watch (default 0.05)")
    parser.add_argument("--recovery", choices=("restart", "inplace"), default="restart",
                        help="restart (default): torchrun restarts every worker from the checkpoint; inplace: the "
                             "survivor keeps training and the replacement heals from it (torchft, as "
                             "`torchfleet submit --recovery inplace`)")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="keep checkpoints and node logs here (default: a temporary directory, removed)")
    parser.set_defaults(func=run)


def check_args(args: argparse.Namespace) -> None:
    """Every demo flag in range, before etcd or a node starts (issue 12: `--steps 0` was silent for
    300 s, then a TimeoutError, while the cause sat in a deleted node log)."""
    problems = Problems()
    if not MIN_STEPS <= args.steps <= MAX_STEPS:
        problems.add(f"--steps: from {MIN_STEPS} to {MAX_STEPS} (the kill, the resume and the rejoin need room), "
                     f"got {args.steps}; the default is 400")
    if args.checkpoint_every < 1:
        problems.add(f"--checkpoint-every: at least 1 step, got {args.checkpoint_every}; the default is 20")
    elif MIN_STEPS <= args.steps <= MAX_STEPS and args.checkpoint_every > args.steps // 4:
        problems.add(f"--checkpoint-every: at most a quarter of --steps ({args.steps // 4}), got "
                     f"{args.checkpoint_every}: the node is killed 1.5 intervals in, and must be killed well "
                     "before the end")
    if not (math.isfinite(args.step_delay) and 0 <= args.step_delay <= MAX_STEP_DELAY):
        problems.add(f"--step-delay: seconds from 0 to {MAX_STEP_DELAY:g}, got {args.step_delay}; the default is 0.05")
    if args.workdir is not None:
        problems.check(output_paths.check_folder, "--workdir", args.workdir)
    problems.raise_any()


def run(args: argparse.Namespace) -> int:
    try:
        check_args(args)
        if args.workdir is not None:
            output_paths.make_folder("--workdir", args.workdir)
    except JobError as error:
        print(f"torchfleet demo: {error}", file=sys.stderr)
        return error.exit_code
    missing = missing_prerequisite(args.recovery)
    if missing:
        print(f"torchfleet demo: {missing}", file=sys.stderr)
        return 2
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="torchfleet-demo-"))
    try:
        with interruptible():
            if args.recovery == "inplace":
                return demo_inplace.run_demo(args, workdir, Timeline())
            return _demo(args, workdir)
    except KeyboardInterrupt:
        print("\ninterrupted: every process the demo started has been stopped", file=sys.stderr)
        return 130
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)


def _demo(args: argparse.Namespace, workdir: Path) -> int:
    from elastic_trainer.launch.rdzvconf import TUNED_RDZV_CONF, format_rdzv_conf
    from elastic_trainer.local import Etcd, LocalJob

    timeline = Timeline()
    every = args.checkpoint_every
    with Etcd() as etcd, LocalJob(
        etcd_endpoint=etcd.endpoint,
        run_id="demo-" + workdir.name[-8:],
        workdir=workdir,
        script_args=[f"--total-steps={args.steps}", "--global-batch-size=32", f"--checkpoint-every={every}",
                     f"--step-delay-s={args.step_delay}"],
        # Node0 alone waits before the last quarter of the steps until node2 joins: on a slow
        # machine the survivor would otherwise finish before the replacement is up (review).
        extra_env={"TORCHFLEET_HOLD_FOR_WORLD": f"{args.steps - args.steps // 4}:2"},
    ) as job:
        timeline.say(f"etcd (v2 API) on {etcd.endpoint}; rendezvous {format_rdzv_conf(TUNED_RDZV_CONF)}")
        return run_watched(job, watch_restart_nodes, lambda killed: _timeline(args, job, killed, timeline))


def _timeline(args: argparse.Namespace, job, killed: set[str], timeline: Timeline) -> int:
    """Start two nodes, kill one, start a replacement, and print what happened when."""
    from elastic_trainer.local import kill_and_resume

    every = args.checkpoint_every
    job.start_node("node0"), job.start_node("node1")
    timeline.say("started node0 and node1 (torchrun agents, 1 worker each)")
    first = job.wait_for("step", 300, world=2)
    timeline.say(f"training with 2 nodes (step {first['step']})", first.t)
    target = first["step"] + every + every // 2  # mid checkpoint interval: some steps will be lost
    job.events.wait_for(lambda e: e.kind == "step" and e["step"] >= target, 300)

    victim = next(node for node in job.nodes if node.name == "node1")
    killed.add(victim.name)
    kill = kill_and_resume(job, victim, world_after=1)
    timeline.say(f"killed node1 at step {kill['last_step_before_kill']} (SIGKILL of its process tree, "
                 "like a spot reclaim)", kill["at"])
    resumed_at = kill["at"] + kill["kill_to_resume_s"]
    timeline.say(f"resumed with 1 node from the checkpoint of step {kill['resumed_from_step']} "
                 f"after {kill['kill_to_resume_s']:.1f} s; {kill['lost_steps']} steps to redo "
                 f"(checkpoint every {every})", resumed_at)

    time.sleep(2)
    replacement = job.start_node("node2")
    timeline.say("started node2 as the replacement", replacement.started_at)
    joined = job.events.wait_for(
        lambda e: e.t > replacement.started_at and (e.kind == "done" or (e.kind == "step" and e["world"] == 2)),
        300,
    )
    if joined.kind == "done":
        timeline.say("the job finished before node2 could join: try a larger --steps", joined.t)
    else:
        timeline.say(f"rejoined with 2 nodes at step {joined['step']}, "
                     f"{joined.t - replacement.started_at:.1f} s after node2 started", joined.t)
    done = job.wait_for("done", 600)
    codes = {node.name: node.wait(60) for node in job.nodes if node is not victim}
    timeline.say(f"finished: all {done['step']} steps; exit codes {codes}", done.t)
    print(f"\nkill to resume {kill['kill_to_resume_s']:.1f} s, replacement joined in "
          f"{(joined.t - replacement.started_at):.1f} s, lost {kill['lost_steps']} steps; "
          + checkpoints_note(args.workdir, job.checkpoint_dir))
    # The view `torchfleet status NAME` shows for a cluster job, from the same events (issue 13).
    print("\nas `torchfleet status` shows it:\n" + status_view(job.events.snapshot(), args.steps))
    return 0 if all(code == 0 for code in codes.values()) and joined.kind == "step" else 1
