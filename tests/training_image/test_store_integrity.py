"""Only verified checkpoints count, and verifying never means re-reading what this process wrote (issue 11).

Regressions: an empty, corrupt or symlinked directory named like a committed checkpoint counted
toward ``keep``, so the prune after the next save deleted every good checkpoint; symlinks were
loaded from outside the store; save() hashed state.pt by reading it back and a resume hashed the
newest checkpoint twice.
"""

from __future__ import annotations

import hashlib
import json
import logging

import pytest
import torch
from elastic_trainer.store.checkpoint import Checkpoint, CheckpointStore
from elastic_trainer.store.checkpoint_verify import CorruptCheckpointError


def state(step: int) -> dict:
    return {"model": {"w": torch.full((32, 32), float(step))}, "step": step}


@pytest.fixture
def store(tmp_path) -> CheckpointStore:
    store = CheckpointStore(tmp_path / "ckpt", keep=2)
    store.generations.claim({})
    return store


def names(store: CheckpointStore) -> list[str]:
    return [c.path.name for c in store.committed()]


def make_empty(store, name):
    (store.root / name).mkdir()


def make_corrupt(store, name):
    path = store.root / name
    path.mkdir()
    (path / "state.pt").write_bytes(b"not a checkpoint")
    (path / "meta.json").write_text(json.dumps({"step": 1, "generation": 1, "size": 16, "sha256": "0" * 64}))


def make_link(store, name, outside):
    good = CheckpointStore(outside, keep=5).save(state(7), step=7, generation=1)  # a good one, elsewhere
    (store.root / name).symlink_to(good.path)
    return good


@pytest.mark.parametrize("bad", ["empty", "corrupt", "symlink"])
def test_bad_directories_never_push_good_checkpoints_out(store, bad, tmp_path, caplog):
    store.save(state(10), step=10, generation=1)
    store.save(state(20), step=20, generation=1)
    # newer by name than both good ones: before the fix they were the "newest 2" of keep=2
    for step in (30, 40, 50):
        name = store.name(1, step)
        if bad == "empty":
            make_empty(store, name)
        elif bad == "corrupt":
            make_corrupt(store, name)
        else:
            target = make_link(store, name, tmp_path / f"outside{step}")
    with caplog.at_level(logging.WARNING, logger="elastic_trainer"):
        store.save(state(60), step=60, generation=1)  # its prune: the one that deleted 10 and 20
        store.prune(1)
    left = names(store)
    assert "ckpt-g000001-s0000000020" in left and "ckpt-g000001-s0000000060" in left
    assert "ckpt-g000001-s0000000010" not in left  # older than the newest 2 good ones: pruned
    loaded, _, chosen = store.load_latest()
    assert chosen.step == 60 and torch.equal(loaded["model"]["w"], state(60)["model"]["w"])
    if bad == "symlink":
        assert "symbolic link" in caplog.text
        assert target.path.is_dir() and (target.path / "state.pt").is_file()  # nothing outside touched
        assert all((store.root / store.name(1, s)).is_symlink() for s in (30, 40, 50))
    else:
        assert "not counting it towards --keep-checkpoints" in caplog.text
        warned = [r for r in caplog.messages if "not counting" in r and "ckpt-g000001-s0000000050" in r]
        assert len(warned) == 1  # said once, not at every prune


def test_bad_directories_older_than_the_newest_k_good_ones_are_removed(store):
    store.save(state(10), step=10, generation=1)
    make_empty(store, store.name(1, 15))
    make_corrupt(store, store.name(1, 16))
    for step in (20, 30):
        store.save(state(step), step=step, generation=1)
    assert names(store) == ["ckpt-g000001-s0000000030", "ckpt-g000001-s0000000020"]


def test_a_symlinked_checkpoint_is_never_loaded(store, tmp_path, caplog):
    store.save(state(10), step=10, generation=1)
    make_link(store, store.name(5, 99), tmp_path / "outside")  # would outrank everything
    with caplog.at_level(logging.WARNING, logger="elastic_trainer"):
        _, meta, chosen = store.load_latest()
    assert chosen.step == 10 and meta["step"] == 10
    assert "ckpt-g000005-s0000000099: a symbolic link" in caplog.text
    with pytest.raises(CorruptCheckpointError, match="symbolic link"):
        store.verify(Checkpoint(5, 99, store.root / store.name(5, 99)))


def test_a_linked_state_file_is_refused(store, tmp_path):
    saved = store.save(state(10), step=10, generation=1)
    real = tmp_path / "elsewhere.pt"
    (saved.path / "state.pt").rename(real)
    (saved.path / "state.pt").symlink_to(real)  # same bytes, same size, same sha256, outside the store
    with pytest.raises(CorruptCheckpointError, match="not a regular file"):
        CheckpointStore(store.root).verify(saved)


