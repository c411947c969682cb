"""Logs and progress events; rank 0 owns every side effect on the shared store.

Progress events are single lines ``@@tf {json}`` on stdout: the pod log is the transport, so
``torchfleet logs`` and the local harness (``localrun``) read the same thing. Rank 0 emits the
per-step events; any rank may emit lifecycle events (signal received, exit), which carry it.
TensorBoard scalars go to the shared store from rank 0 only (needs the ``tensorboard``
package, which the image installs; without it the scalars are skipped with one warning).
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from pathlib import Path

PREFIX = "@@tf "

log = logging.getLogger("elastic_trainer")


def setup_logging(rank: int) -> None:
    """INFO on rank 0, warnings and errors only elsewhere: N copies of a log help nobody."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"%(asctime)s [rank{rank}] %(levelname)s %(message)s"))
    log.handlers[:] = [handler]
    log.setLevel(logging.INFO if rank == 0 else logging.WARNING)
    log.propagate = False


# The checkpoint writer thread emits too (``ckpt`` at its commit): one line at a time.
_emitting = threading.Lock()


def emit(kind: str, **fields: object) -> None:
    line = PREFIX + json.dumps({"ev": kind, "wall": round(time.time(), 3), **fields}, sort_keys=True) + "\n"
    with _emitting:
        sys.stdout.write(line)
        sys.stdout.flush()


class Scalars:
    """Rank-0 TensorBoard writer on the shared store; a no-op on other ranks."""

    def __init__(self, log_dir: Path | None, rank: int) -> None:
        self._writer = None
        if log_dir is None or rank != 0:
            return
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            log.warning("tensorboard is not installed: scalars are not written to %s", log_dir)
            return
        self._writer = SummaryWriter(log_dir=str(log_dir))

    def add(self, tag: str, value: float, step: int) -> None:
        if self._writer is not None:
            self._writer.add_scalar(tag, value, step)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
