"""``--workdir DIR``: the user's code packed into one deterministic tarball, before anything is sent.

What goes in is what git would commit: inside a git work tree, ``git ls-files --cached --others
--exclude-standard`` (tracked files, and untracked ones that no ``.gitignore``, ``.git/info/exclude`` or
the user's global excludes file leaves out). Outside a work tree the same command runs against a
throwaway empty repository with DIR as its work tree, so DIR's own ``.gitignore`` files and the global
excludes still decide, by git's rules and no copy of them. Without a git binary the command refuses
(packing everything could ship a dataset or a secret that a ``.gitignore`` would have kept out).

Torchfleet's own output is left out too, ignored or not (issue 32: a researcher's first --workdir . shipped
the local runs' checkpoints): ``torchfleet-runs/`` folders (``run --local``'s default) and YAML files a
dry run printed (their manifests carry ``app.kubernetes.io/managed-by: torchfleet``). A note says what
was left out, and another what was packed: files, size, the biggest.

The tarball is the same bytes for the same files on any run: entries sorted, owner root, a fixed
mtime, modes reduced to 0644/0755, a gzip header without name or time. Its sha256 names the folder it
is unpacked into (workdir.py), so the same code is the same folder. A symlink is kept, relative, only
when it resolves inside DIR: one pointing outside would ship nothing the pod has (or, unpacked, reach
outside the job's folder), and the unpack step refuses such links too (tarfile's ``data`` filter).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import re
import shutil
import stat
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from torchfleet.jobs.errors import UsageError

FLAG = "--workdir"
# The archive travels through the API server and lives in etcd for the job's life (workdir.py): code,
# not data. 16 MiB is a large code base (torchtitan's whole repository is under 5 MiB); datasets and
# weights belong on the shared store or in a bucket.
MAX_BYTES = 16 * 1024 * 1024
MTIME = 315532800  # 1980-01-01 UTC, as reproducible wheels and zips use: a fixed time, not the epoch's 0
BIGGEST_SHOWN = 5
GIT_TIMEOUT_S = 60
# Variables that would point git at another repository than DIR's.
_GIT_ENV = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_COMMON_DIR",
    "GIT_CEILING_DIRECTORIES",
)


# run --local's default folder (torchfleet/run_local.py): logs and checkpoints, never code
RUNS_FOLDER = "torchfleet-runs"
# A manifest `submit --dry-run` printed (pod_template.MANAGED_BY's label); read from YAML files this small only
_DRY_RUN_MARK = re.compile(rb"^\s*app\.kubernetes\.io/managed-by:\s*[\"']?torchfleet[\"']?\s*$", re.MULTILINE)
_DRY_RUN_READ_MAX = 4 * 1024 * 1024


@dataclass(frozen=True)
class Packed:
    data: bytes  # the gzip'd tar
    sha256: str
    files: int
    size: int  # the files' bytes, uncompressed
    how: str  # which rules chose the files
    notes: tuple[str, ...] = ()
    biggest: tuple[tuple[str, int], ...] = ()  # (path, bytes), largest first

    def summary(self) -> str:
        """What was packed: files, size, the biggest (issue 32: a submit said none of it)."""
        shown = ", ".join(f"{path} ({_mib(size)})" for path, size in self.biggest)
        return f"{self.files} files, {_mib(self.size)}" + (f"; the biggest: {shown}" if shown else "")


def own_output(directory: Path, rel: str) -> str | None:
    """Why REL is Torchfleet's own output and not code (see the module docstring), or None."""
    if RUNS_FOLDER in Path(rel).parts[:-1]:
        return f"{RUNS_FOLDER}/"
    if rel.endswith((".yaml", ".yml")):
        path = directory / rel
        try:
            if path.is_symlink() or path.stat().st_size > _DRY_RUN_READ_MAX:
                return None
            if _DRY_RUN_MARK.search(path.read_bytes()):
                return "dry-run manifests"
        except OSError:
            return None
    return None


