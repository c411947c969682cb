"""One checkpoint write in the background at a time; its outcome is collected by the next wait.

Issue 11: serializing, writing, fsync and the commit happen off the training thread, and at most
one write is in flight: the next checkpoint waits for the previous one (so one set of staging
buffers is enough, and a slow store slows checkpoints down instead of piling them up). A failed
write does not raise in the writer thread, where nobody would see it: ``wait()`` or ``poll()``
hand its outcome, error included, to the training loop, which decides (a failed periodic save is
reported and training goes on; a fenced writer exits like a fenced synchronous one).

The thread is a daemon: a worker that is failing anyway (a peer died mid-collective) must not be
held up at exit by a write that may be blocked on that same peer. The loop waits explicitly on
every path where the write matters (a stop, the end of training).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class WriteOutcome:
    """What one background write ended with: its result, or the exception it raised."""

    context: dict = field(default_factory=dict)  # whatever the submitter wants back (step, reason, ...)
    result: object = None
    error: BaseException | None = None
    seconds: float = 0.0  # from submit to the end of the write

    @property
    def ok(self) -> bool:
        return self.error is None


class AsyncWriter:
    def __init__(self, name: str = "checkpoint-writer") -> None:
        self.name = name
        self._thread: threading.Thread | None = None
        self._outcome: WriteOutcome | None = None
        self._submitted = 0.0  # monotonic time of the write in flight's submit
        self._context: dict = {}  # the write in flight's context, for a message about it

    @property
    def busy(self) -> bool:
        """A write was submitted and its outcome not collected yet (it may have finished)."""
        return self._thread is not None

    def submit(self, write: Callable[[], object], **context: object) -> None:
        if self._thread is not None:
            raise RuntimeError("a checkpoint write is already in flight: wait() for it first")
        started = self._submitted = time.monotonic()
        self._context = dict(context)

        def run() -> None:
            try:
                result, error = write(), None
            except BaseException as exc:  # reported to the training thread by wait()/poll()
                result, error = None, exc
            self._outcome = WriteOutcome(dict(context), result, error, time.monotonic() - started)

        self._outcome = None
        self._thread = threading.Thread(target=run, name=self.name, daemon=True)
        self._thread.start()

    def wait(self, timeout: float | None = None) -> WriteOutcome | None:
        """Block until the write in flight ends; its outcome, or None if none was in flight.

        With ``timeout`` and the write still running when it expires: raises TimeoutError and the
        write stays in flight.
        """
        if self._thread is None:
            return None
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"the checkpoint write is still running {self.running_s():.0f} s after it began")
        return self._collect()

    def wait_within(self, limit_s: float) -> WriteOutcome | None:
        """As ``wait``, but only until ``limit_s`` after the write was submitted (not after this call).

        A bound on the write, however many waits it spans: raises TimeoutError once the write has
        run ``limit_s`` seconds, and the write stays in flight.
        """
        if self._thread is None:
            return None
        return self.wait(max(0.0, self._submitted + limit_s - time.monotonic()))

    @property
    def context(self) -> dict:
        """The context the write in flight was submitted with (empty when none is)."""
        return dict(self._context) if self._thread is not None else {}

    def running_s(self) -> float:
        """Seconds since the write in flight was submitted (0 when none is)."""
        return time.monotonic() - self._submitted if self._thread is not None else 0.0

    def poll(self) -> WriteOutcome | None:
        """The outcome if the write in flight has ended (collected once), else None. Never blocks."""
        if self._thread is None or self._thread.is_alive():
            return None
        return self._collect()

    def _collect(self) -> WriteOutcome:
        outcome, self._thread, self._outcome = self._outcome, None, None
        assert outcome is not None  # run() always sets it before the thread ends
        return outcome
