"""Logs and progress events; rank 0 owns every side effect on the shared store.

Progress events are single lines ``@@tf {json}`` on stdout: the pod log is the transport, so
``torchfleet logs`` and the local harness (``localrun``) read the same thing. Rank 0 emits the
per-step events; any rank may emit lifecycle events (signal received, exit), which carry it.
TensorBoard scalars go to the shared store from rank 0 only (needs the ``tensorboard``
package, which the image installs; without it the scalars are skipped with one warning); a
store that refuses them ends the scalars, never the training (``Scalars``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
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


# Who reads the events: `torchfleet logs`/`status` and the local harness read pod logs and files, never a
# terminal. A run watched in one (the launcher's --standalone, README's "Run it once") gets a readable line
# instead of the JSON (issue 32). TORCHFLEET_EVENTS=json or text chooses either way: the launcher's --standalone
# sets text (no torchfleet reader starts a standalone node), the local harness json (localrun.py, inplacerun.py).
ENV_EVENTS = "TORCHFLEET_EVENTS"


def _readable_out() -> bool:
    chosen = os.environ.get(ENV_EVENTS, "")
    if chosen in ("json", "text"):
        return chosen == "text"
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):  # replaced or closed stdout
        return False


def readable(record: dict) -> str:
    """One event as a line a person reads: ``step 20  loss 0.5312  world 2``, ``resumed  step=100 ...``."""
    fields = {k: v for k, v in record.items() if k not in ("ev", "wall")}
    clock = time.strftime("%H:%M:%S", time.localtime(record.get("wall", time.time())))
    if record.get("ev") == "step":
        loss = fields.pop("loss", None)
        parts = [f"step {fields.pop('step', '?')}"]
        parts += [f"loss {loss:.4g}" if isinstance(loss, int | float) else "loss -"]
        parts += [f"world {fields.pop('world')}"] if "world" in fields else []
        return f"{clock}  " + "   ".join(parts)
    return f"{clock}  {record.get('ev')}" + "".join(f"  {k}={v}" for k, v in sorted(fields.items()))


def emit(kind: str, **fields: object) -> None:
    record = {"ev": kind, "wall": round(time.time(), 3), **fields}
    line = (readable(record) if _readable_out() else PREFIX + json.dumps(record, sort_keys=True)) + "\n"
    with _emitting:
        sys.stdout.write(line)
        sys.stdout.flush()


def _summary_writer(log_dir: Path):
    """torch's TensorBoard writer, or None without the ``tensorboard`` package."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        log.warning("tensorboard is not installed: scalars are not written to %s", log_dir)
        return None
    return SummaryWriter(log_dir=str(log_dir))


class Scalars:
    """Rank-0 TensorBoard writer on the shared store; a no-op on other ranks.

    Training never dies for its TensorBoard output: the first failure of the writer (the store
    full or read-only) is logged once and emitted as ``scalars_failed``, and no scalar is written
    after it. Any exception counts, not only OSError: the writer's file layer (``tf.io.gfile``,
    or tensorboard's stand-in for it) raises its own error types, and its background thread
    hands a write's failure to the next ``add_scalar`` or ``close``.
    """

    def __init__(self, log_dir: Path | None, rank: int) -> None:
        self._writer = None
        self.log_dir = log_dir
        self.failed: str | None = None  # why scalars stopped, once they have
        if log_dir is None or rank != 0:
            return
        try:
            self._writer = _summary_writer(log_dir)  # creates the directory and the event file
        except Exception as exc:
            self._give_up("opening", exc)

    def add(self, tag: str, value: float, step: int) -> None:
        if self._writer is None:
            return
        try:
            self._writer.add_scalar(tag, value, step)
        except Exception as exc:
            self._give_up(f"writing {tag} of step {step}", exc)

    def close(self) -> None:
        writer, self._writer = self._writer, None
        if writer is None:
            return
        try:
            writer.close()  # flushes what is queued: the store may refuse it now
        except Exception as exc:
            self._give_up("closing", exc)

    def _give_up(self, action: str, exc: Exception) -> None:
        writer, self._writer = self._writer, None
        self.failed = f"{action} failed: {type(exc).__name__}: {exc}"
        log.error("TensorBoard scalars in %s stopped, %s; training goes on without them", self.log_dir, self.failed)
        emit("scalars_failed", dir=str(self.log_dir), error=self.failed)
        if writer is not None:
            with contextlib.suppress(Exception):  # release its file and thread; it may fail again
                writer.close()
