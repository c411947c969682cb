"""Checkpoints on the shared store: atomic, verified, fenced, last K intact ones kept.

Layout under the checkpoint directory::

    generations/gen-000003.json             one per worker group (fence.py)
    ckpt-g000003-s0000001200/state.pt       torch.save of the whole training state
    ckpt-g000003-s0000001200/meta.json      step, generation, and the size and sha256 of each file
    .tmp-g000003-s0000001300-<random>/      a write in progress (or a writer that died): never loaded

A checkpoint is written into a new temporary directory, each file fsynced, ``meta.json``
last, then the directory is renamed to its final name and the parent fsynced. The rename is
the commit: a reader only looks at ``ckpt-*`` names, so a partial write is never loaded.

The sha256 is computed from the bytes as they are written, never by reading the file back
(issue 11: re-reading a 4.4 GB state cost 3.8 s per checkpoint). A resume verifies a candidate
once (``verify``), and a reader that was told it is verified only deserializes it
(``load(..., verified=True)``); results are cached per process, keyed by the files' identity.

What counts as a checkpoint (issue 11: names alone let an empty, corrupt or linked directory
push every good checkpoint out of ``keep``): only a real directory (never a symbolic link,
which is refused with a warning, never followed, never deleted) whose files match its
``meta.json``. ``prune`` keeps the newest ``keep`` verified ones and removes only what is older
than all of them; an unverifiable directory newer than that is left alone, so nothing good
is ever deleted to make room.

A prune runs after each commit, in the writer's thread; a stop's save is waited for in the
notice window. While the owner says it is in a hurry (``in_a_hurry``: a stop is under way), a
prune hashes nothing: a checkpoint this process has not verified yet (a restarted worker knows
only the one it resumed from) is neither counted nor removed, and a hash in progress is given up.
The next prune without a hurry (the next periodic save, in this or the next process) settles it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import time
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import torch

from elastic_trainer.events import log
from elastic_trainer.fence import COMMITTED_NAME, TEMPORARY_NAME, Generations, StaleGenerationError, fsync_dir

STATE_FILE = "state.pt"
META_FILE = "meta.json"
# 2: meta.json lists every file as {"files": {name: {"size", "sha256"}}}; format 1 had only
# state.pt's "size" and "sha256" at the top level, which are still written and still read.
FORMAT = 2


class CorruptCheckpointError(RuntimeError):
    """The checkpoint is not intact or cannot be used: skip it and use the previous one."""


class CheckpointWriteError(RuntimeError):
    """A save failed (e.g. the store is full, ENOSPC); its temporary directory is removed.

    Nothing was committed and nothing committed was touched: the previous checkpoints stand.
    """


@dataclass(frozen=True)
class Checkpoint:
    generation: int
    step: int
    path: Path


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


class VerificationDeferred(Exception):
    """A prune gave up hashing a checkpoint: the owner is in a hurry. Its verdict stays unknown."""


def _hash_file(path: Path, hurry: Callable[[], bool] | None = None) -> FileDigest:
    """Read a file back and hash it: verification only, never part of a save.

    ``hurry`` is asked before every MiB: once it says yes, VerificationDeferred is raised.
    """
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            if hurry is not None and hurry():
                raise VerificationDeferred(f"{path.parent.name}: hashing {path.name} given up after {size} bytes")
            digest.update(chunk)
            size += len(chunk)
    return FileDigest(size, digest.hexdigest())


def _fingerprint(directory: Path) -> tuple:
    """What changes when a checkpoint's files are replaced, rewritten or removed: the verdict cache's key."""
    own = os.lstat(directory)
    entries = []
    with os.scandir(directory) as scan:
        for entry in scan:
            info = entry.stat(follow_symlinks=False)
            entries.append((entry.name, info.st_mode, info.st_ino, info.st_size, info.st_mtime_ns))
    return own.st_dev, own.st_ino, tuple(sorted(entries))


def _transient(exc: CorruptCheckpointError) -> bool:
    """A read error (EIO, ESTALE...) may pass: such a verdict is not remembered."""
    return isinstance(exc.__cause__, OSError) and not isinstance(exc.__cause__, FileNotFoundError)


def _remove(path: Path) -> None:
    """Remove a directory of the store; never follow a symbolic link out of it."""
    if path.is_symlink():
        return
    shutil.rmtree(path, ignore_errors=True)


class CheckpointStore:
    def __init__(self, root: Path | str, keep: int = 3, in_a_hurry: Callable[[], bool] | None = None) -> None:
        if keep < 1:
            raise ValueError("keep must be at least 1")
        self.root = Path(root)
        self.keep = keep
        # asked by prune (from the writer's thread) before and while hashing: see the module docstring
        self.in_a_hurry = in_a_hurry or (lambda: False)
        self.generations = Generations(self.root)
        # path -> (fingerprint, meta or why not): what this process verified or wrote itself
        self._verdicts: dict[Path, tuple[tuple, dict | CorruptCheckpointError]] = {}
        self._warned: set[str] = set()  # say each refusal once, not at every prune

    def name(self, generation: int, step: int) -> str:
        return f"ckpt-g{generation:06d}-s{step:010d}"

    # -- listing -----------------------------------------------------------------------------
    def _named(self) -> list[Checkpoint]:
        """Every entry named like a committed checkpoint, newest first by (generation, step)."""
        if not self.root.is_dir():
            return []
        found = [Checkpoint(int(m.group(1)), int(m.group(2)), p)
                 for p in self.root.iterdir() if (m := COMMITTED_NAME.match(p.name))]
        return sorted(found, key=lambda c: (c.generation, c.step), reverse=True)

    def _refused(self, checkpoint: Checkpoint) -> str | None:
        """Why an entry can never be a checkpoint of this store (checked without reading it), or None."""
        try:
            mode = os.lstat(checkpoint.path).st_mode
        except OSError as exc:
            return f"cannot stat it ({exc})"
        if stat.S_ISLNK(mode):
            return f"a symbolic link (to {os.readlink(checkpoint.path)}): checkpoints outside the store are refused"
        if not stat.S_ISDIR(mode):
            return "not a directory"
        return None

    def committed(self) -> list[Checkpoint]:
        """Committed checkpoints by name (real directories, not yet verified), newest first.

        A newer generation outranks any older one. Symbolic links are left out, with a warning once.
        """
        found = []
        for checkpoint in self._named():
            reason = self._refused(checkpoint)
            if reason is None:
                found.append(checkpoint)
            else:
                self._warn_once(f"refusing {checkpoint.path.name}: {reason}")
        return found

    def _warn_once(self, message: str) -> None:
        if message not in self._warned:
            self._warned.add(message)
            log.warning("%s", message)

    # -- writing -----------------------------------------------------------------------------
    def save(
        self, state: dict, *, step: int, generation: int, info: dict | None = None,
        before_commit: Callable[[Path], None] | None = None,
    ) -> Checkpoint:
        """Write ``state`` and commit it as (generation, step); rank 0 only.

        Raises StaleGenerationError if a newer group exists (also when its prune removed this
        write's temporary directory), CheckpointWriteError if the store failed (e.g. ENOSPC).
        """
        tmp = self.temporary(generation, step)
        files = self._guarded(tmp, generation, lambda: {
            STATE_FILE: write_file(tmp / STATE_FILE, lambda handle: torch.save(state, handle))})
        return self.commit(tmp, step=step, generation=generation, files=files, info=info,
                           before_commit=before_commit)

    def temporary(self, generation: int, step: int) -> Path:
        """A new, empty temporary directory for a checkpoint of (generation, step)."""
        tmp = self.root / f".tmp-g{generation:06d}-s{step:010d}-{uuid.uuid4().hex[:12]}"

        def create() -> None:
            self.root.mkdir(parents=True, exist_ok=True)
            tmp.mkdir()

        self._guarded(tmp, generation, create)
        return tmp

    def commit(
        self, tmp: Path, *, step: int, generation: int, files: dict[str, FileDigest], info: dict | None = None,
        before_commit: Callable[[Path], None] | None = None,
    ) -> Checkpoint:
        """Write ``meta.json`` for ``files`` (already written and fsynced in ``tmp``) and commit.

        The commit is the rename, after the fence check; then older checkpoints are pruned.
        """
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
        final = self.root / self.name(generation, step)

        def write_meta_and_rename() -> None:
            write_file(tmp / META_FILE, lambda handle: handle.write(json.dumps(meta, indent=1).encode()))
            fsync_dir(tmp)
            if before_commit is not None:
                before_commit(tmp)
            self.generations.check(generation)  # raises StaleGenerationError: a newer group exists
            if os.path.lexists(final):
                raise FileExistsError(f"{final} already committed; not overwriting it")
            os.rename(tmp, final)  # the commit

        self._guarded(tmp, generation, write_meta_and_rename)
        try:
            fsync_dir(self.root)
        except OSError as exc:
            raise CheckpointWriteError(f"{final.name} was committed but its directory entry may not be durable "
                                       f"({exc})") from exc
        self._remember(final, meta)
        self.prune(generation)
        return Checkpoint(generation, step, final)

    def _guarded(self, tmp: Path, generation: int, action: Callable[[], object]):
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
            _remove(tmp)
            if isinstance(exc, StaleGenerationError | FileExistsError):
                raise
            try:
                self.generations.check(generation)
            except StaleGenerationError as fenced:
                raise fenced from exc
            except OSError:
                pass  # the store is failing: report the original error below
            if isinstance(exc, OSError):
                raise CheckpointWriteError(f"writing the checkpoint in {tmp.name} failed: {exc}") from exc
            raise

    # -- reading -----------------------------------------------------------------------------
    def _read_meta(self, checkpoint: Checkpoint) -> dict:
        reason = self._refused(checkpoint)
        if reason is not None:
            raise CorruptCheckpointError(f"{checkpoint.path.name}: {reason}")
        try:
            meta = json.loads((checkpoint.path / META_FILE).read_text())
        except (OSError, ValueError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            raise CorruptCheckpointError(f"{checkpoint.path.name}: unreadable {META_FILE} ({why})") from exc
        if not isinstance(meta, dict):
            raise CorruptCheckpointError(f"{checkpoint.path.name}: {META_FILE} is not an object")
        return meta

    @staticmethod
    def _files(meta: dict) -> dict[str, dict]:
        files = meta.get("files")
        if isinstance(files, dict) and files:
            return files
        return {STATE_FILE: {"size": meta.get("size"), "sha256": meta.get("sha256")}}  # format 1

    def _remember(self, path: Path, verdict: dict | CorruptCheckpointError) -> None:
        try:
            self._verdicts[path] = (_fingerprint(path), verdict)
        except OSError:
            self._verdicts.pop(path, None)

    def verify(self, checkpoint: Checkpoint) -> dict:
        """The checkpoint's meta if every file is complete and intact; else CorruptCheckpointError.

        Hashes each file once per process: the verdict on a checkpoint this process wrote or
        verified is reused while its directory's entries are unchanged (inode, size, mtime).
        """
        return self._verify(checkpoint)

    def _known(self, checkpoint: Checkpoint) -> dict | CorruptCheckpointError | None:
        """This process's verdict on the checkpoint if its files are unchanged since; else None."""
        cached = self._verdicts.get(checkpoint.path)
        if cached is None:
            return None
        try:
            unchanged = _fingerprint(checkpoint.path) == cached[0]
        except OSError:
            unchanged = False
        if unchanged:
            return cached[1]
        self._verdicts.pop(checkpoint.path, None)
        return None

    def _verify(self, checkpoint: Checkpoint, hurry: Callable[[], bool] | None = None) -> dict:
        """``verify``; with ``hurry``, hashing may end in VerificationDeferred (nothing remembered)."""
        known = self._known(checkpoint)
        if isinstance(known, CorruptCheckpointError):
            raise known
        if known is not None:
            return known
        if hurry is not None and hurry():  # not even its meta.json is read
            raise VerificationDeferred(f"{checkpoint.path.name}: not verified by this process yet")
        try:
            meta = self._check(checkpoint, hurry)
        except CorruptCheckpointError as exc:
            if not _transient(exc) and self._refused(checkpoint) is None:
                self._remember(checkpoint.path, exc)  # a read error may pass: try it again next time
            raise
        self._remember(checkpoint.path, meta)
        return meta

    def _check(self, checkpoint: Checkpoint, hurry: Callable[[], bool] | None = None) -> dict:
        meta = self._read_meta(checkpoint)
        name = checkpoint.path.name
        for file_name, expected in self._files(meta).items():
            path = checkpoint.path / file_name
            try:
                info = os.lstat(path)
            except OSError as exc:
                raise CorruptCheckpointError(f"{name}: missing {file_name}") from exc
            if not stat.S_ISREG(info.st_mode):
                raise CorruptCheckpointError(f"{name}: {file_name} is not a regular file (links are refused)")
            if info.st_size != expected.get("size"):
                raise CorruptCheckpointError(
                    f"{name}: {file_name} is {info.st_size} bytes, {expected.get('size')} were written (truncated)")
            try:
                digest = _hash_file(path, hurry)
            except OSError as exc:
                raise CorruptCheckpointError(f"{name}: cannot read {file_name} ({exc})") from exc
            if digest.sha256 != expected.get("sha256"):
                raise CorruptCheckpointError(f"{name}: {file_name} does not match its sha256")
        return meta

    def read(self, checkpoint: Checkpoint, map_location: str | torch.device = "cpu") -> dict:
        """Deserialize ``state.pt`` without verifying it (the caller verified it, or was told it is)."""
        name = checkpoint.path.name
        try:
            # weights_only: a checkpoint on a shared store is data, never code to run
            state = torch.load(checkpoint.path / STATE_FILE, map_location=map_location, weights_only=True)
        except Exception as exc:
            raise CorruptCheckpointError(f"{name}: torch.load(weights_only=True) failed ({exc})") from exc
        if not isinstance(state, dict):
            raise CorruptCheckpointError(f"{name}: {STATE_FILE} holds a {type(state).__name__}, not a dict")
        return state

    def load(
        self, checkpoint: Checkpoint, map_location: str | torch.device = "cpu", *, verified: bool = False,
        required: Collection[str] = (),
    ) -> tuple[dict, dict]:
        """State and meta of one checkpoint; ``verified=True`` skips the hashing (done once, elsewhere)."""
        meta = self._read_meta(checkpoint) if verified else self.verify(checkpoint)
        try:
            if meta.get("checkpoint_format") == "sharded":  # every rank wrote part of it (sharded.py)
                from elastic_trainer import sharded  # here: sharded imports this module

                state = sharded.read(checkpoint)
            else:
                state = self.read(checkpoint, map_location)
            missing = [key for key in required if key not in state]
            if missing:
                raise CorruptCheckpointError(f"{checkpoint.path.name}: lacks {', '.join(missing)} in {STATE_FILE}")
        except CorruptCheckpointError as exc:
            # intact but unusable: it must not count towards ``keep`` either (prune asks verify)
            if not _transient(exc):
                self._remember(checkpoint.path, exc)
            raise
        return state, meta

    def load_latest(
        self, map_location: str | torch.device = "cpu", *, required: Collection[str] = (),
        exclude: Collection[Checkpoint] = (), on_skip: Callable[[Checkpoint, str], None] | None = None,
    ) -> tuple[dict, dict, Checkpoint] | None:
        """The newest checkpoint that verifies, loads and has the ``required`` keys; None if none does.

        Each one passed over is logged as a warning and given to ``on_skip`` with the reason.
        """
        for checkpoint in self._named():
            if checkpoint in exclude:
                continue
            try:
                state, meta = self.load(checkpoint, map_location, required=required)
            except CorruptCheckpointError as exc:
                log.warning("skipping checkpoint: %s; trying the previous one", exc)
                if on_skip is not None:
                    on_skip(checkpoint, str(exc))
                continue
            return state, meta, checkpoint
        return None

    # -- pruning -----------------------------------------------------------------------------
    def prune(self, generation: int) -> None:
        """Keep the newest ``keep`` verified checkpoints; drop temporaries of this and older generations.

        Only a checkpoint older than all of the newest ``keep`` verified ones is removed, good or
        not: an empty, corrupt or unreadable directory never counts, so it cannot push a good one
        out, and one newer than that is left (it may be a read error that passes). Symbolic links
        are never followed or removed. Verification is cached (``verify``): a checkpoint written
        by this process is never re-read, one written by another is hashed once per process, and
        none while the owner is in a hurry (``in_a_hurry``): one not verified yet is then passed
        over, neither counted nor removed.

        Only the current generation's rank 0 calls this, after its own commit, so no
        temporary of a generation <= ours can still be in flight (older writers are fenced).
        A failure here is logged, never raised: the commit it follows has succeeded.
        """
        try:
            kept = 0
            for checkpoint in self.committed():
                if kept >= self.keep:
                    _remove(checkpoint.path)
                    continue
                try:
                    self._verify(checkpoint, self.in_a_hurry)
                except CorruptCheckpointError as exc:
                    self._warn_once(f"not counting it towards --keep-checkpoints: {exc}")
                    continue
                except VerificationDeferred as exc:
                    log.info("in a hurry, neither counted nor removed: %s", exc)
                    continue
                kept += 1
            for path in self.root.iterdir():
                match = TEMPORARY_NAME.match(path.name)
                if match and int(match.group(1)) <= generation:
                    _remove(path)
        except OSError as exc:
            log.warning("pruning %s failed: %s", self.root, exc)
        for path in [p for p in self._verdicts if not os.path.lexists(p)]:
            del self._verdicts[path]
