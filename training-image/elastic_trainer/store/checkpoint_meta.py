"""What a checkpoint's ``meta.json`` may be: read bounded and without blocking, then type-checked (issue 23).

Every byte on a shared store can be wrong, so nothing in ``meta.json`` is trusted before it is
checked here: before, valid JSON of the wrong shape (``{"files": {"state.pt": 5}}``, ``null``
entries, a NUL in a name, deep nesting) raised AttributeError, ValueError or RecursionError out
of ``load_latest()`` and crash-looped the worker, a FIFO named ``meta.json`` blocked the reader
forever and a link to ``/dev/zero`` read until memory ran out. Anything wrong here is a
CorruptCheckpointError: the checkpoint is skipped and the one before it tried.

Opening a store file: never through a symbolic link (O_NOFOLLOW), never waiting for a writer
(O_NONBLOCK: a FIFO opens at once, and is then refused because it is no regular file), and
never reading more than the size the file must have.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

from elastic_trainer.store.checkpoint_write import META_FILE, STATE_FILE, FileDigest
from elastic_trainer.store.fence import COMMITTED_NAME

# The largest meta.json read: about 120 bytes per listed file, so room for tens of thousands of
# ranks' shards of a sharded checkpoint, and still nothing to fear in memory.
META_MAX_BYTES = 4 << 20
# meta.json written by this store nests 2 levels deep; what the trainer adds (``info``) is flat
MAX_DEPTH = 8
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_NAME_MAX = 255  # bytes in one file name (NAME_MAX on Linux)
# what each layout's reader opens: it must be listed, hence verified (sharded.py's names)
_LAYOUTS = {None: (STATE_FILE,), "single": (STATE_FILE,), "sharded": ("extra.pt", ".metadata")}


class CorruptCheckpointError(RuntimeError):
    """The checkpoint is not intact or cannot be used: skip it and use the previous one."""


def open_regular(path: Path, what: str, checkpoint: str) -> tuple[int, os.stat_result]:
    """An fd of ``path`` if it is a regular file (never a link, FIFO or device); CorruptCheckpointError if not.

    OSError (ENOENT, EIO...) passes through: the caller says what it means.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise CorruptCheckpointError(
            f"{checkpoint}: {what} is not a regular file (links, FIFOs and devices are refused)"
        )
    return fd, info


def read_bounded(path: Path, limit: int, what: str, checkpoint: str) -> bytes:
    """The whole of a small regular file, refused unread if it is larger than ``limit`` bytes."""
    try:
        mode = os.lstat(path).st_mode
    except OSError as exc:
        raise CorruptCheckpointError(f"{checkpoint}: unreadable {what} ({exc.strerror or exc})") from exc
    if not stat.S_ISREG(mode):  # checked before opening: opening a device can have effects of its own
        raise CorruptCheckpointError(
            f"{checkpoint}: {what} is not a regular file (links, FIFOs and devices are refused)"
        )
    try:
        fd, info = open_regular(path, what, checkpoint)
    except OSError as exc:
        raise CorruptCheckpointError(f"{checkpoint}: unreadable {what} ({exc.strerror or exc})") from exc
    try:
        if info.st_size > limit:
            raise CorruptCheckpointError(f"{checkpoint}: {what} is larger than {limit} bytes ({info.st_size})")
        chunks, size = [], 0
        while size <= limit and (chunk := os.read(fd, limit + 1 - size)):  # + 1: one that grew is seen
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise CorruptCheckpointError(f"{checkpoint}: unreadable {what} ({exc.strerror or exc})") from exc
    finally:
        os.close(fd)
    if size > limit:
        raise CorruptCheckpointError(f"{checkpoint}: {what} is larger than {limit} bytes (it grew while read)")
    return b"".join(chunks)


def parse(data: bytes, directory: str) -> dict:
    """``meta.json``'s bytes as a checked meta of the checkpoint named ``directory``."""
    try:
        meta = json.loads(data)
    except (ValueError, RecursionError) as exc:  # RecursionError: nesting deeper than the interpreter's stack
        raise CorruptCheckpointError(f"{directory}: unreadable {META_FILE} ({str(exc)[:200]})") from exc
    if not isinstance(meta, dict):
        raise CorruptCheckpointError(f"{directory}: {META_FILE} is not an object")
    if _depth(meta) > MAX_DEPTH:
        raise CorruptCheckpointError(f"{directory}: {META_FILE} nests deeper than {MAX_DEPTH} levels")
    named = COMMITTED_NAME.match(directory)
    for key, group in (("generation", 1), ("step", 2)):
        value = meta.get(key)
        if not _count(value):
            raise CorruptCheckpointError(f"{directory}: {META_FILE} has no whole number {key!r} ({value!r:.40})")
        if named and value != int(named.group(group)):
            raise CorruptCheckpointError(f"{directory}: {META_FILE} says {key} {value}, its name another")
    layout = meta.get("checkpoint_format")
    if layout not in _LAYOUTS:
        raise CorruptCheckpointError(f"{directory}: unknown checkpoint_format {layout!r:.40} in {META_FILE}")
    files = listed_files(meta, directory)
    missing = [name for name in _LAYOUTS[layout] if name not in files]
    if missing:
        raise CorruptCheckpointError(
            f"{directory}: {META_FILE} does not list {', '.join(missing)}: it would be loaded unverified"
        )
    return meta


def listed_files(meta: dict, directory: str) -> dict[str, FileDigest]:
    """The files ``meta`` lists, each name a plain file name in the directory and each digest well-formed."""
    if "files" not in meta:  # format 1: state.pt's size and sha256 at the top level
        raw = {STATE_FILE: {"size": meta.get("size"), "sha256": meta.get("sha256")}}
    else:
        raw = meta["files"]
        if not isinstance(raw, dict) or not raw:
            raise CorruptCheckpointError(f"{directory}: {META_FILE}'s files is not an object listing files")
    files = {}
    for name, digest in raw.items():
        if not _plain_name(name):
            raise CorruptCheckpointError(
                f"{directory}: {META_FILE} lists {name!r:.80}, not a file name of the checkpoint's own"
            )
        if (
            not isinstance(digest, dict)
            or not _count(digest.get("size"))
            or not isinstance(digest.get("sha256"), str)
            or not _SHA256.match(digest["sha256"])
        ):
            raise CorruptCheckpointError(
                f'{directory}: {META_FILE}\'s entry for {name!r} is not {{"size": <bytes>, "sha256": <64 hex digits>}}'
            )
        files[name] = FileDigest(digest["size"], digest["sha256"])
    return files


def _plain_name(name: object) -> bool:
    if not isinstance(name, str) or name in ("", ".", "..", META_FILE) or "/" in name or "\0" in name:
        return False
    try:
        return len(os.fsencode(name)) <= _NAME_MAX
    except UnicodeEncodeError:  # a lone surrogate from a \ud800 escape: no file has that name
        return False


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _depth(value: object) -> int:
    """How deeply ``value`` nests; iterative, so no nesting can exhaust the stack here."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        item, level = todo.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            if level <= MAX_DEPTH:
                todo.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest
