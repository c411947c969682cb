"""Where a command writes (`synth --out`, `check --policy-config-out`, `demo --workdir`): checked
before the work starts, so a folder that is a file or a path nobody can write is a clear exit 2
instead of a traceback after the work (issue 12).

A write that fails for a reason outside the path given (a full disk) is exit 1.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from torchfleet.jobs.errors import JobError, UsageError

# Failures of the machine, not of the path the user typed.
_NOT_THE_PATH = {errno.ENOSPC, errno.EDQUOT, errno.EIO}


class WriteFailed(JobError):
    """The path was fine, the write failed anyway (a full disk): exit 1."""

    exit_code = 1


def _nearest_existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path("/")


def check_folder(flag: str, path: Path) -> None:
    """``path`` is a folder we can write in, or one we can create."""
    path = Path(path).expanduser()
    if path.exists() and not path.is_dir():
        raise UsageError(f"{flag}: {path} is a file; give a folder (it is created if missing)")
    existing = _nearest_existing(path.absolute())
    if not existing.is_dir():
        raise UsageError(f"{flag}: {existing} is a file, so {path} cannot be a folder; give another folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"{flag}: cannot write in {existing} (permission denied); give a folder you can write to")


def make_folder(flag: str, path: Path) -> Path:
    """Create ``path`` (and its parents); the reason it cannot be, as the error a flag deserves."""
    path = Path(path).expanduser()
    check_folder(flag, path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise failed_write(flag, path, error) from None
    return path


def check_file(flag: str, path: Path) -> None:
    """``path`` can be written as a file: its folder exists and is writable, and it is not a folder."""
    path = Path(path).expanduser()
    if path.is_dir():
        raise UsageError(f"{flag}: {path} is a folder; give a file path in it, e.g. {path / 'policy-config.json'}")
    folder = path.absolute().parent
    if not folder.exists():
        raise UsageError(f"{flag}: the folder {folder} does not exist; create it first (mkdir -p {folder}) "
                         "or give a path in an existing folder")
    if not folder.is_dir():
        raise UsageError(f"{flag}: {folder} is a file, not a folder; give a path in an existing folder")
    writable = os.access(path, os.W_OK) if path.exists() else os.access(folder, os.W_OK | os.X_OK)
    if not writable:
        raise UsageError(f"{flag}: cannot write {path} (permission denied); give a path you can write to")


def failed_write(flag: str, path: Path, error: OSError) -> JobError:
    """An OSError from writing ``path``, as exit 2 (the path) or exit 1 (the machine)."""
    reason = error.strerror or str(error)
    if error.errno in _NOT_THE_PATH:
        return WriteFailed(f"{flag}: writing {path} failed ({reason})")
    return UsageError(f"{flag}: cannot write {path} ({reason}); give a path you can write to")
