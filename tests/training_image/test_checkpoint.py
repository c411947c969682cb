"""Checkpoints: atomic commit, verification on load, last K kept, fenced by generation."""

from __future__ import annotations

import json
import logging

import pytest
import torch
from elastic_trainer.store.checkpoint import CheckpointStore
from elastic_trainer.store.checkpoint_verify import CorruptCheckpointError
from elastic_trainer.store.fence import Generations, StaleGenerationError


def state(step: int) -> dict:
    return {"model": {"w": torch.full((64, 64), float(step))}, "step": step, "rng": [torch.get_rng_state()]}


def save(store: CheckpointStore, step: int, generation: int = 1, **kwargs):
    return store.save(state(step), step=step, generation=generation, **kwargs)


@pytest.fixture
def store(tmp_path) -> CheckpointStore:
    store = CheckpointStore(tmp_path / "ckpt", keep=3)
    assert store.generations.claim({}) == 1
    return store


def test_round_trip_and_layout(store):
    saved = save(store, 10)
    assert saved.path.name == "ckpt-g000001-s0000000010"
    assert sorted(p.name for p in saved.path.iterdir()) == ["meta.json", "state.pt"]
    loaded, meta, checkpoint = store.load_latest()
    assert checkpoint == saved
    assert meta["step"] == 10 and meta["generation"] == 1
    assert torch.equal(loaded["model"]["w"], state(10)["model"]["w"])
    assert not [p for p in store.root.iterdir() if p.name.startswith(".tmp")]


def test_keeps_the_last_k(store):
    for step in (10, 20, 30, 40, 50):
        save(store, step)
    assert [c.step for c in store.committed()] == [50, 40, 30]


def test_truncated_checkpoint_is_skipped_with_a_warning(store, caplog):
    save(store, 10)
    newest = save(store, 20)
    state_file = newest.path / "state.pt"
    state_file.write_bytes(state_file.read_bytes()[: state_file.stat().st_size // 2])
    with caplog.at_level(logging.WARNING, logger="elastic_trainer"):
        _, meta, _ = store.load_latest()
    assert meta["step"] == 10
    assert "ckpt-g000001-s0000000020" in caplog.text and "truncated" in caplog.text


@pytest.mark.parametrize("damage", ["flip_byte", "no_meta", "bad_meta", "no_state"])
def test_damaged_checkpoint_is_never_loaded(store, damage, caplog):
    save(store, 10)
    newest = save(store, 20)
    if damage == "flip_byte":
        data = bytearray((newest.path / "state.pt").read_bytes())
        data[len(data) // 2] ^= 0xFF
        (newest.path / "state.pt").write_bytes(bytes(data))
    elif damage == "no_meta":
        (newest.path / "meta.json").unlink()
    elif damage == "bad_meta":
        (newest.path / "meta.json").write_text("{")
    else:
        (newest.path / "state.pt").unlink()
    with pytest.raises(CorruptCheckpointError):
        store.verify(newest)
    with caplog.at_level(logging.WARNING, logger="elastic_trainer"):
        assert store.load_latest()[1]["step"] == 10
    assert "skipping checkpoint" in caplog.text


def test_a_write_that_never_committed_is_invisible(store):
    save(store, 10)

    def die(tmp):
        raise KeyboardInterrupt  # the process dies between writing and the commit rename

    with pytest.raises(KeyboardInterrupt):
        save(store, 20, before_commit=die)
    assert [p.name for p in store.root.iterdir() if p.name.startswith(".tmp-g000001-s0000000020-")]
    assert store.load_latest()[1]["step"] == 10
    save(store, 30)  # the next commit cleans up the dead write
    assert not [p for p in store.root.iterdir() if p.name.startswith(".tmp")]


def test_nothing_to_load_in_an_empty_store(tmp_path):
    assert CheckpointStore(tmp_path / "none").load_latest() is None


def test_an_older_generation_cannot_commit(store):
    save(store, 10, generation=1)
    assert Generations(store.root).claim({"world_size": 1}) == 2  # a newer group formed
    save(store, 12, generation=2)
    with pytest.raises(StaleGenerationError, match="generation 1 is fenced"):
        save(store, 20, generation=1)
    assert [(c.generation, c.step) for c in store.committed()] == [(2, 12), (1, 10)]
    assert not [p for p in store.root.iterdir() if p.name.startswith("ckpt-g000001-s0000000020")]


def test_a_newer_generation_outranks_a_higher_step(store):
    # Even if an old writer's commit raced past the fence, the newer group's checkpoint wins.
    save(store, 10, generation=1)
    save(store, 90, generation=1)
    store.generations.claim({})
    save(store, 20, generation=2)
    assert store.load_latest()[1]["generation"] == 2


def test_a_commit_never_replaces_a_committed_checkpoint(store):
    save(store, 10)
    with pytest.raises(FileExistsError):
        save(store, 10)
    assert json.loads((store.root / "ckpt-g000001-s0000000010" / "meta.json").read_text())["step"] == 10


def test_generations_are_claimed_exclusively(tmp_path):
    generations = Generations(tmp_path)
    (tmp_path / "generations").mkdir()
    (tmp_path / "generations" / "gen-000004.json").write_text("{}")  # claimed by someone else
    assert generations.claim({}) == 5
    assert generations.claim({}) == 6
    generations.check(6)
    with pytest.raises(StaleGenerationError):
        generations.check(5)
