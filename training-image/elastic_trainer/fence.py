"""Generations: fencing checkpoint commits by rendezvous round.

Every time a worker group forms (a rendezvous round completes and the workers start), its
rank 0 claims the next generation number by creating ``generations/gen-<n>.json`` with
O_CREAT | O_EXCL, which is atomic on a local disk and on NFSv3+ (EFS, Filestore, Azure Files
NFS). A group formed later therefore always holds a larger number than every older group.

Why: with heartbeat settings that are too aggressive, one job was seen to split into two
world-size-1 groups that both wrote the same checkpoint (DESIGN.md, "Too aggressive is worse
than slow"). A writer checks the fence before each commit and stops if a newer generation
exists, and checkpoint names carry the generation, so even a commit that races the check
cannot replace or outrank a newer group's checkpoint.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

_NAME = re.compile(r"^gen-(\d{6,})\.json$")


class StaleGenerationError(RuntimeError):
    """A newer worker group exists: this group must not commit."""


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Generations:
    def __init__(self, root: Path) -> None:
        self.dir = Path(root) / "generations"

    def latest(self) -> int:
        if not self.dir.is_dir():
            return 0
        numbers = [int(m.group(1)) for p in self.dir.iterdir() if (m := _NAME.match(p.name))]
        return max(numbers, default=0)

    def claim(self, info: dict) -> int:
        self.dir.mkdir(parents=True, exist_ok=True)
        while True:
            number = self.latest() + 1
            path = self.dir / f"gen-{number:06d}.json"
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                continue  # another group claimed it first: take the next one
            with os.fdopen(fd, "w") as handle:
                json.dump({"generation": number, **info}, handle)
                handle.flush()
                os.fsync(handle.fileno())
            fsync_dir(self.dir)
            return number

    def check(self, generation: int) -> None:
        newest = self.latest()
        if newest > generation:
            raise StaleGenerationError(
                f"generation {generation} is fenced: generation {newest} formed since; not committing"
            )