def test_save_hashes_the_bytes_as_it_writes_them(store, hashed):
    saved = store.save(state(10), step=10, generation=1)
    assert hashed == []  # nothing read back
    meta = json.loads((saved.path / "meta.json").read_text())
    data = (saved.path / "state.pt").read_bytes()
    assert meta["files"]["state.pt"] == {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    assert (meta["size"], meta["sha256"]) == (len(data), hashlib.sha256(data).hexdigest())  # format 1's fields


def test_a_resume_hashes_once_and_a_verified_load_never(store, hashed):
    store.save(state(10), step=10, generation=1)
    fresh = CheckpointStore(store.root)  # a restarted worker: nothing cached
    _, _, chosen = fresh.load_latest()
    assert hashed == [chosen.path.name]
    fresh.load(chosen)  # already verified by this process, files unchanged
    CheckpointStore(store.root).load(chosen, verified=True)  # another rank, told it is verified
    assert hashed == [chosen.path.name]


def test_prune_does_not_rehash_what_this_process_wrote_or_verified(store, hashed):
    for step in (10, 20):
        store.save(state(step), step=step, generation=1)
    restarted = CheckpointStore(store.root, keep=2)
    restarted.load_latest()  # verifies 20
    for step in (30, 40, 50):
        restarted.save(state(step), step=step, generation=1)
    assert hashed == ["ckpt-g000001-s0000000020"]  # once, at the resume


def test_a_prune_in_a_hurry_hashes_nothing_and_gives_up_a_hash_under_way(store, hashed):
    # Regression: a stop's save (waited for in the notice window) pruned by hashing the older
    # checkpoints a restarted process had not verified: seconds per 4 GB state.
    big = {"model": {"w": torch.zeros(800_000)}}  # 3.2 MB: hashed in 1 MiB reads
    for step in (10, 20):
        store.save({**big, "step": step}, step=step, generation=1)
    answers = [False, False]  # 20 may be opened and one MiB of it read; then the stop comes
    restarted = CheckpointStore(store.root, keep=2, in_a_hurry=lambda: answers.pop(0) if answers else True)
    restarted.save(state(30), step=30, generation=1)
    assert hashed == ["ckpt-g000001-s0000000020"]  # begun, given up; 10 never opened
    assert names(restarted) == [f"ckpt-g000001-s00000000{step}" for step in (30, 20, 10)]  # none counted or removed
    restarted.in_a_hurry = lambda: False
    restarted.prune(1)  # no hurry: 20 is hashed in full (nothing was remembered of the attempt), 10 goes
    assert hashed == ["ckpt-g000001-s0000000020"] * 2
    assert names(restarted) == ["ckpt-g000001-s0000000030", "ckpt-g000001-s0000000020"]


def test_a_changed_file_is_verified_again(store):
    saved = store.save(state(10), step=10, generation=1)
    store.verify(saved)
    data = bytearray((saved.path / "state.pt").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (saved.path / "state.pt").write_bytes(bytes(data))  # same size, new mtime
    with pytest.raises(CorruptCheckpointError, match="sha256"):
        store.verify(saved)


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (lambda: {"model": {}, "code": print}, "weights_only"),  # a function: refused by the unpickler
        (lambda: [1, 2, 3], "not a dict"),
    ],
)
def test_a_checkpoint_torch_refuses_is_skipped(store, payload, reason, caplog):
    store.save(state(10), step=10, generation=1)
    refused = store.save(payload(), step=20, generation=1)  # sha256 and size match: only the load fails
    store.verify(refused)
    with caplog.at_level(logging.WARNING, logger="elastic_trainer"):
        assert store.load_latest()[2].step == 10
    assert f"skipping checkpoint: {refused.path.name}" in caplog.text and reason in caplog.text


def test_a_checkpoint_without_a_required_key_is_skipped(store):
    store.save({"model": {}, "step": 10, "sampler": {}}, step=10, generation=1)
    store.save({"model": {}, "step": 20}, step=20, generation=1)
    skipped = []
    _, meta, _ = store.load_latest(required=("model", "sampler"), on_skip=lambda c, why: skipped.append(why))
    assert meta["step"] == 10
    assert skipped == ["ckpt-g000001-s0000000020: lacks sampler in state.pt"]


def test_an_intact_checkpoint_that_failed_to_load_does_not_count_either(store):
    store.save(state(10), step=10, generation=1)
    store.save({"model": {}, "code": print}, step=20, generation=1)
    assert store.load_latest()[2].step == 10  # 20 verified, then refused by torch.load
    store.save(state(30), step=30, generation=1)  # keep=2: 30 and 10 are the usable ones
    assert [c.step for c in store.committed()] == [30, 20, 10]
