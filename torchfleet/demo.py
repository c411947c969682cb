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
import importlib.util
import math
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from torchfleet import extras, output_paths
from torchfleet.jobs.errors import JobError, Problems

IMAGE_DIR = Path(__file__).resolve().parents[1] / "training-image"
# The kill lands mid checkpoint interval 1.5 intervals after training starts, and node0 holds a
# quarter of the steps before the end for node2: a job shorter than 4 intervals ends before the
# kill. At least MIN_STEPS, so the timeline has something to show.
MIN_STEPS = 40
MAX_STEPS = 1_000_000
MAX_STEP_DELAY = 10.0
LOG_TAIL_LINES = 25
WORKER_FAILURES = 3
# torchrun's report of a failed worker (torch/distributed/elastic/multiprocessing/api.py), and the
# glog-style prefix of torch's own log lines ("E1123 06:53:16.091000 13726 ...").
_WORKER_FAILED = re.compile(r"failed \(exitcode: -?\d+\)")
_TORCH_LOG = re.compile(r"[EWIF]\d{4} \d\d:\d\d:\d\d")


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


class _Timeline:
    def __init__(self) -> None:
        self.t0 = time.monotonic()

    def say(self, text: str, at: float | None = None) -> None:
        print(f"{(at if at is not None else time.monotonic()) - self.t0:7.1f}s  {text}", flush=True)


def _raise_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


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
                from torchfleet import demo_inplace

                return demo_inplace.run_demo(args, workdir, _Timeline())
            return _demo(args, workdir)
    except KeyboardInterrupt:
        print("\ninterrupted: every process the demo started has been stopped", file=sys.stderr)
        return 130
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)


@contextmanager
def interruptible() -> Iterator[None]:
    """SIGTERM and SIGINT raise KeyboardInterrupt inside, so the harness's context managers stop every
    process they started (the demo's and `torchfleet run --local`'s contract)."""
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)  # clean up on SIGTERM as on Ctrl-C
    # Python leaves SIGINT ignored when its parent ignored it (a background job of a non-interactive
    # shell, as CI runners start the suite): Ctrl-C or `kill -INT` would then be swallowed and the demo
    # run to its end. Its contract is that an interrupt stops every process it started.
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)


def missing_prerequisite(recovery: str) -> str | None:
    """Why local nodes cannot run here (no training image code, no etcd or Lighthouse), or None;
    puts the image's code on sys.path for the harness otherwise."""
    if not (IMAGE_DIR / "elastic_trainer").is_dir():
        return f"the training image's code is not at {IMAGE_DIR} (run from a checkout)"
    if str(IMAGE_DIR) not in sys.path:
        sys.path.insert(0, str(IMAGE_DIR))
    return _missing_tool(recovery)


def _missing_tool(recovery: str) -> str | None:
    """What the chosen mode needs and this machine lacks, said with how to get it."""
    if importlib.util.find_spec("torch") is None:  # the nodes run this Python: the CLI installs without torch
        return extras.hint("torch")
    if recovery == "inplace":
        from elastic_trainer.inplacerun import lighthouse_binary

        if lighthouse_binary() is None:
            return ("--recovery inplace: needs torchft's torchft_lighthouse (pip install -e '.[inplace]'; "
                    "the README's install command includes it)")
        return None
    if shutil.which("etcd") is None:
        return "needs etcd 3.4/3.5 on PATH (Debian/Ubuntu: apt-get install etcd-server)"
    return None


class NodeFailed(Exception):
    def __init__(self, node, what: str) -> None:
        super().__init__(f"{node.name} {what}")
        self.node = node


def _fail_fast_events():
    """An EventLog whose waits end as soon as a node the demo did not kill has failed, instead of
    timing out minutes later with the cause in a log nobody sees."""
    from elastic_trainer.localrun import Event, EventLog

    class FailFastEvents(EventLog):
        def __init__(self) -> None:
            super().__init__()
            self.failed: NodeFailed | None = None

        def fail(self, node, what: str) -> None:
            self.failed = NodeFailed(node, what)
            self.add(Event(time.monotonic(), node.name, {"ev": "node-failed"}))

        def wait_for(self, match, timeout, since=0.0, describe=""):
            def checked(event) -> bool:
                if event.kind == "node-failed" and self.failed is not None:
                    raise self.failed
                return match(event)

            if self.failed is not None:
                raise self.failed
            return super().wait_for(checked, timeout, since, describe)

    return FailFastEvents()


