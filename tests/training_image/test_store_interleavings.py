"""Property: whatever order writers, prunes, clean-ups, crashes and resumes come in, the store keeps a good checkpoint.

Hypothesis draws sequences of operations by two writers of the same generation (``keep=1``) and a
restarting reader, and lands the races at the lines where they did harm (issue 23) through hooks:
another writer's commit or clean-up between a writer's fence check and its rename, a temporary
emptied file by file there (a clean-up in progress), a writer dying before its rename, a commit and
prune between a reader's listing and its read. Deterministic (``derandomize``): the same examples
run in every CI run; tests/training_image/test_store_stress.py runs real processes at once.

After every operation: a save that returned succeeded with a checkpoint that verifies; once one
did, a fresh reader finds one, whole (its tensor is its step); nothing under a committed name is
empty or partial.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import torch
from elastic_trainer.store.checkpoint import CheckpointStore
from elastic_trainer.store.checkpoint_verify import CorruptCheckpointError
from elastic_trainer.store.checkpoint_write import CheckpointWriteError
from hypothesis import given, settings
from hypothesis import strategies as st

DURING_SAVE = ["nothing", "other_commits", "other_prunes", "tmp_emptied", "dies"]
DURING_RESUME = ["nothing", "writer_commits"]

operations = st.lists(
    st.one_of(
        st.tuples(st.just("save"), st.sampled_from([0, 1]), st.sampled_from(DURING_SAVE)),
        st.tuples(st.just("prune"), st.sampled_from([0, 1]), st.just("")),
        st.tuples(st.just("resume"), st.sampled_from([0, 1]), st.sampled_from(DURING_RESUME)),
    ),
    min_size=1,
    max_size=20,
)


def state(step: int) -> dict:
    return {"model": {"w": torch.full((16,), float(step))}, "step": step}


class Interleaving:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.writers = [CheckpointStore(root, keep=1), CheckpointStore(root, keep=1)]
        self.writers[0].generations.claim({})
        self.step = 0
        self.committed_once = False

    def next_step(self) -> int:
        self.step += 1
        return self.step

    def save(self, index: int, during: str = "nothing") -> None:
        store, other = self.writers[index], self.writers[1 - index]
        real_check = store.generations.check

        def check(generation: int) -> None:
            real_check(generation)
            store.generations.check = real_check  # once: a failed save asks again
            if during == "other_commits":
                self.save(1 - index)
            elif during == "other_prunes":
                other.prune(1)
            elif during == "tmp_emptied":
                tmp = next(p for p in self.root.iterdir() if p.name.startswith(".tmp-"))
                for entry in os.listdir(tmp):
                    os.unlink(tmp / entry)
            elif during == "dies":
                raise KeyboardInterrupt  # the process dies between the check and its rename

        store.generations.check = check
        try:
            saved = store.save(state(step := self.next_step()), step=step, generation=1)
        except (CheckpointWriteError, KeyboardInterrupt):
            return
        finally:
            store.generations.check = real_check
        CheckpointStore(self.root).verify(saved)  # reported saved: whole at this moment
        self.committed_once = True

    def resume(self, index: int, during: str) -> None:
        reader = CheckpointStore(self.root, keep=1)
        if during == "writer_commits":
            real_verify = reader._verdicts.verify
            calls = []

            def verify(path, *args):
                if not calls:
                    calls.append(path)
                    self.save(index)
                return real_verify(path, *args)

            reader._verdicts.verify = verify
        self.check_found(reader.load_latest())

    def check_found(self, found) -> None:
        if self.committed_once:
            assert found is not None, "a checkpoint was committed and none is found"
        if found is not None:
            loaded, meta, chosen = found
            assert loaded["step"] == meta["step"] == chosen.step
            assert torch.all(loaded["model"]["w"] == chosen.step)

    def check_store(self) -> None:
        fresh = CheckpointStore(self.root, keep=1)
        for checkpoint in fresh.committed():
            try:
                fresh.verify(checkpoint)
            except CorruptCheckpointError as exc:
                raise AssertionError(f"a broken checkpoint under a committed name: {exc}") from exc
        self.check_found(fresh.load_latest())


@settings(max_examples=80, deadline=None, derandomize=True)
@given(operations)
def test_any_interleaving_keeps_a_good_checkpoint(steps):
    with tempfile.TemporaryDirectory() as scratch:
        run = Interleaving(Path(scratch) / "ckpt")
        for kind, index, during in steps:
            if kind == "save":
                run.save(index, during)
            elif kind == "prune":
                run.writers[index].prune(1)
            else:
                run.resume(index, during)
            run.check_store()
