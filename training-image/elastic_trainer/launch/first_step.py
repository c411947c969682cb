"""A worker that fails before its first step, again and again the same way, ends its node (issue 32).

torchrun restarts a failed worker group up to ``--max_restarts`` times (100 here: a survivor's workers fail
each time a spot peer is lost, and must rejoin). A Task error in the first step (a misspelled method the
static check could not see, a shape error) fails every attempt alike: 101 attempts, then exit 1, minutes
later, the exception under torch's lines. So the agent counts the attempts that failed before any worker of
theirs finished a step; at FAILURES_BEFORE_A_STEP in a row with the same exception it stops restarting and
prints the worker's own traceback, and the launcher exits 1, which the Indexed Job's pod failure policy
treats as fatal (torchfleet/jobs/indexed_job.py: 1-127 fail the job, but 75). A failure after a step
(a peer lost, a spot reclaim), or with the trainer's "a peer left" exit (75), resets the count: those keep
restarting as before.

How an attempt is known to have trained: each worker touches ``progress`` beside its error file after its
first step (``mark_progress``). torchrun gives every worker of every attempt its own error file,
``<log_dir>/<run_id>/attempt_<n>/<rank>/error.json`` ($TORCHELASTIC_ERROR_FILE; torch/distributed/elastic/
multiprocessing/api.py), so the marker belongs to that attempt alone. The worker's exception is the
ProcessFailure's message, which torch reads from that error file (torch's ``_wrap`` runs the worker under
``record``, which writes it); its ``py_callstack`` is the traceback printed.
No torch import at module level: the trainer imports ``mark_progress`` on every step's path.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from elastic_trainer import EXIT_MEMBERSHIP_CHANGE  # the trainer's "a peer left": never counted here

FAILURES_BEFORE_A_STEP = 3  # as `run --local`'s fail-fast (torchfleet/local_nodes.py WORKER_FAILURES)
PROGRESS_NAME = "progress"

_marked = False


def mark_progress() -> None:
    """Called by the trainer after each step; touches this attempt's marker once per worker process."""
    global _marked
    if _marked:
        return
    _marked = True
    error_file = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if error_file:
        # no marker (unwritable): a later failure of this attempt counts as one before a step
        with contextlib.suppress(OSError):
            Path(error_file).with_name(PROGRESS_NAME).touch()


class FirstStepFailures:
    """The agent's count of attempts in a row that failed before a step with the same exception."""

    def __init__(self, limit: int = FAILURES_BEFORE_A_STEP) -> None:
        self.limit, self.count, self.last = limit, 0, None
        self.stopped: str | None = None  # the message printed when it stopped the restarts

    def failed(self, failures: Mapping[int, object]) -> str | None:
        """One failed attempt (torch's ProcessFailure per failed local rank): the message to print and stop
        with, when it is the ``limit``-th in a row before a step with the same exception; else None."""
        codes = {getattr(f, "exitcode", None) for f in failures.values()}
        trained = any(Path(str(getattr(f, "error_file", "") or "")).with_name(PROGRESS_NAME).is_file()
                      for f in failures.values() if getattr(f, "error_file", ""))
        if trained or not failures or EXIT_MEMBERSHIP_CHANGE in codes:
            self.count, self.last = 0, None
            return None
        same = sorted(_error(f)[0] for f in failures.values())
        self.count = self.count + 1 if same == self.last else 1
        self.last = same
        if self.count < self.limit:
            return None
        error, stack = _error(failures[min(failures)])
        self.stopped = (f"[torchfleet] the worker failed {self.count} times in a row before its first step, with the "
                        f"same error: not restarting it (every attempt fails the same way); exit 1 ends this node "
                        f"and fails the job. The worker's error: {error}" + (f"\n{stack.rstrip()}" if stack else ""))
        return self.stopped


def _error(failure: object) -> tuple[str, str | None]:
    """(the exception as one line, its traceback or None) of a ProcessFailure. torch's ``message`` is the
    error file's ``message`` entry: for a worker that raised, a dict {"message": "AttributeError: ...",
    "extraInfo": {"py_callstack": ..., "timestamp": ...}} (errors/error_handler.py); else a string. Only the
    exception's line is compared: the timestamp differs in every attempt."""
    message = getattr(failure, "message", "")
    if isinstance(message, dict):
        extra = message.get("extraInfo") if isinstance(message.get("extraInfo"), dict) else {}
        return str(message.get("message", "")), extra.get("py_callstack")
    return str(message), None


def install(counter: FirstStepFailures) -> None:
    """Wrap the local agent's monitor: when ``counter`` says stop, zero its remaining restarts (as
    agent._make_bad_input_final does for exit 2) and print why, with the worker's traceback. Idempotent
    per process: the first counter installed is the one used."""
    from torch.distributed.elastic.agent.server.api import WorkerState
    from torch.distributed.elastic.agent.server.local_elastic_agent import LocalElasticAgent

    monitor = LocalElasticAgent._monitor_workers
    if getattr(monitor, "_torchfleet_first_step", False):
        return

    def _monitor_workers(self, worker_group):
        result = monitor(self, worker_group)
        if result.state == WorkerState.FAILED and self._remaining_restarts > 0:
            stop = counter.failed(result.failures)
            if stop:
                print(stop, file=sys.stderr, flush=True)
                self._remaining_restarts = 0
        return result

    _monitor_workers._torchfleet_first_step = True  # type: ignore[attr-defined]
    LocalElasticAgent._monitor_workers = _monitor_workers  # type: ignore[method-assign]
