"""Writing one checkpoint: a new temporary directory, files hashed as they are written, the rename that commits it.

Layout under the checkpoint directory::

    generations/gen-000003.json             one per worker group (fence.py)
    ckpt-g000003-s0000001200/state.pt       torch.save of the whole training state
    ckpt-g000003-s0000001200/meta.json      step, generation, and the size and sha256 of each file
    .tmp-g000003-s0000001300-<random>/      a write in progress (or a writer that died): never loaded
    .trash-<random>-<name>/                 a directory being removed (``remove``): out of every reader's sight

A checkpoint is written into a new temporary directory, each file fsynced, ``meta.json``
last, then the directory is renamed to its final name and the parent fsynced. The rename is
the commit: a reader only looks at ``ckpt-*`` names, so a partial write is never loaded.

The sha256 is computed from the bytes as they are written, never by reading the file back
(issue 11: re-reading a 4.4 GB state cost 3.8 s per checkpoint). Reading back is
verification only (checkpoint_verify.py). ``CheckpointStore`` (checkpoint.py) puts these
steps together and prunes after each commit.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from elastic_trainer.store.fence import Generations, StaleGenerationError, fsync_dir

STATE_FILE = "state.pt"
META_FILE = "meta.json"
# 2: meta.json lists every file as {"files": {name: {"size", "sha256"}}}; format 1 had only
# state.pt's "size" and "sha256" at the top level, which are still written and still read.
FORMAT = 2


class CheckpointWriteError(RuntimeError):
    """A save failed (e.g. the store is full, ENOSPC); its temporary directory is removed.

    Nothing was committed and nothing committed was touched: the previous checkpoints stand.
    """


class AlreadyCommittedError(CheckpointWriteError, FileExistsError):
    """A checkpoint of this generation and step is committed already (another writer of the same generation).

    A write error (the loop reports it and trains on), and a FileExistsError for callers that ask that.
    """


@dataclass(frozen=True)
class FileDigest:
    size: int
    sha256: str

    def as_meta(self) -> dict:
        return {"size": self.size, "sha256": self.sha256}


class HashingWriter:
    """A write-only file object that hashes and counts what passes through it (torch.save takes one).

    torch's writer swallows an exception raised by ``write`` and raises its own RuntimeError
    ("unexpected pos"), so the first OSError is kept in ``error`` for the caller to raise.
    """

    def __init__(self, handle: BinaryIO) -> None:
        self._handle = handle
        self._digest = hashlib.sha256()
        self.size = 0
        self.error: OSError | None = None

    def write(self, data) -> int:
        try:
            written = self._handle.write(data)
        except OSError as exc:
            self.error = self.error or exc
            raise
        view = memoryview(data)
        if written is not None and written != view.nbytes:
            self.error = self.error or OSError(f"short write: {written} of {view.nbytes} bytes")
            raise self.error
        self._digest.update(view)
        self.size += view.nbytes
        return view.nbytes

    def flush(self) -> None:
        self._handle.flush()

    def digest(self) -> FileDigest:
        return FileDigest(self.size, self._digest.hexdigest())


def write_file(path: Path, write: Callable[[HashingWriter], None]) -> FileDigest:
    """Create ``path``, let ``write`` fill it, fsync it; its size and sha256 from the bytes written."""
    with path.open("xb") as handle:
        writer = HashingWriter(handle)
        try:
            write(writer)
            handle.flush()
            os.fsync(handle.fileno())
        except Exception as exc:
            if writer.error is not None and writer.error is not exc:
                raise writer.error from exc  # the real cause (ENOSPC), not torch's "unexpected pos"
            raise
    return writer.digest()


def temporary_path(root: Path, generation: int, step: int) -> Path:
    """A fresh name for a checkpoint of (generation, step) in progress: a ``.tmp-*`` name no reader loads."""
    return root / f".tmp-g{generation:06d}-s{step:010d}-{uuid.uuid4().hex[:12]}"


def make_temporary(root: Path, tmp: Path) -> None:
    """Create the store (if it is new) and the empty temporary directory ``tmp`` in it."""
    root.mkdir(parents=True, exist_ok=True)
    tmp.mkdir()


def checkpoint_meta(step: int, generation: int, files: dict[str, FileDigest], info: dict | None = None) -> dict:
    """``meta.json`` of a checkpoint made of ``files`` (their digests from the bytes written)."""
    meta = {
        "format": FORMAT,
        "step": step,
        "generation": generation,
        "files": {name: digest.as_meta() for name, digest in files.items()},
        "created": time.time(),
        **(info or {}),
    }
    if STATE_FILE in files:  # format 1's fields, for readers of that format
        meta.update(files[STATE_FILE].as_meta())
    return meta


def write_meta_and_rename(
    tmp: Path,
    final: Path,
    meta: dict,
    check_fence: Callable[[], None],
    before_commit: Callable[[Path], None] | None = None,
) -> None:
    """Write ``meta.json`` last, fsync ``tmp``, then commit by renaming it to ``final`` if not fenced.

    ``check_fence`` raises StaleGenerationError when a newer group exists: it is asked right
    before the rename, so an older writer never commits over a newer group's checkpoints.
    """
    write_file(tmp / META_FILE, lambda handle: handle.write(json.dumps(meta, indent=1).encode()))
    fsync_dir(tmp)
    if before_commit is not None:
        before_commit(tmp)
    check_fence()
    if os.path.lexists(final):
        raise AlreadyCommittedError(f"{final} already committed; not overwriting it")
    os.rename(tmp, final)  # the commit


# A directory on its way out: renamed out of every reader's and writer's sight before it is deleted
TRASH_PREFIX = ".trash-"


def trash(path: Path) -> Path | None:
    """Rename a directory of the store to a trash name, atomically: the first step of removing it.

    Deleting in place, file by file, let a writer rename a half-deleted temporary into an empty
    committed checkpoint, and a reader find a checkpoint with its files gone (issue 23). A rename
    either happens before the writer's own rename (whose rename then fails: nothing committed)
    or finds the name gone (the writer committed first: nothing is touched). None if ``path`` is
    gone, cannot be moved, or is a symbolic link (never followed, never removed).
    """
    if path.is_symlink():
        return None
    moved = path.with_name(f"{TRASH_PREFIX}{uuid.uuid4().hex[:12]}-{path.name}")
    try:
        os.rename(path, moved)
    except OSError:  # gone already (ENOENT), or the store cannot be written: nothing to do
        return None
    return moved


def remove(path: Path) -> None:
    """Remove a directory of the store (trash, then delete); never follow a symbolic link out of it."""
    moved = trash(path)
    if moved is not None:
        shutil.rmtree(moved, ignore_errors=True)


def guarded(tmp: Path, generation: int, generations: Generations, action: Callable[[], object]):
    """Run one step of a save; on failure remove ``tmp`` and say whether the writer was fenced.

    A newer generation's prune removes older generations' temporaries, so a write that fails
    (FileNotFoundError mid-write or at the rename) while a newer generation exists was
    fenced, not broken (issue 11). A failure of the store (ENOSPC, EIO) is a
    CheckpointWriteError; anything else (a bug, an interrupt) propagates as it is. On an
    interrupt (BaseException) the temporary is left, as a dead writer's would be.
    """
    try:
        return action()
    except Exception as exc:
        remove(tmp)
        if isinstance(exc, StaleGenerationError | AlreadyCommittedError):
            raise
        try:
            generations.check(generation)
        except StaleGenerationError as fenced:
            raise fenced from exc
        except OSError:
            pass  # the store is failing: report the original error below
        if isinstance(exc, OSError):
            raise CheckpointWriteError(f"writing the checkpoint in {tmp.name} failed: {exc}") from exc
        raise
