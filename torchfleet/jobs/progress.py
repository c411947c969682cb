"""The last checkpoint step of a job, from the best source available.

The training image (elastic_trainer) commits checkpoints as ``<checkpoint dir>/ckpt-g<gen>-s<step>/``
with ``meta.json`` written last, and announces each one on rank 0's stdout as a progress event
``@@tf {"ev": "ckpt", "step": ...}``. So, in order of trust:
1. the store itself, when the user has it mounted locally (``--shared-dir``);
2. the pods' logs (the event line), which every researcher can read through the API;
3. nothing: the caller falls back to the job's status.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from torchfleet.jobs.summary import events_from_lines

_COMMITTED = re.compile(r"^ckpt-g(\d+)-s(\d+)$")  # the training image's elastic_trainer.store.fence.COMMITTED_NAME


@dataclass(frozen=True)
class CheckpointInfo:
    step: int
    source: str  # where the step was read
    generation: int | None = None


def from_store(checkpoint_dir: Path) -> CheckpointInfo | None:
    """Newest committed checkpoint by (generation, step); a directory without meta.json is not committed."""
    if not checkpoint_dir.is_dir():
        return None
    best: tuple[int, int] | None = None
    for entry in checkpoint_dir.iterdir():
        m = _COMMITTED.match(entry.name)
        if m and (entry / "meta.json").is_file():
            key = (int(m.group(1)), int(m.group(2)))
            best = key if best is None or key > best else best
    if best is None:
        return None
    return CheckpointInfo(step=best[1], generation=best[0], source=str(checkpoint_dir))


def from_log_lines(lines: Iterable[str], source: str) -> CheckpointInfo | None:
    """The newest ``ckpt`` event in a log (a ``resumed`` event also proves a checkpoint existed)."""
    best: CheckpointInfo | None = None
    for event in events_from_lines(lines):  # the one parser of `@@tf` lines, as the progress view reads them
        if event["ev"] not in ("ckpt", "resumed"):
            continue
        step = event.get("step")
        if isinstance(step, int) and (best is None or step >= best.step):
            gen = event.get("gen") if event.get("ev") == "ckpt" else event.get("from_gen")
            best = CheckpointInfo(step=step, generation=gen if isinstance(gen, int) else None, source=source)
    return best


def newest(found: Iterable[CheckpointInfo | None]) -> CheckpointInfo | None:
    candidates = [f for f in found if f is not None]
    return max(candidates, key=lambda f: f.step) if candidates else None
