"""The checkpoint store: atomic, verified, fenced, last K intact ones kept.

``CheckpointStore`` is what the trainer uses; it owns the store as a whole: which committed
checkpoints there are, which is the newest that verifies and loads, and which to prune.
Writing one checkpoint (temporary directory, hashing while writing, the rename that commits
it, the on-disk layout) is checkpoint_write.py's; whether one is intact (reading it back,
the per-process verdicts) is checkpoint_verify.py's.

A resume verifies a candidate once (``verify``), and a reader that was told it is verified
only deserializes it (``load(..., verified=True)``). A symbolic link named like a checkpoint
is refused with a warning, never followed, never deleted. ``prune`` keeps the newest ``keep``
verified ones and removes only what is older than all of them; an unverifiable directory
newer than that is left alone, so nothing good is ever deleted to make room (issue 11).

A prune runs after each commit, in the writer's thread; a stop's save is waited for in the
notice window. While the owner says it is in a hurry (``in_a_hurry``: a stop is under way), a
prune hashes nothing: a checkpoint this process has not verified yet (a restarted worker knows
only the one it resumed from) is neither counted nor removed, and a hash in progress is given up.
The next prune without a hurry (the next periodic save, in this or the next process) settles it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path

import torch

from elastic_trainer.events import log
from elastic_trainer.store.checkpoint_meta import open_regular
from elastic_trainer.store.checkpoint_verify import (
    CorruptCheckpointError,
    Verdicts,
    VerificationDeferred,
    check_files,
    read_meta,
    refused,
    transient,
)
from elastic_trainer.store.checkpoint_write import (  # CheckpointWriteError: inplace.py imports it from here too
    STATE_FILE,
    TRASH_PREFIX,
    CheckpointWriteError,
    FileDigest,
    checkpoint_meta,
    guarded,
    make_temporary,
    remove,
    temporary_path,
    trash,
    write_file,
    write_meta_and_rename,
)
from elastic_trainer.store.fence import COMMITTED_NAME, TEMPORARY_NAME, Generations, fsync_dir

# How often load_latest lists the store again when every checkpoint it listed failed: each round
# only happens after a writer committed meanwhile, so rounds end long before this at any cadence
LIST_ROUNDS = 5


@dataclass(frozen=True)
class Checkpoint:
    generation: int
    step: int
    path: Path


class CheckpointStore:
    def __init__(self, root: Path | str, keep: int = 3, in_a_hurry: Callable[[], bool] | None = None) -> None:
        if keep < 1:
            raise ValueError("keep must be at least 1")
        self.root = Path(root)
        self.keep = keep
        # asked by prune (from the writer's thread) before and while hashing: see the module docstring
        self.in_a_hurry = in_a_hurry or (lambda: False)
        self.generations = Generations(self.root)
        self._verdicts = Verdicts()  # what this process verified or wrote itself
        self._warned: set[str] = set()  # say each refusal once, not at every prune

    def name(self, generation: int, step: int) -> str:
        return f"ckpt-g{generation:06d}-s{step:010d}"

    # -- listing -----------------------------------------------------------------------------
    def _named(self) -> list[Checkpoint]:
        """Every entry named like a committed checkpoint, newest first by (generation, step).

        A store that cannot be listed (a file, a link loop, no permission) has none, with a warning once.
        """
        try:
            if not self.root.is_dir():
                return []
            found = [
                Checkpoint(int(m.group(1)), int(m.group(2)), p)
                for p in self.root.iterdir()
                if (m := COMMITTED_NAME.match(p.name))
            ]
        except OSError as exc:
            self._warn_once(f"cannot list the checkpoint store {self.root}: {exc}")
            return []
        return sorted(found, key=lambda c: (c.generation, c.step), reverse=True)

    def committed(self) -> list[Checkpoint]:
        """Committed checkpoints by name (real directories, not yet verified), newest first.

        A newer generation outranks any older one. Symbolic links are left out, with a warning once.
        """
        found = []
        for checkpoint in self._named():
            reason = refused(checkpoint.path)
            if reason is None:
                found.append(checkpoint)
            else:
                self._warn_once(f"refusing {checkpoint.path.name}: {reason}")
        return found

    def _warn_once(self, message: str) -> None:
        if message not in self._warned:
            self._warned.add(message)
            log.warning("%s", message)

    # -- writing (checkpoint_write.py) -------------------------------------------------------
    def save(
        self,
        state: dict,
        *,
        step: int,
        generation: int,
        info: dict | None = None,
        before_commit: Callable[[Path], None] | None = None,
    ) -> Checkpoint:
        """Write ``state`` and commit it as (generation, step); rank 0 only.

        Raises StaleGenerationError if a newer group exists (also when its prune removed this
        write's temporary directory), CheckpointWriteError if the store failed (e.g. ENOSPC).
        """
        tmp = self.temporary(generation, step)
        files = self._guarded(
            tmp,
            generation,
            lambda: {STATE_FILE: write_file(tmp / STATE_FILE, lambda handle: torch.save(state, handle))},
        )
        return self.commit(tmp, step=step, generation=generation, files=files, info=info, before_commit=before_commit)

    def temporary(self, generation: int, step: int) -> Path:
        """A new, empty temporary directory for a checkpoint of (generation, step)."""
        tmp = temporary_path(self.root, generation, step)
        self._guarded(tmp, generation, lambda: make_temporary(self.root, tmp))
        return tmp

    def commit(
        self,
        tmp: Path,
        *,
        step: int,
        generation: int,
        files: dict[str, FileDigest],
        info: dict | None = None,
        before_commit: Callable[[Path], None] | None = None,
    ) -> Checkpoint:
        """Write ``meta.json`` for ``files`` (already written and fsynced in ``tmp``) and commit.

        The commit is the rename, after the fence check; then older checkpoints are pruned.
        """
        meta = checkpoint_meta(step, generation, files, info)
        final = self.root / self.name(generation, step)

        def commit_and_confirm() -> tuple:
            write_meta_and_rename(tmp, final, meta, lambda: self.generations.check(generation), before_commit)
            return self._confirm(final, meta)

        fingerprint = self._guarded(tmp, generation, commit_and_confirm)
        try:
            fsync_dir(self.root)
        except OSError as exc:
            raise CheckpointWriteError(
                f"{final.name} was committed but its directory entry may not be durable ({exc})"
            ) from exc
        self._verdicts.remember(final, meta, fingerprint)
        self.prune(generation)
        return Checkpoint(generation, step, final)

    def _confirm(self, final: Path, meta: dict) -> tuple:
        """After the rename: every file written is in ``final``, whole; else it is removed and the save fails.

        A clean-up deleting a temporary file by file could empty it between the fence check and
        the rename, and the empty directory was committed, reported saved and counted as intact,
        so that the prune deleted the last good checkpoint (issue 23). Stat calls only. Returns the
        files' fingerprint, taken before they were checked: the verdict "intact" is kept only while
        the files are the ones checked.
        """
        try:
            fingerprint = self._verdicts.fingerprint(final)
            check_files(final, meta)
        except (OSError, CorruptCheckpointError) as exc:
            remove(final)
            raise CheckpointWriteError(
                f"{final.name} lost files while it was committed ({exc}); removed, not committed"
            ) from exc
        return fingerprint

    def _guarded(self, tmp: Path, generation: int, action: Callable[[], object]):
        """Run one step of a save; on failure remove ``tmp`` and say whether the writer was fenced (``guarded``)."""
        return guarded(tmp, generation, self.generations, action)

    # -- reading (verification: checkpoint_verify.py) ------------------------------------------
    def verify(self, checkpoint: Checkpoint) -> dict:
        """The checkpoint's meta if every file is complete and intact; else CorruptCheckpointError.

        Hashes each file once per process: the verdict on a checkpoint this process wrote or
        verified is reused while its directory's entries are unchanged (inode, size, mtime).
        """
        return self._verdicts.verify(checkpoint.path)

    def read(self, checkpoint: Checkpoint, map_location: str | torch.device = "cpu") -> dict:
        """Deserialize ``state.pt`` without verifying it (the caller verified it, or was told it is)."""
        name = checkpoint.path.name
        try:
            # opened here, not by torch: never through a link, never blocking on a FIFO (checkpoint_meta.py)
            fd, _ = open_regular(checkpoint.path / STATE_FILE, STATE_FILE, name)
            with os.fdopen(fd, "rb") as handle:
                # weights_only: a checkpoint on a shared store is data, never code to run
                state = torch.load(handle, map_location=map_location, weights_only=True)
        except CorruptCheckpointError:
            raise
        except Exception as exc:
            raise CorruptCheckpointError(f"{name}: torch.load(weights_only=True) failed ({exc})") from exc
        if not isinstance(state, dict):
            raise CorruptCheckpointError(f"{name}: {STATE_FILE} holds a {type(state).__name__}, not a dict")
        return state

    def load(
        self,
        checkpoint: Checkpoint,
        map_location: str | torch.device = "cpu",
        *,
        verified: bool = False,
        required: Collection[str] = (),
    ) -> tuple[dict, dict]:
        """State and meta of one checkpoint; ``verified=True`` skips the hashing (done once, elsewhere)."""
        meta = read_meta(checkpoint.path) if verified else self.verify(checkpoint)
        try:
            if verified:  # stat only: every file is there, whole and regular, before a reader opens it
                check_files(checkpoint.path, meta)
            if meta.get("checkpoint_format") == "sharded":  # every rank wrote part of it (sharded.py)
                # here, not at the top: torch.distributed.checkpoint takes seconds to import, paid only
                # by a reader of a sharded checkpoint (sharded.py imports nothing of this module)
                from elastic_trainer.store import sharded

                state = sharded.read(checkpoint)
            else:
                state = self.read(checkpoint, map_location)
            missing = [key for key in required if key not in state]
            if missing:
                raise CorruptCheckpointError(f"{checkpoint.path.name}: lacks {', '.join(missing)} in {STATE_FILE}")
        except CorruptCheckpointError as exc:
            # intact but unusable: it must not count towards ``keep`` either (prune asks verify)
            if not transient(exc):
                self._verdicts.remember(checkpoint.path, exc)
            raise
        return state, meta

    def load_latest(
        self,
        map_location: str | torch.device = "cpu",
        *,
        required: Collection[str] = (),
        exclude: Collection[Checkpoint] = (),
        on_skip: Callable[[Checkpoint, str], None] | None = None,
    ) -> tuple[dict, dict, Checkpoint] | None:
        """The newest checkpoint that verifies, loads and has the ``required`` keys; None if none does.

        Each one passed over is logged as a warning and given to ``on_skip`` with the reason. Never
        raises: whatever is wrong with a checkpoint skips it (issue 23: an exception out of here
        crash-looped the worker without trying the older ones). When every one listed failed, the
        store is listed again, up to LIST_ROUNDS times, while it shows new names: a writer may have
        committed and pruned what this reader had listed (with ``keep=1`` a reader otherwise found
        no checkpoint although one existed at every moment).
        """
        tried = set(exclude)
        for _ in range(LIST_ROUNDS):
            fresh = [checkpoint for checkpoint in self._named() if checkpoint not in tried]
            if not fresh:
                return None
            for checkpoint in fresh:
                tried.add(checkpoint)
                try:
                    state, meta = self.load(checkpoint, map_location, required=required)
                except Exception as exc:  # a reader must fall back, whatever the bytes made fail
                    reason = (
                        str(exc)
                        if isinstance(exc, CorruptCheckpointError)
                        else f"{checkpoint.path.name}: {type(exc).__name__}: {exc}"
                    )
                    log.warning("skipping checkpoint: %s; trying the previous one", reason)
                    if on_skip is not None:
                        on_skip(checkpoint, reason)
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
            kept: list[Checkpoint] = []
            older: list[Checkpoint] = []
            for checkpoint in self.committed():
                if len(kept) >= self.keep:
                    older.append(checkpoint)
                    continue
                try:
                    self._verdicts.verify(checkpoint.path, self.in_a_hurry)
                except CorruptCheckpointError as exc:
                    self._warn_once(f"not counting it towards --keep-checkpoints: {exc}")
                    continue
                except VerificationDeferred as exc:
                    log.info("in a hurry, neither counted nor removed: %s", exc)
                    continue
                kept.append(checkpoint)
            self._remove_older(kept, older)
            for path in self.root.iterdir():
                match = TEMPORARY_NAME.match(path.name)
                if match and int(match.group(1)) <= generation:
                    remove(path)
                elif path.name.startswith(TRASH_PREFIX) and not path.is_symlink():  # a remover died before it
                    shutil.rmtree(path, ignore_errors=True)
        except OSError as exc:
            log.warning("pruning %s failed: %s", self.root, exc)
        self._verdicts.forget_missing()

    def _remove_older(self, kept: list[Checkpoint], older: list[Checkpoint]) -> None:
        """Remove ``older``, unless a checkpoint in ``kept`` changed since it was counted: then none.

        The older ones are moved to the trash first and deleted only once every kept one is still
        as it was verified (stat only); else they are put back (issue 23: a kept checkpoint emptied
        by someone else while the prune ran must not leave the store without an intact one).
        """
        moved = [(checkpoint.path, to) for checkpoint in older if (to := trash(checkpoint.path)) is not None]
        changed = [c.path.name for c in kept if not isinstance(self._verdicts.known(c.path), dict)]
        if changed:
            log.warning("%s changed while pruning: keeping the older checkpoints", ", ".join(changed))
            for path, to in moved:
                try:
                    os.rename(to, path)
                except OSError as exc:
                    log.warning("could not put %s back (%s): it is left as %s", path.name, exc, to.name)
            return
        for _, to in moved:
            shutil.rmtree(to, ignore_errors=True)