def _mib(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    return f"{n / (1024 * 1024):.1f} MiB" if n >= 1024 * 1024 else f"{n / 1024:.1f} KiB"


def _git(args: list[str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    git = shutil.which("git")
    if git is None:
        raise UsageError(
            f"{FLAG}: needs git to decide which files to pack (by the folder's .gitignore rules); install git"
        )
    env = {k: v for k, v in os.environ.items() if k not in _GIT_ENV}
    try:
        return subprocess.run([git, *args], cwd=cwd, env=env, capture_output=True, timeout=GIT_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise UsageError(f"{FLAG}: git ls-files took more than {GIT_TIMEOUT_S} s in {cwd}") from None


def list_files(directory: Path) -> tuple[list[str], str]:
    """DIR's files by git's rules, relative to DIR (see the module docstring), and which rules applied."""
    inside = _git(["rev-parse", "--is-inside-work-tree"], directory)
    listing = ["ls-files", "-z", "--cached", "--others", "--exclude-standard", "--deduplicate"]
    if inside.returncode == 0 and inside.stdout.strip() == b"true":
        done = _git(listing, directory)
        how = "git ls-files in its work tree"
    else:
        with tempfile.TemporaryDirectory(prefix="torchfleet-workdir-") as empty:
            made = _git(["init", "--quiet", "--bare", empty], directory)
            if made.returncode != 0:
                raise UsageError(f"{FLAG}: git init failed: {made.stderr.decode(errors='replace').strip()}")
            done = _git([f"--git-dir={empty}", f"--work-tree={directory}", *listing], directory)
        how = "not a git work tree: its .gitignore files, by git's rules"
    if done.returncode != 0:
        raise UsageError(f"{FLAG}: git ls-files failed in {directory}: {done.stderr.decode(errors='replace').strip()}")
    return sorted({p for p in done.stdout.decode("utf-8", "surrogateescape").split("\0") if p}), how


def _link_target(path: Path, root: Path) -> str | None:
    """The link's target made relative, or None if it resolves outside ROOT."""
    resolved = path.resolve()  # every link in the chain followed
    if resolved != root and root not in resolved.parents:
        return None
    return os.path.relpath(resolved, path.parent.resolve())


def _entries(directory: Path, paths: list[str]) -> tuple[list[tuple[str, os.stat_result, str | None]], list[str]]:
    """(path, lstat, link target) for what gets packed, and notes on what does not."""
    root = directory.resolve()
    entries, notes, outside = [], [], []
    for rel in paths:
        path = directory / rel
        try:
            info = path.lstat()
        except FileNotFoundError:
            continue  # tracked but deleted in the work tree: git would not commit it either
        if stat.S_ISLNK(info.st_mode):
            target = _link_target(path, root)
            if target is None:
                outside.append(f"{rel} -> {os.readlink(path)}")
                continue
            entries.append((rel, info, target))
        elif stat.S_ISREG(info.st_mode):
            entries.append((rel, info, None))
        elif stat.S_ISDIR(info.st_mode):
            notes.append(f"{FLAG}: {rel} is a git submodule or a nested repository: not packed")
        else:
            notes.append(f"{FLAG}: {rel} is not a file (a socket, pipe or device): not packed")
    if outside:
        shown = "; ".join(outside[:BIGGEST_SHOWN]) + (
            f"; and {len(outside) - BIGGEST_SHOWN} more" if len(outside) > BIGGEST_SHOWN else ""
        )
        raise UsageError(
            f"{FLAG}: {directory} has symlinks pointing outside it, which the pods would not have: "
            f"{shown}; copy what they point to into the folder, or add them to .gitignore"
        )
    return entries, notes


def _too_big(directory: Path, what: str, entries: list[tuple[str, os.stat_result, str | None]], limit: int) -> str:
    biggest = sorted((e for e in entries if e[2] is None), key=lambda e: (-e[1].st_size, e[0]))[:BIGGEST_SHOWN]
    shown = ", ".join(f"{rel} ({_mib(info.st_size)})" for rel, info, _ in biggest)
    return (
        f"{FLAG}: {directory} {what}, more than the {_mib(limit)} a workdir may hold (it travels through the "
        f"API server); the biggest files: {shown}. Add what the job does not need to .gitignore, and put data "
        "on the shared store or in a bucket"
    )


def _tar(directory: Path, entries: list[tuple[str, os.stat_result, str | None]]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for rel, info, target in entries:
            member = tarfile.TarInfo(rel)
            member.mtime, member.uid, member.gid, member.uname, member.gname = MTIME, 0, 0, "", ""
            if target is not None:
                member.type, member.linkname, member.mode = tarfile.SYMTYPE, target, 0o777
                tar.addfile(member)
                continue
            member.mode = 0o755 if info.st_mode & 0o111 else 0o644
            with (directory / rel).open("rb") as f:
                content = f.read()
            member.size = len(content)  # what was read, should the file have changed since lstat
            tar.addfile(member, io.BytesIO(content))
    packed = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=packed, mtime=0, compresslevel=9) as gz:
        gz.write(raw.getvalue())
    return packed.getvalue()


def pack(directory: Path, limit: int | None = None) -> Packed:
    """DIR packed; a UsageError naming --workdir for a missing folder, links outside it, or more than LIMIT
    bytes (MAX_BYTES by default)."""
    limit = MAX_BYTES if limit is None else limit
    directory = Path(directory).expanduser()
    if not directory.is_dir():
        what = "does not exist" if not directory.exists() else "is not a folder"
        raise UsageError(f"{FLAG}: {directory} {what}; give the folder with your training code, e.g. --workdir .")
    paths, how = list_files(directory)
    left_out: dict[str, list[str]] = {}
    for rel in paths:
        why = own_output(directory, rel)
        if why:
            left_out.setdefault(why, []).append(rel)
    paths = [rel for rel in paths if not any(rel in group for group in left_out.values())]
    entries, notes = _entries(directory, paths)
    for why, group in left_out.items():
        shown = f"{len(group)} file{'s' * (len(group) != 1)}" if why.endswith("/") else ", ".join(group[:BIGGEST_SHOWN])
        notes.append(f"{FLAG}: left out Torchfleet's own output, {why} ({shown})")
    if not entries:
        raise UsageError(
            f"{FLAG}: {directory} has no files to pack ({how}: everything is ignored or the folder is empty)"
        )
    size = sum(info.st_size for _, info, target in entries if target is None)
    if size > limit:
        raise UsageError(_too_big(directory, f"holds {_mib(size)} in {len(entries)} files", entries, limit))
    data = _tar(directory, entries)
    if len(data) > limit:  # many small files: each costs a 512-byte header or more
        raise UsageError(_too_big(directory, f"packs to {_mib(len(data))} ({len(entries)} files)", entries, limit))
    files = sorted(((rel, info.st_size) for rel, info, target in entries if target is None),
                   key=lambda f: (-f[1], f[0]))
    return Packed(
        data=data, sha256=hashlib.sha256(data).hexdigest(), files=len(entries), size=size, how=how, notes=tuple(notes),
        biggest=tuple(files[:3]),
    )
