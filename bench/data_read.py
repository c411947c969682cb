"""What a data loader reads per second from a folder: the local disk, a tmpfs, or any mount (NFS, FUSE).

    python bench/data_read.py                                    # a temporary folder on the local disk and /dev/shm
    python bench/data_read.py --dir /mnt/shared/bench --dir /dev/shm --json
    python bench/data_read.py --existing /data/imagenet --limit 2000   # a read-only dataset mount, as it is

Point it at the mounts a job would read from, inside a pod on the cluster: the shared store
(`--mount`, NFS), a `--dataset` (Mountpoint for S3, Cloud Storage FUSE, blobfuse2) and the node's
disk or /dev/shm. Each run is a torch DataLoader whose workers open, read whole and close one file
per item, as an image-folder dataset does; a worker returns only the byte count, so what is timed
is the reading, not decoding or the transfer back to the main process.

Two shapes by default (`--profile`): `small`, many files of the size of an ImageNet JPEG (about
110 KiB), where opening and listing cost as much as the bytes; `shards`, a few large files such as
WebDataset tar shards, where throughput decides. For each, `cold` is the first read after the files'
pages were dropped from this machine's page cache (posix_fadvise DONTNEED on each file after
writing it: no root needed; a tmpfs has no backing store to drop to, so its cold read is a memory
read), `warm` a second epoch. With `--existing` the files are read as they are, first pass `cold`
(it may be warm if something read them recently), second `warm`.

Prints MiB/s and files/s per folder, shape and pass; `--json` prints one object.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Dataset

MIB = 1 << 20
# (files, KiB each): ~100-130 MiB per shape by default, so a run on a 2-core machine takes seconds.
PROFILES = {"small": (900, 112), "shards": (8, 16 * 1024)}
CHUNK = 4 * MIB
SHM = "/dev/shm"  # noqa: S108 (a tmpfs to compare with; the scratch folder under it is mkdtemp's own)


class FileBytes(Dataset):
    """One item per file: open, read it whole in chunks, close; the item is the byte count and when
    the read started and ended."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int) -> tuple[int, float, float]:
        # CLOCK_MONOTONIC is one clock for every process of the machine, so the workers' times compare.
        started = time.monotonic()
        total = 0
        with open(self.paths[i], "rb", buffering=0) as f:
            while chunk := f.read(CHUNK):
                total += len(chunk)
        return total, started, time.monotonic()


@dataclass
class Figure:
    where: str
    shape: str
    read: str  # cold | warm
    files: int
    mib: float
    seconds: float

    @property
    def mib_s(self) -> float:
        return self.mib / self.seconds

    @property
    def files_s(self) -> float:
        return self.files / self.seconds


def drop_cache(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def write_files(folder: Path, files: int, kib: int) -> list[str]:
    """Files of random bytes (incompressible), fsynced and dropped from the page cache."""
    folder.mkdir(parents=True, exist_ok=True)
    block = os.urandom(kib * 1024)
    paths = []
    for i in range(files):
        path = folder / f"{i:06d}.bin"
        with open(path, "wb") as f:
            f.write(block)
            f.flush()
            os.fsync(f.fileno())
        drop_cache(str(path))
        paths.append(str(path))
    return paths


def epoch(paths: list[str], workers: int) -> tuple[int, float]:
    """Bytes read and seconds for one pass: from the first read's start to the last read's end, so
    neither the workers' start nor the hand-over of the last item counts."""
    loader = DataLoader(FileBytes(paths), batch_size=None, shuffle=True, num_workers=workers,
                        prefetch_factor=4 if workers else None)
    items = list(loader)
    total = sum(int(n) for n, _, _ in items)
    return total, max(float(end) for _, _, end in items) - min(float(start) for _, start, _ in items)


def measure(where: str, shape: str, paths: list[str], workers: int) -> list[Figure]:
    out = []
    for read in ("cold", "warm"):
        total, seconds = epoch(paths, workers)
        out.append(Figure(where, shape, read, len(paths), total / MIB, seconds))
    return out


def existing_files(folder: Path, limit: int) -> list[str]:
    paths = []
    for root, _, names in os.walk(folder):
        for name in sorted(names):
            paths.append(os.path.join(root, name))
            if len(paths) >= limit:
                return paths
    return paths


def run(args: argparse.Namespace) -> list[Figure]:
    torch.set_num_threads(1)
    figures: list[Figure] = []
    for folder in args.existing:
        paths = existing_files(Path(folder), args.limit)
        if not paths:
            raise SystemExit(f"--existing {folder}: no files to read")
        figures += measure(folder, "existing", paths, args.workers)
    dirs = args.dir if args.dir or args.existing else [None, SHM]
    for base in dirs:
        scratch = Path(tempfile.mkdtemp(prefix="torchfleet-data-read-", dir=base))
        try:
            for shape in args.profile:
                files, kib = PROFILES[shape]
                paths = write_files(scratch / shape, files, kib)
                figures += measure(str(base or tempfile.gettempdir()), shape, paths, args.workers)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", action="append", default=[],
                        help="a folder to write test files under and read them back (repeatable; default: the "
                             "temporary folder's disk and /dev/shm)")
    parser.add_argument("--existing", action="append", default=[],
                        help="a folder whose files are read as they are, nothing written (a read-only dataset mount)")
    parser.add_argument("--limit", type=int, default=2000, help="with --existing: read at most this many files")
    parser.add_argument("--profile", action="append", choices=sorted(PROFILES), default=None,
                        help="small (900 x 112 KiB) and/or shards (8 x 16 MiB); default both")
    parser.add_argument("--workers", type=int, default=2, help="DataLoader workers (default 2)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    args.profile = args.profile or list(PROFILES)
    figures = run(args)
    if args.json:
        print(json.dumps([{**asdict(f), "mib_s": round(f.mib_s, 1), "files_s": round(f.files_s, 1)}
                          for f in figures], indent=2))
        return
    print(f"{'where':<28} {'shape':<9} {'read':<5} {'files':>6} {'MiB':>8} {'MiB/s':>9} {'files/s':>9}")
    for f in figures:
        print(f"{f.where:<28} {f.shape:<9} {f.read:<5} {f.files:>6} {f.mib:>8.1f} {f.mib_s:>9.1f} {f.files_s:>9.1f}")


if __name__ == "__main__":
    main()
