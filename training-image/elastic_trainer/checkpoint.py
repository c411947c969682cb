"""Checkpoints on the shared store: atomic, verified, fenced, last K kept.

Layout under the checkpoint directory::

    generations/gen-000003.json             one per worker group (fence.py)
    ckpt-g000003-s0000001200/state.pt       torch.save of the whole training state
    ckpt-g000003-s0000001200/meta.json      step, generation, size and sha256 of state.pt
    .tmp-g000003-s0000001300-<random>/      a write in progress (or a writer that died): never loaded

A checkpoint is written into a new temporary directory, each file fsynced, ``meta.json``
last, then the directory is renamed to its final name and the parent fsynced. The rename is
the commit: a reader only looks at ``ckpt-*`` names, so a partial write is never loaded.
On load every candidate is verified (meta present, size and sha256 match, ``torch.load``
succeeds), newest first by (generation, step); a corrupt or truncated one is skipped with a
warning and the previous one used.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from elastic_trainer.events import log
from elastic_trainer.fence import Generations, fsync_dir

_COMMITTED = re.compile(r"^ckpt-g(\d+)-s(\d+)$")
_TEMPORARY = re.compile(r"^\.tmp-g(\d+)-s(\d+)-[0-9a-f]+$")
STATE_FILE = "state.pt"
META_FILE = "meta.json"
FORMAT = 1


class CorruptCheckpointError(RuntimeError):
    pass


@dataclass(frozen=True)
class Checkpoint:
    generation: int
    step: int
    path: Path


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _write_synced(path: Path, write: Callable[[object], None]) -> None:
    with path.open("wb") as handle:
        write(handle)
        handle.flush()
        os.fsync(handle.fileno())


class CheckpointStore:
    def __init__(self, root: Path | str, keep: int = 3) -> None:
        if keep < 1:
            raise ValueError("keep must be at least 1")
        self.root = Path(root)
        self.keep = keep
        self.generations = Generations(self.root)

    def name(self, generation: int, step: int) -> str:
        return f"ckpt-g{generation:06d}-s{step:010d}"

    def committed(self) -> list[Checkpoint]:
        """Committed checkpoints, newest first: a newer generation outranks any older one."""
        if not self.root.is_dir():
            return []
        found = [
            Checkpoint(int(m.group(1)), int(m.group(2)), p)
            for p in self.root.iterdir()
            if (m := _COMMITTED.match(p.name)) and p.is_dir()
        ]
        return sorted(found, key=lambda c: (c.generation, c.step), reverse=True)

    def save(
        self, state: dict, *, step: int, generation: int, info: dict | None = None,
        before_commit: Callable[[Path], None] | None = None,
    ) -> Checkpoint:
        """Write ``state`` and commit it as (generation, step); rank 0 only."""
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / f".tmp-g{generation:06d}-s{step:010d}-{uuid.uuid4().hex[:12]}"
        tmp.mkdir()
        state_path = tmp / STATE_FILE
        _write_synced(state_path, lambda handle: torch.save(state, handle))
        meta = {
            "format": FORMAT,
            "step": step,
            "generation": generation,
            "size": state_path.stat().st_size,
            "sha256": _sha256(state_path),
            "created": time.time(),
            **(info or {}),
        }
        _write_synced(tmp / META_FILE, lambda handle: handle.write(json.dumps(meta, indent=1).encode()))
        fsync_dir(tmp)
        if before_commit is not None:
            before_commit(tmp)
        self.generations.check(generation)  # raises StaleGenerationError: a newer group exists
        final = self.root / self.name(generation, step)
        if final.exists():
            shutil.rmtree(tmp, ignore_errors=True)
            raise FileExistsError(f"{final} already committed; not overwriting it")
        os.rename(tmp, final)  # the commit
        fsync_dir(self.root)
        self.prune(generation)
        return Checkpoint(generation, step, final)

    def verify(self, checkpoint: Checkpoint) -> dict:
        """The checkpoint's meta if its state file is complete and intact."""
        try:
            meta = json.loads((checkpoint.path / META_FILE).read_text())
        except (OSError, ValueError) as exc:
            raise CorruptCheckpointError(f"{checkpoint.path.name}: unreadable {META_FILE} ({exc})") from exc
        state_path = checkpoint.path / STATE_FILE
        try:
            size = state_path.stat().st_size
        except OSError as exc:
            raise CorruptCheckpointError(f"{checkpoint.path.name}: missing {STATE_FILE}") from exc
        if size != meta.get("size"):
            raise CorruptCheckpointError(
                f"{checkpoint.path.name}: {STATE_FILE} is {size} bytes, {meta.get('size')} were written (truncated)"
            )
        if _sha256(state_path) != meta.get("sha256"):
            raise CorruptCheckpointError(f"{checkpoint.path.name}: {STATE_FILE} does not match its sha256")
        return meta

    def load(self, checkpoint: Checkpoint, map_location: str | torch.device = "cpu") -> tuple[dict, dict]:
        meta = self.verify(checkpoint)
        try:
            # weights_only: a checkpoint on a shared store is data, never code to run
            state = torch.load(checkpoint.path / STATE_FILE, map_location=map_location, weights_only=True)
        except Exception as exc:
            raise CorruptCheckpointError(f"{checkpoint.path.name}: torch.load failed ({exc})") from exc
        return state, meta

    def load_latest(self, map_location: str | torch.device = "cpu") -> tuple[dict, dict, Checkpoint] | None:
        for checkpoint in self.committed():
            try:
                state, meta = self.load(checkpoint, map_location)
            except CorruptCheckpointError as exc:
                log.warning("skipping checkpoint: %s; trying the previous one", exc)
                continue
            return state, meta, checkpoint
        return None

    def prune(self, generation: int) -> None:
        """Keep the newest ``keep`` checkpoints; drop temporaries of this and older generations.

        Only the current generation's rank 0 calls this, after its own commit, so no
        temporary of a generation <= ours can still be in flight (older writers are fenced).
        """
        for old in self.committed()[self.keep :]:
            shutil.rmtree(old.path, ignore_errors=True)
        for path in self.root.iterdir():
            match = _TEMPORARY.match(path.name)
            if match and int(match.group(1)) <= generation:
                shutil.rmtree(path, ignore_errors=True)
