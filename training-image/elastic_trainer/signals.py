"""A spot notice arrives as SIGTERM: ask the loop to stop after the current step.

The handler only records the request; the loop agrees on it with every rank (one all-reduce per
step), so all ranks stop after the same step and rank 0 checkpoints that step. Notice windows
(docs/facts.md, "Spot notices"): AWS 2 minutes, GKE 15 s for non-system pods, Azure about 30 s; torchrun itself
SIGKILLs workers 30 s after forwarding the SIGTERM.
"""

from __future__ import annotations

import signal
import time
from types import FrameType


class StopRequest:
    def __init__(self) -> None:
        self.signum: int | None = None
        self.at: float | None = None  # time.monotonic() of the first signal

    def __bool__(self) -> bool:
        return self.signum is not None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is None:
            self.signum, self.at = signum, time.monotonic()

    def install(self, signums: tuple[int, ...] = (signal.SIGTERM, signal.SIGINT)) -> StopRequest:
        for signum in signums:
            signal.signal(signum, self._handle)
        return self
