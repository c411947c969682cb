"""Generations start above everything on disk, and a writer fenced mid-write ends fenced (issue 11).

Regressions: with ``generations/`` missing and checkpoints of generation 9 on disk, a new group
claimed generation 1 and every checkpoint it wrote was pruned at once; an older writer whose
temporary directory a newer generation's prune removed died of FileNotFoundError instead of
ending on the fenced path (StaleGenerationError, exit code 3).
"""

from __future__ import annotations

import shutil

import pytest
import torch
from elastic_trainer.store.checkpoint import CheckpointStore
from elastic_trainer.store.checkpoint_write import CheckpointWriteError
from elastic_trainer.store.fence import Generations, StaleGenerationError


def state(step: int) -> dict:
    return {"model": {"w": torch.full((8, 8), float(step))}, "step": step}


@pytest.mark.parametrize(
    ("on_disk", "expected"),
    [
        ([], 1),
        (["generations/gen-000004.json"], 5),
        (["ckpt-g000009-s0000000500/"], 10),  # copied in from elsewhere, no generations/
        ([".tmp-g000012-s0000000510-0123456789ab/"], 13),  # a dead writer's temporary
        (["generations/gen-000003.json", "ckpt-g000009-s0000000500/"], 10),
        (["generations/gen-000011.json", "ckpt-g000009-s0000000500/"], 12),
        (["ckpt-g000009-s0000000500-notes.txt", "unrelated-g000099/"], 1),  # not a checkpoint's name
    ],
)
def test_a_new_generation_is_above_every_generation_on_disk(tmp_path, on_disk, expected):
    for name in on_disk:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.mkdir() if name.endswith("/") else path.write_text("{}")
    assert Generations(tmp_path).claim({}) == expected


def test_checkpoints_copied_in_without_generations_are_resumed_and_then_outranked(tmp_path):
    elsewhere = CheckpointStore(tmp_path / "elsewhere", keep=3)
    for _ in range(9):
        elsewhere.generations.claim({})
    copied = elsewhere.save(state(500), step=500, generation=9)
    store = CheckpointStore(tmp_path / "store", keep=2)
    store.root.mkdir()
    shutil.copytree(copied.path, store.root / copied.path.name)  # generations/ not copied

    generation = store.generations.claim({})
    assert generation == 10
    assert store.load_latest()[1]["step"] == 500  # the resume
    for step in (510, 520):
        store.save(state(step), step=step, generation=generation)
    # before the fix: generation 1, outranked by generation 9 and pruned at once
    assert [(c.generation, c.step) for c in store.committed()] == [(10, 520), (10, 510)]
    assert store.load_latest()[1]["step"] == 520


def newer_group_commits(root):
    """What a newer worker group's rank 0 does: claim, commit, prune older temporaries."""
    newer = CheckpointStore(root, keep=3)
    generation = newer.generations.claim({})
    newer.save(state(99), step=99, generation=generation)


def test_a_writer_whose_temporary_was_pruned_between_its_check_and_its_rename_is_fenced(tmp_path):
    store = CheckpointStore(tmp_path, keep=3)
    store.save(state(10), step=10, generation=store.generations.claim({}))
    real_check = store.generations.check

    def check_then_a_newer_group_commits(generation):
        real_check(generation)  # passes: generation 1 is still the newest
        store.generations.check = real_check
        newer_group_commits(tmp_path)  # its prune removes our temporary before our rename

    store.generations.check = check_then_a_newer_group_commits
    with pytest.raises(StaleGenerationError, match="generation 1 is fenced") as raised:
        store.save(state(20), step=20, generation=1)
    assert isinstance(raised.value.__cause__, FileNotFoundError)  # the rename's; it used to escape as it was
    assert [(c.generation, c.step) for c in store.committed()] == [(2, 99), (1, 10)]
    assert not list(tmp_path.glob(".tmp-*"))


def test_a_writer_whose_temporary_was_pruned_while_writing_is_fenced(tmp_path, monkeypatch):
    store = CheckpointStore(tmp_path, keep=3)
    store.save(state(10), step=10, generation=store.generations.claim({}))
    real_save = torch.save

    def save_racing_a_newer_group(obj, handle):
        real_save(obj, handle)
        monkeypatch.setattr(torch, "save", real_save)  # the newer group writes normally
        newer_group_commits(tmp_path)  # removes our .tmp-g000001-... while state.pt is still open

    monkeypatch.setattr(torch, "save", save_racing_a_newer_group)
    with pytest.raises(StaleGenerationError, match="generation 1 is fenced") as raised:
        store.save(state(20), step=20, generation=1)
    # the write failed on the missing directory (meta.json), and that is explained as fencing
    assert isinstance(raised.value.__cause__, FileNotFoundError)
    assert [(c.generation, c.step) for c in store.committed()] == [(2, 99), (1, 10)]


def test_a_missing_temporary_without_a_newer_generation_is_a_write_error(tmp_path):
    store = CheckpointStore(tmp_path, keep=3)
    generation = store.generations.claim({})
    with pytest.raises(CheckpointWriteError, match="No such file"):
        store.save(state(20), step=20, generation=generation, before_commit=shutil.rmtree)
    assert store.committed() == []
