"""Unpacking a download's tar stream as hostile input: `cp` writes only regular files and folders, each
strictly inside the name it asked for, and writes them itself.

What arrives is whatever the reader pod sends, and whoever controls that pod (its image, or anyone who
reached it) controls the stream. tarfile's ``filter="data"`` (PEP 706) is not enough on its own: it
accepts links inside the destination, and its realpath-based checks were bypassed by a chain of links
past PATH_MAX (CVE-2025-4517, python/cpython#135034; fixed in 3.11.13, 3.12.11, 3.13.4 and later). So
tarfile here only parses headers, and this module decides and writes:

- every member is a regular file or a folder (no symbolic or hard link, device, FIFO, sparse or
  contiguous file), named in normal form (no absolute name, ``..``, ``.``, empty part, backslash, NUL,
  part over NAME_MAX, name over MAX_NAME), at the download's name or under it, sent once (a second
  member of the same name would overwrite the first or swap a folder for a file), after its folder;
- each is created below a folder this run made, level by level from a descriptor of the staging folder
  with ``O_NOFOLLOW`` and ``O_DIRECTORY`` (a link that appears there is refused, not followed), files with
  ``O_CREAT | O_EXCL`` (never an existing name, case-folding file systems included), as the user's own
  files: no setuid/setgid/sticky bits, no group or other write;
- members, payload bytes and the raw bytes between two members (tarfile reads a pax header whole into
  memory) are bounded, each with an error naming the bound.

The caller unpacks into a fresh staging folder and renames the result into place only when the whole
stream was accepted, so a refusal leaves nothing (store_access.download).
"""

from __future__ import annotations

import contextlib
import io
import os
import tarfile
from dataclasses import dataclass

NAME_MAX = 255  # bytes in one path component: Linux, macOS (APFS) and Windows (NTFS, in UTF-16 units)
MAX_NAME = 1024  # bytes in a whole member name: far below PATH_MAX (4096 on Linux), above store_script's names
MAX_MEMBERS = 1_000_000  # a checkpoint is tens of files; a TensorBoard folder thousands
HEADER_BYTES = 64 << 10  # raw bytes allowed between one member's data and the next member (its headers)
BLOCK = tarfile.BLOCKSIZE
CHUNK = 1 << 20
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_KINDS = {tarfile.SYMTYPE: "a symbolic link", tarfile.LNKTYPE: "a hard link", tarfile.CHRTYPE: "a character device",
          tarfile.BLKTYPE: "a block device", tarfile.FIFOTYPE: "a FIFO"}


class Refused(Exception):
    """A member (or the stream) that is not unpacked; ``member`` is its name as sent, or None."""

    def __init__(self, member: str | None, why: str) -> None:
        super().__init__(why)
        self.member, self.why = member, why


