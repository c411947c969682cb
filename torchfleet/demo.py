"""`torchfleet demo`: an elastic job surviving a spot interruption, on this machine.

No cloud and no Kubernetes: it starts etcd (v2 API) on a free loopback port and two "nodes",
each the training image's launcher (torchrun with Torchfleet's defaults) running the synthetic
example on CPU with gloo. It then kills one node's whole process tree, as a spot reclaim
would, starts a replacement, and prints a timeline with the recovery figures. Every process it
started is stopped on the way out, also on Ctrl-C or SIGTERM.

The orchestration is the same harness the real-run tests and bench/recovery.py use
(training-image/elastic_trainer/localrun.py).
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

IMAGE_DIR = Path(__file__).resolve().parents[1] / "training-image"


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
    parser.add_argument("--workdir", type=Path, default=None,
                        help="keep checkpoints and node logs here (default: a temporary directory, removed)")
    parser.set_defaults(func=run)


class _Timeline:
    def __init__(self) -> None:
        self.t0 = time.monotonic()

    def say(self, text: str, at: float | None = None) -> None:
        print(f"{(at if at is not None else time.monotonic()) - self.t0:7.1f}s  {text}", flush=True)


def _raise_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def run(args: argparse.Namespace) -> int:
    if not (IMAGE_DIR / "elastic_trainer").is_dir():
        print(f"torchfleet demo: the training image's code is not at {IMAGE_DIR} (run from a checkout)",
              file=sys.stderr)
        return 2
    if shutil.which("etcd") is None:
        print("torchfleet demo: needs etcd 3.4/3.5 on PATH (Debian/Ubuntu: apt-get install etcd-server)",
              file=sys.stderr)
        return 2
    if str(IMAGE_DIR) not in sys.path:
        sys.path.insert(0, str(IMAGE_DIR))
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)  # clean up on SIGTERM as on Ctrl-C
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="torchfleet-demo-"))
    try:
        return _demo(args, workdir)
    except KeyboardInterrupt:
        print("\ninterrupted: every process the demo started has been stopped", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)


def _demo(args: argparse.Namespace, workdir: Path) -> int:
    from elastic_trainer.launcher import TUNED_RDZV_CONF, format_rdzv_conf
    from elastic_trainer.localrun import Etcd, LocalJob, kill_and_resume

    timeline = _Timeline()
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
        job.start_node("node0"), job.start_node("node1")
        timeline.say("started node0 and node1 (torchrun agents, 1 worker each)")
        first = job.wait_for("step", 300, world=2)
        timeline.say(f"training with 2 nodes (step {first['step']})", first.t)
        target = first["step"] + every + every // 2  # mid checkpoint interval: some steps will be lost
        job.events.wait_for(lambda e: e.kind == "step" and e["step"] >= target, 300)

        victim = next(node for node in job.nodes if node.name == "node1")
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
              f"checkpoints in {job.checkpoint_dir}" + ("" if args.workdir else " (removed)"))
        return 0 if all(code == 0 for code in codes.values()) and joined.kind == "step" else 1
