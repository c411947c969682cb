"""Local nodes watched from the command line: what `torchfleet demo` (both recovery modes) and
`torchfleet run --local` share.

The processes themselves come from the training image's harness (training-image/elastic_trainer/
localrun.py, inplacerun.py); this module is the command line's side of them: whether this machine can
run them, signals that stop every one of them, the timeline printed as they go, the fail-fast watch that
ends a run as soon as a node nobody killed has failed (with the end of its log), and the closing lines.
It imports no command module, so each command builds on it without importing another.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from torchfleet import extras
from torchfleet.jobs import worker_error

IMAGE_DIR = Path(__file__).resolve().parents[1] / "training-image"
LOG_TAIL_LINES = 25
WORKER_FAILURES = 3
# torchrun's report of a failed worker (torch/distributed/elastic/multiprocessing/api.py), and the
# glog-style prefix of torch's own log lines ("E1123 06:53:16.091000 13726 ...").
_WORKER_FAILED = re.compile(r"failed \(exitcode: -?\d+\)")
_TORCH_LOG = re.compile(r"[EWIF]\d{4} \d\d:\d\d:\d\d")
PROGRESS_EVENTS = ("step", "done")  # elastic_trainer.events kinds that mean the worker trained


class Timeline:
    """Lines prefixed with the seconds since the run started."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()

    def say(self, text: str, at: float | None = None) -> None:
        print(f"{(at if at is not None else time.monotonic()) - self.t0:7.1f}s  {text}", flush=True)


def _raise_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


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
        from elastic_trainer.local.inplacerun import lighthouse_binary

        if lighthouse_binary() is None:
            return (
                "--recovery inplace: needs torchft's torchft_lighthouse (pip install -e '.[inplace]'; "
                "the README's install command includes it)"
            )
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
    from elastic_trainer.local import Event, EventLog

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


def _progress(payload: str) -> bool:
    """Whether an event line's JSON is a step or the end of training (progress, not a start)."""
    import json

    try:
        return json.loads(payload).get("ev") in PROGRESS_EVENTS
    except (ValueError, AttributeError):
        return False


def worker_failures(log: str) -> int:
    """Worker failures torchrun logged since the node's last progress event. A survivor's worker
    may fail once or twice when its peer is killed; one failing again and again (torchrun
    restarts it up to --max_restarts times) is failing for good. Only a step (or the end of
    training) resets the count: every attempt emits ``start`` before it fails, so resetting on any
    event let a worker that fails before its first step restart 100 times (issue 32)."""
    from elastic_trainer.events import PREFIX

    count = 0
    for line in log.splitlines():
        if line.startswith(PREFIX) and _progress(line[len(PREFIX):]):
            count = 0
        elif _WORKER_FAILED.search(line):
            count += 1
    return count


def watch_restart_nodes(job, killed: set[str], stop: threading.Event) -> None:
    """Restart mode: report the first node the demo did not kill that exits non-zero or whose worker
    keeps failing."""
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


def watch_inplace_groups(job, killed: set[str], stop: threading.Event) -> None:
    """In place: report the first group the demo did not kill whose node exits non-zero (its worker's
    failures are restarted by the node itself: replica_node.py)."""
    while not stop.wait(0.5):
        for node in list(job.nodes):
            code = node.proc.poll() if node.proc is not None else None
            if node.name not in killed and code not in (None, 0):
                job.events.fail(node, f"exited with code {code}")
                return


def log_excerpt(log: str, lines: int = LOG_TAIL_LINES) -> str:
    """The end of a node's log, where the cause is: what the worker printed before torchrun's
    failure report (its traceback of torch's own frames says nothing about the cause)."""
    error = worker_error.last_worker_error(log)  # issue 32: the worker's own exception, not torch's report
    if error:
        return "\n".join(f"  | {line}" for line in error[-lines:])
    lines_ = log.rstrip("\n").splitlines()
    failures = [i for i, line in enumerate(lines_) if _WORKER_FAILED.search(line)]
    if failures:  # the last failed attempt's own output, not every attempt's
        lines_ = lines_[failures[-2] + 1 if len(failures) > 1 else 0 : failures[-1]]
    kept = [line for line in lines_ if not _TORCH_LOG.match(line) and "RuntimeWarning" not in line]
    return "\n".join(f"  | {line}" for line in kept[-lines:]) or "  | (empty)"


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
        print(
            f"torchfleet {command}: {failure} before the {command} was done; the end of its log "
            f"({failure.node.log_path}):\n{log_excerpt(failure.node.log_text())}",
            file=sys.stderr,
        )
        return 1
    except TimeoutError as error:
        tails = "\n".join(f"{node.name} ({node.log_path}):\n{log_excerpt(node.log_text())}" for node in job.nodes)
        print(
            f"torchfleet {command}: {str(error).splitlines()[0]}; the end of each node's log:\n{tails}", file=sys.stderr
        )
        return 1
    finally:
        stop.set()  # before the job's nodes are stopped: those exits are not failures


def checkpoints_note(workdir: Path | None, checkpoint_dir: Path) -> str:
    """Where the checkpoints are, or that they went with the temporary folder (issue 22: the demo
    named a folder it removed a moment later)."""
    if workdir is not None:
        return f"checkpoints in {checkpoint_dir}"
    return "the checkpoints went with the run's temporary folder (--workdir DIR keeps them)"


def status_view(events, total_steps: int | None) -> str:
    """The status view's progress lines (torchfleet/jobs/summary.py) from the local run's events."""
    from torchfleet.jobs import summary

    found = summary.summarize(summary.merge([event.data for event in events]), total_steps)
    return summary.render_text(found, now=time.time())