@dataclass(frozen=True)
class Limits:
    max_members: int = MAX_MEMBERS
    max_bytes: int = 1 << 40  # the payload: store_access.download sets it from the size and free space

    @classmethod
    def for_download(cls, reported_bytes: int, free_bytes: int) -> Limits:
        """The size the reader reported plus room for files a running job writes meanwhile (10 % and 64 MiB),
        never more than the free space."""
        return cls(max_bytes=min(reported_bytes + reported_bytes // 10 + (64 << 20), free_bytes))


class Bounded(io.RawIOBase):
    """The raw stream, refusing to read past what the members so far justify: each member's data plus
    HEADER_BYTES for the next header, plus one read-ahead buffer."""

    def __init__(self, raw: io.RawIOBase, buffer: int = CHUNK) -> None:
        self.raw, self.buffer, self.count = raw, buffer, 0
        self.allowed = buffer + HEADER_BYTES

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        count = self.raw.readinto(buffer)
        self.count += count
        if self.count > self.allowed:
            raise Refused(None, f"more than {HEADER_BYTES} bytes of tar headers before the next member "
                                f"(the stream had sent {self.count} bytes)")
        return count

    def expect(self, data_bytes: int) -> None:
        """A member's header arrived: allow its data (padded) and the next member's headers."""
        self.allowed = self.count + data_bytes + 2 * BLOCK + HEADER_BYTES + self.buffer


def check_name(name: str, root: str) -> list[str]:
    """``name``'s parts if it is a normal relative name at ``root`` or under it; else Refused."""
    if "\0" in name:
        raise Refused(name, "its name holds a NUL byte")
    if "\\" in name:
        raise Refused(name, "its name holds a backslash (a folder separator on Windows)")
    if name.startswith("/"):
        raise Refused(name, "an absolute name")
    parts = name.split("/")
    if ".." in parts:
        raise Refused(name, "its name has a `..` part")
    if "" in parts or "." in parts:
        raise Refused(name, "its name is not in normal form (an empty or `.` part)")
    if any(len(p.encode(errors="surrogateescape")) > NAME_MAX for p in parts):
        raise Refused(name, f"a part of its name is longer than {NAME_MAX} bytes")
    if len(name.encode(errors="surrogateescape")) > MAX_NAME:
        raise Refused(name, f"its name is longer than {MAX_NAME} bytes")
    if parts[0] != root:
        raise Refused(name, f"not under {root}, the name asked for")
    return parts


def kind(member: tarfile.TarInfo) -> str:
    """"dir" or "file"; Refused for every other kind of member."""
    if member.type == tarfile.DIRTYPE:
        return "dir"
    if member.type in (tarfile.REGTYPE, tarfile.AREGTYPE):
        return "file"
    if member.type in _KINDS:
        return f"{_KINDS[member.type]} (to {member.linkname!r})" if member.issym() or member.islnk() else \
            _KINDS[member.type]
    return f"not a regular file or folder (tar type {member.type!r})"


def _mkdir(name: str, dir_fd: int, member: str) -> None:
    try:
        os.mkdir(name, 0o755, dir_fd=dir_fd)
    except FileExistsError:
        raise Refused(member, "its name exists already (sent twice under another spelling?)") from None


def _open_dir(name: str, dir_fd: int, member: str) -> int:
    try:
        return os.open(name, os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC, dir_fd=dir_fd)
    except OSError as error:  # ELOOP: a link; ENOTDIR: not a folder
        raise Refused(member, f"a folder on its path is a link or not a folder ({error.strerror}); "
                              "links are never followed") from None


def _write_file(name: str, dir_fd: int, member: tarfile.TarInfo, data) -> None:
    mode = 0o755 if member.mode & 0o100 else 0o644
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC, mode, dir_fd=dir_fd)
    except FileExistsError:
        raise Refused(member.name, "its name exists already (sent twice under another spelling?)") from None
    with os.fdopen(fd, "wb") as out:
        left = member.size
        while left > 0:
            chunk = data.read(min(CHUNK, left))
            if not chunk:
                raise tarfile.ReadError("unexpected end of data")
            out.write(chunk)
            left -= len(chunk)
        with contextlib.suppress(OverflowError, OSError, ValueError):  # a nonsense time is not worth a refusal
            os.utime(out.fileno(), (member.mtime, member.mtime))


def unpack(tar: tarfile.TarFile, bounded: Bounded, staging: str, root: str, limits: Limits) -> tuple[int, int]:
    """Every member of ``tar`` (opened in stream mode on ``bounded``) into ``staging``; (members, bytes).
    Raises Refused at the first member that is not accepted, having written nothing for it."""
    seen: dict[str, bool] = {}  # name -> is a folder
    members = total = 0
    root_fd = os.open(staging, os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC)
    try:
        for member in tar:
            members += 1
            if members > limits.max_members:
                raise Refused(member.name, f"the stream has more than {limits.max_members} members")
            parts = check_name(member.name, root)
            what = kind(member)
            if what not in ("dir", "file"):
                raise Refused(member.name, what)
            if member.name in seen:
                raise Refused(member.name, "sent twice: a second member would replace the first")
            folder = "/".join(parts[:-1])
            if folder and not seen.get(folder):
                raise Refused(member.name, f"its folder {folder} was not sent before it")
            size = member.size if what == "file" else 0
            if total + size > limits.max_bytes:
                raise Refused(member.name, f"the files sent add up to more than {limits.max_bytes} bytes")
            bounded.expect(size)
            parent = root_fd
            try:
                for part in parts[:-1]:
                    opened = _open_dir(part, parent, member.name)
                    if parent != root_fd:
                        os.close(parent)
                    parent = opened
                if what == "dir":
                    _mkdir(parts[-1], parent, member.name)
                else:
                    _write_file(parts[-1], parent, member, tar.extractfile(member))
            finally:
                if parent != root_fd:
                    os.close(parent)
            seen[member.name] = what == "dir"
            total += size
    finally:
        os.close(root_fd)
    return members, total
