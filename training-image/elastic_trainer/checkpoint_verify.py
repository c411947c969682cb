"""Whether a committed checkpoint is intact: its ``meta.json``, each file read back and hashed, verdicts cached.

What counts as a checkpoint (issue 11: names alone let an empty, corrupt or linked directory
push every good checkpoint out of ``keep``): only a real directory (never a symbolic link,
which is refused, never followed) whose files match its ``meta.json``: regular files of the
size and sha256 that were written (checkpoint_write.py).

Hashing a checkpoint back is the expensive part (seconds for a multi-GB state), so a process
does it once per checkpoint: ``Verdicts`` remembers what it verified or wrote itself, keyed by
the files' identity (inode, size, mtime), and forgets a verdict once they change. A read
error that may pass (EIO, ESTALE) is never remembered. A caller in a hurry (a stop is under
way) can make a hash give up (``VerificationDeferred``): its verdict then stays unknown.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Callable
from pathlib import Path

from elastic_trainer.checkpoint_write import META_FILE, STATE_FILE, FileDigest


class CorruptCheckpointError(RuntimeError):
    """The checkpoint is not intact or cannot be used: skip it and use the previous one."""


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


def transient(exc: CorruptCheckpointError) -> bool:
    """A read error (EIO, ESTALE...) may pass: such a verdict is not remembered."""
    return isinstance(exc.__cause__, OSError) and not isinstance(exc.__cause__, FileNotFoundError)


def refused(path: Path) -> str | None:
    """Why an entry can never be a checkpoint of this store (checked without reading it), or None."""
    try:
        mode = os.lstat(path).st_mode
    except OSError as exc:
        return f"cannot stat it ({exc})"
    if stat.S_ISLNK(mode):
        return f"a symbolic link (to {os.readlink(path)}): checkpoints outside the store are refused"
    if not stat.S_ISDIR(mode):
        return "not a directory"
    return None


def read_meta(path: Path) -> dict:
    """The checkpoint directory's ``meta.json``, unverified; CorruptCheckpointError if it has none usable."""
    reason = refused(path)
    if reason is not None:
        raise CorruptCheckpointError(f"{path.name}: {reason}")
    try:
        meta = json.loads((path / META_FILE).read_text())
    except (OSError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise CorruptCheckpointError(f"{path.name}: unreadable {META_FILE} ({why})") from exc
    if not isinstance(meta, dict):
        raise CorruptCheckpointError(f"{path.name}: {META_FILE} is not an object")
    return meta


def _listed_files(meta: dict) -> dict[str, dict]:
    files = meta.get("files")
    if isinstance(files, dict) and files:
        return files
    return {STATE_FILE: {"size": meta.get("size"), "sha256": meta.get("sha256")}}  # format 1


def check(path: Path, hurry: Callable[[], bool] | None = None) -> dict:
    """Read every file of the checkpoint in ``path`` back: its meta if all match, else CorruptCheckpointError."""
    meta = read_meta(path)
    name = path.name
    for file_name, expected in _listed_files(meta).items():
        file_path = path / file_name
        try:
            info = os.lstat(file_path)
        except OSError as exc:
            raise CorruptCheckpointError(f"{name}: missing {file_name}") from exc
        if not stat.S_ISREG(info.st_mode):
            raise CorruptCheckpointError(f"{name}: {file_name} is not a regular file (links are refused)")
        if info.st_size != expected.get("size"):
            raise CorruptCheckpointError(
                f"{name}: {file_name} is {info.st_size} bytes, {expected.get('size')} were written (truncated)")
        try:
            digest = _hash_file(file_path, hurry)
        except OSError as exc:
            raise CorruptCheckpointError(f"{name}: cannot read {file_name} ({exc})") from exc
        if digest.sha256 != expected.get("sha256"):
            raise CorruptCheckpointError(f"{name}: {file_name} does not match its sha256")
    return meta


class Verdicts:
    """This process's verdicts on checkpoint directories: path -> (fingerprint, meta or why not)."""

    def __init__(self) -> None:
        self._by_path: dict[Path, tuple[tuple, dict | CorruptCheckpointError]] = {}

    def remember(self, path: Path, verdict: dict | CorruptCheckpointError) -> None:
        try:
            self._by_path[path] = (_fingerprint(path), verdict)
        except OSError:
            self._by_path.pop(path, None)

    def known(self, path: Path) -> dict | CorruptCheckpointError | None:
        """The verdict on ``path`` if its files are unchanged since; else None."""
        cached = self._by_path.get(path)
        if cached is None:
            return None
        try:
            unchanged = _fingerprint(path) == cached[0]
        except OSError:
            unchanged = False
        if unchanged:
            return cached[1]
        self._by_path.pop(path, None)
        return None

    def verify(self, path: Path, hurry: Callable[[], bool] | None = None) -> dict:
        """The checkpoint's meta if intact, hashing it only if no verdict is known; with ``hurry``,
        hashing may end in VerificationDeferred (nothing remembered)."""
        known = self.known(path)
        if isinstance(known, CorruptCheckpointError):
            raise known
        if known is not None:
            return known
        if hurry is not None and hurry():  # not even its meta.json is read
            raise VerificationDeferred(f"{path.name}: not verified by this process yet")
        try:
            meta = check(path, hurry)
        except CorruptCheckpointError as exc:
            if not transient(exc) and refused(path) is None:
                self.remember(path, exc)  # a read error may pass: try it again next time
            raise
        self.remember(path, meta)
        return meta

    def forget_missing(self) -> None:
        """Drop the verdicts on directories that are gone (pruned, or removed by someone else)."""
        for path in [p for p in self._by_path if not os.path.lexists(p)]:
            del self._by_path[path]
