"""A bound for the calls that take none: a worker whose call has not returned in time exits (issue 23).

torchft 0.2.0's ``Manager.start_quorum`` and ``wait_quorum`` wait on the quorum future with no
timeout (``self._quorum_future.result()``, torchft/manager.py), and ``should_commit`` waits for the
heal's recovery stream without one. What runs inside them has its own timeouts (the quorum RPC,
the process group's configure, the heal's metadata and transfer), but a call that never returns
(a lost wake-up, a lock, a peer's socket that stays open) would leave the worker holding its
GPU and training nothing: the worst outcome a spot job can have.

``StallGuard`` is one watcher thread and one armed deadline at a time. Past it, the watcher says what
was waited for and for how long, emits an ``exit`` event (``reason: "stalled"``) and ends the
process with ``code``; the node starts the worker again (replica_node.py), which heals from a
live peer or resumes from the store. ``os._exit``, not ``sys.exit``: a normal exit joins
torchft's quorum thread (a ThreadPoolExecutor's, not a daemon), which may be the one stuck.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from elastic_trainer.events import emit, log


class StallGuard:
    """``with guard("the quorum"): manager.wait_quorum()``: at most ``limit_s`` seconds, or the process ends."""

    def __init__(self, limit_s: float, code: int, setting: str, **fields: object) -> None:
        if not limit_s > 0:
            raise ValueError(f"{setting}={limit_s!r}: must be a positive number of seconds")
        self.limit_s, self.code, self.setting, self.fields = limit_s, code, setting, fields
        self._cond = threading.Condition()
        self._armed: tuple[int, str, float] | None = None  # (token, what, deadline on the monotonic clock)
        self._token = 0
        self._watcher = threading.Thread(target=self._watch, name="stall-guard", daemon=True)
        self._watcher.start()

    @contextmanager
    def __call__(self, what: str) -> Iterator[None]:
        with self._cond:
            self._token += 1
            token = self._token
            self._armed = (token, what, time.monotonic() + self.limit_s)
            self._cond.notify()
        try:
            yield
        finally:
            with self._cond:
                if self._armed is not None and self._armed[0] == token:
                    self._armed = None

    def _watch(self) -> None:
        with self._cond:
            while True:
                if self._armed is None:
                    self._cond.wait()
                    continue
                _, what, deadline = self._armed
                left = deadline - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                self._expire(what)

    def _expire(self, what: str) -> None:
        log.error("%s did not return within %.0f s (%s): exiting %d so that the node starts this worker again",
                  what, self.limit_s, self.setting, self.code)
        emit("exit", **self.fields, code=self.code, reason="stalled", waiting_for=what, limit_s=self.limit_s)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):  # a closed pipe: the exit matters more than the line
                stream.flush()
        os._exit(self.code)
