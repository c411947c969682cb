"""Generations: fencing checkpoint commits by rendezvous round.

Every time a worker group forms (a rendezvous round completes and the workers start), its
rank 0 claims the next generation number by creating ``generations/gen-<n>.json`` with
O_CREAT | O_EXCL, which is atomic on a local disk and on NFSv3+ (EFS, Filestore, Azure Files
NFS). A group formed later therefore always holds a larger number than every older group.

Why: with heartbeat settings that are too aggressive, one job was seen to split into two
world-size-1 groups that both wrote the same checkpoint (docs/checkpoints.md, "Fenced by
generation"). A writer checks the fence before each commit and stops if a newer generation
exists, and checkpoint names carry the generation, so even a commit that races the check
cannot replace or outrank a newer group's checkpoint.

"The generations on disk" are the generation files *and* the generations in the store's
checkpoint and temporary names (``ckpt-g<n>-...``, ``.tmp-g<n>-...``, checkpoint.py): a store
whose ``generations/`` was lost, or whose checkpoints were copied in from another job, would
otherwise have a new group claim generation 1 and write checkpoints that every older-named
checkpoint outranks, so that each of its commits is pruned at once (issue 11).

A full store (ENOSPC) must not stop a group before it trains (issue 11), nor one that cannot be
written at all (read-only, another uid's, ``generations`` a file or a link loop: issue 23): if the
claim file cannot be created, the group trains under the number it would have claimed, *unclaimed*, and
claims exactly that number before its first commit (``check``). A commit therefore only ever
happens under a claimed generation: if another group claimed that number or a newer one in
the meantime, this group is fenced. If the file is created but its JSON cannot be written,
the (empty) file is the claim: the name alone fences, the content is for people.
"""

from __future__ import annotations

import errno
import json
import os
import re
from pathlib import Path

from elastic_trainer.events import log

_NAME = re.compile(r"^gen-(\d{6,})\.json$")
# The store's committed and temporary checkpoint names (checkpoint.py): they carry the generation
# that wrote them, group 1, and the step, group 2.
COMMITTED_NAME = re.compile(r"^ckpt-g(\d+)-s(\d+)$")
TEMPORARY_NAME = re.compile(r"^\.tmp-g(\d+)-s(\d+)-[0-9a-f]+$")


class StaleGenerationError(RuntimeError):
    """A newer worker group exists: this group must not commit."""


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _is_full(exc: OSError) -> bool:
    return exc.errno in (errno.ENOSPC, errno.EDQUOT)


class Generations:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.dir = self.root / "generations"
        self.unclaimed: int | None = None  # the number this group trains under until it can claim it
        self._info: dict = {}

    def latest(self) -> int:
        """The highest generation on disk: generation files, checkpoint and temporary names."""
        numbers = [0]
        if self.dir.is_dir():
            numbers += [int(m.group(1)) for p in self.dir.iterdir() if (m := _NAME.match(p.name))]
        if self.root.is_dir():
            numbers += [
                int(m.group(1))
                for p in self.root.iterdir()
                if (m := COMMITTED_NAME.match(p.name) or TEMPORARY_NAME.match(p.name))
            ]
        return max(numbers)

    def claim(self, info: dict) -> int:
        """Claim a generation above every one on disk; on a store it cannot write, defer the claim (see above)."""
        self.unclaimed = None
        number = 1  # if the store cannot even be listed, there is nothing to resume from either
        while True:
            try:
                number = self.latest() + 1
                created = self._create(number, info)
            except OSError as exc:
                # Full, read-only, not writable for this uid, or ``generations`` is no directory: the
                # worker can still resume from what it can read (issue 23: a raw OSError here stopped
                # it), and every commit fails naming this cause until the store is fixed (``check``).
                if _is_full(exc):
                    log.warning(
                        "the checkpoint store is full (%s): training as generation %d, which is claimed "
                        "before this group's first commit",
                        exc,
                        number,
                    )
                else:
                    log.warning(
                        "cannot claim a generation in %s (%s): resuming read-only as generation %d; no "
                        "checkpoint can be committed until the store can be written",
                        self.dir,
                        exc,
                        number,
                    )
                self.unclaimed, self._info = number, info
                return number
            if created:
                return number
            # another group claimed it first: take the next one

    def _create(self, number: int, info: dict) -> bool:
        """Create ``gen-<number>.json`` exclusively: False if it exists; ENOSPC raised only if not created."""
        self.dir.mkdir(parents=True, exist_ok=True)
        path = self.dir / f"gen-{number:06d}.json"
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        try:
            with os.fdopen(fd, "w") as handle:
                json.dump({"generation": number, **info}, handle)
                handle.flush()
                os.fsync(handle.fileno())
            fsync_dir(self.dir)
        except OSError as exc:
            if not _is_full(exc):
                raise
            # the exclusive create succeeded: the name is the claim, the JSON only informs people
            log.warning(
                "claimed generation %d, but the store is full: %s is left without its details (%s)",
                number,
                path.name,
                exc,
            )
        return True

    def check(self, generation: int) -> None:
        """Raise StaleGenerationError unless ``generation`` is claimed and no newer one is on disk."""
        newest = self.latest()
        if newest > generation:
            raise StaleGenerationError(
                f"generation {generation} is fenced: generation {newest} formed since; not committing"
            )
        if self.unclaimed == generation:
            # raises ENOSPC while the store is still full: the commit fails as a write error
            if not self._create(generation, self._info):
                raise StaleGenerationError(
                    f"generation {generation} is fenced: another group claimed it while this one could not "
                    "write its claim; not committing"
                )
            log.info("claimed generation %d (deferred: the store was full when this group formed)", generation)
            self.unclaimed = None