def worker_failures(log: str) -> int:
    """Worker failures torchrun logged since the node's last progress event. A survivor's worker
    may fail once or twice when its peer is killed; one failing again and again (torchrun
    restarts it up to --max_restarts times) is failing for good."""
    from elastic_trainer.localrun import PREFIX

    count = 0
    for line in log.splitlines():
        if line.startswith(PREFIX):
            count = 0
        elif _WORKER_FAILED.search(line):
            count += 1
    return count


def _watch(job, killed: set[str], stop: threading.Event) -> None:
    """Report the first node the demo did not kill that exits non-zero or whose worker keeps failing."""
    while not stop.wait(0.5):
        for node in list(job.nodes):
            if node.name in killed:
                continue
            code = node.proc.poll() if node.proc is not None else None
            if code not in (None, 0):
                job.events.fail(node, f"exited with code {code}")
                return
            if worker_failures(node.log_text()) >= WORKER_FAILURES:
                job.events.fail(node, f"restarted its worker {WORKER_FAILURES} times without a step")
                return


def log_excerpt(log: str, lines: int = LOG_TAIL_LINES) -> str:
    """The end of a node's log, where the cause is: what the worker printed before torchrun's
    failure report (its traceback of torch's own frames says nothing about the cause)."""
    lines_ = log.rstrip("\n").splitlines()
    failures = [i for i, line in enumerate(lines_) if _WORKER_FAILED.search(line)]
    if failures:  # the last failed attempt's own output, not every attempt's
        lines_ = lines_[failures[-2] + 1 if len(failures) > 1 else 0: failures[-1]]
    kept = [line for line in lines_ if not _TORCH_LOG.match(line) and "RuntimeWarning" not in line]
    return "\n".join(f"  | {line}" for line in kept[-lines:]) or "  | (empty)"


def _demo(args: argparse.Namespace, workdir: Path) -> int:
    from elastic_trainer.localrun import Etcd, LocalJob
    from elastic_trainer.rdzvconf import TUNED_RDZV_CONF, format_rdzv_conf

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
        return run_watched(job, _watch, lambda killed: _timeline(args, job, killed, timeline))


def run_watched(job, watch, body, command: str = "demo") -> int:
    """``body(killed)`` with ``watch`` failing it fast when a node it did not kill dies; a failure or
    a timeout ends in exit 1 with the end of the logs that explain it. Both demos and `torchfleet run
    --local` (``command`` "run") run this way."""
    job.events = _fail_fast_events()  # before any node starts: nodes report to job.events
    killed: set[str] = set()
    stop = threading.Event()
    threading.Thread(target=watch, args=(job, killed, stop), name="demo-watch", daemon=True).start()
    try:
        return body(killed)
    except NodeFailed as failure:
        print(f"torchfleet {command}: {failure} before the {command} was done; the end of its log "
              f"({failure.node.log_path}):\n{log_excerpt(failure.node.log_text())}", file=sys.stderr)
        return 1
    except TimeoutError as error:
        tails = "\n".join(f"{node.name} ({node.log_path}):\n{log_excerpt(node.log_text())}" for node in job.nodes)
        print(f"torchfleet {command}: {str(error).splitlines()[0]}; the end of each node's log:\n{tails}",
              file=sys.stderr)
        return 1
    finally:
        stop.set()  # before the job's nodes are stopped: those exits are not failures


def checkpoints_note(workdir: Path | None, checkpoint_dir: Path) -> str:
    """Where the checkpoints are, or that they went with the temporary folder (issue 22: the demo
    named a folder it removed a moment later)."""
    if workdir is not None:
        return f"checkpoints in {checkpoint_dir}"
    return "the checkpoints went with the run's temporary folder (--workdir DIR keeps them)"


def status_view(events, total_steps: int) -> str:
    """The status view's progress lines (torchfleet/jobs/summary.py) from the local run's events."""
    from torchfleet.jobs import summary

    found = summary.summarize(summary.merge([event.data for event in events]), total_steps)
    return summary.render_text(found, now=time.time())


def _timeline(args: argparse.Namespace, job, killed: set[str], timeline: _Timeline) -> int:
    """Start two nodes, kill one, start a replacement, and print what happened when."""
    from elastic_trainer.localrun import kill_and_resume

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
