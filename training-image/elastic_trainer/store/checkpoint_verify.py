"""Whether a committed checkpoint is intact: its ``meta.json``, each file read back and hashed, verdicts cached.

What counts as a checkpoint (issue 11: names alone let an empty, corrupt or linked directory
push every good checkpoint out of ``keep``): only a real directory (never a symbolic link,
which is refused, never followed) whose files match its ``meta.json``: regular files of the
size and sha256 that were written (checkpoint_write.py).

Hashing a checkpoint back is the expensive part (seconds for a multi-GB state), so a process
does it once per checkpoint: ``Verdicts`` remembers what it verified or wrote itself, keyed by
the files' identity (inode, size, mtime, ctime), and forgets a verdict once they change. A read
error that may pass (EIO, ESTALE) is never remembered. A caller in a hurry (a stop is under
way) can make a hash give up (``VerificationDeferred``): its verdict then stays unknown.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable
from pathlib import Path

from elastic_trainer.store.checkpoint_meta import (  # CorruptCheckpointError: imported from here by the rest
    META_MAX_BYTES,
    CorruptCheckpointError,
    listed_files,
    open_regular,
    parse,
    read_bounded,
)
from elastic_trainer.store.checkpoint_write import META_FILE, FileDigest


class VerificationDeferred(Exception):
    """A prune gave up hashing a checkpoint: the owner is in a hurry. Its verdict stays unknown."""


def _hash_file(path: Path, size: int, hurry: Callable[[], bool] | None = None) -> FileDigest:
    """Read a file back and hash it: verification only, never part of a save.

    Reads at most ``size`` + 1 bytes (the size it must have, and one more to see that it grew), from
    a regular file only (check_files looked, but the entry may have been replaced since).
    ``hurry`` is asked before every MiB: once it says yes, VerificationDeferred is raised.
    """
    digest = hashlib.sha256()
    read = 0
    fd, _ = open_regular(path, path.name, path.parent.name)
    with os.fdopen(fd, "rb") as handle:
        while read <= size and (chunk := handle.read(min(1 << 20, size + 1 - read))):
            if hurry is not None and hurry():
                raise VerificationDeferred(f"{path.parent.name}: hashing {path.name} given up after {read} bytes")
            digest.update(chunk)
            read += len(chunk)
    return FileDigest(read, digest.hexdigest())


def _fingerprint(directory: Path) -> tuple:
    """What changes when a checkpoint's files are replaced, rewritten or removed: the verdict cache's key."""
    own = os.lstat(directory)
    entries = []
    with os.scandir(directory) as scan:
        for entry in scan:
            info = entry.stat(follow_symlinks=False)
            # st_ctime_ns: no one can set it, so a byte written in place with the mtime put back
            # still changes the key (issue 23); it also changes on chmod, which costs one more hash
            entries.append((entry.name, info.st_mode, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns))
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
        try:
            target = os.readlink(path)
        except OSError as exc:  # replaced meanwhile
            target = f"? ({exc.strerror})"
        return f"a symbolic link (to {target!r:.200}): checkpoints outside the store are refused"
    if not stat.S_ISDIR(mode):
        return "not a directory"
    return None


def read_meta(path: Path) -> dict:
    """The checkpoint directory's ``meta.json``, type-checked but unverified (checkpoint_meta.py);
    CorruptCheckpointError if it has none usable."""
    reason = refused(path)
    if reason is not None:
        raise CorruptCheckpointError(f"{path.name}: {reason}")
    return parse(read_bounded(path / META_FILE, META_MAX_BYTES, META_FILE, path.name), path.name)


def check_files(path: Path, meta: dict) -> dict[str, FileDigest]:
    """Every file ``meta`` lists is in ``path``, a regular file of its size (stat only, no reading)."""
    name = path.name
    files = listed_files(meta, name)
    for file_name, expected in files.items():
        try:
            info = os.lstat(path / file_name)
        except OSError as exc:
            raise CorruptCheckpointError(f"{name}: missing {file_name}") from exc
        if not stat.S_ISREG(info.st_mode):
            raise CorruptCheckpointError(
                f"{name}: {file_name} is not a regular file (links, FIFOs and devices are refused)"
            )
        if info.st_size != expected.size:
            raise CorruptCheckpointError(
                f"{name}: {file_name} is {info.st_size} bytes, {expected.size} were written (truncated)"
            )
    return files


def check(path: Path, hurry: Callable[[], bool] | None = None) -> dict:
    """Read every file of the checkpoint in ``path`` back: its meta if all match, else CorruptCheckpointError."""
    meta = read_meta(path)
    name = path.name
    for file_name, expected in check_files(path, meta).items():
        try:
            digest = _hash_file(path / file_name, expected.size, hurry)
        except OSError as exc:
            raise CorruptCheckpointError(f"{name}: cannot read {file_name} ({exc})") from exc
        if digest != expected:
            raise CorruptCheckpointError(f"{name}: {file_name} does not match its sha256")
    return meta


class Verdicts:
    """This process's verdicts on checkpoint directories: path -> (fingerprint, meta or why not)."""

    def __init__(self) -> None:
        self._by_path: dict[Path, tuple[tuple, dict | CorruptCheckpointError]] = {}

    def remember(self, path: Path, verdict: dict | CorruptCheckpointError, fingerprint: tuple | None = None) -> None:
        """Keep ``verdict`` while the files are as ``fingerprint`` (taken before the verdict was reached) says."""
        try:
            self._by_path[path] = (fingerprint or _fingerprint(path), verdict)
        except OSError:
            self._by_path.pop(path, None)

    @staticmethod
    def fingerprint(path: Path) -> tuple:
        return _fingerprint(path)

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
            # taken before the files are read: a change while they are hashed must void the verdict
            before = _fingerprint(path)
        except OSError:
            before = None
        try:
            meta = check(path, hurry)
        except CorruptCheckpointError as exc:
            if not transient(exc) and refused(path) is None:
                self.remember(path, exc)  # a read error may pass: try it again next time
            raise
        if before is not None:
            self.remember(path, meta, before)
        return meta

    def forget_missing(self) -> None:
        """Drop the verdicts on directories that are gone (pruned, or removed by someone else)."""
        for path in [p for p in self._by_path if not os.path.lexists(p)]:
            del self._by_path[path]
