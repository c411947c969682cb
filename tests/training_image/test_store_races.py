"""Races between writers, the prune and readers never leave the store without its last good checkpoint (issue 23).

Each race is made to happen at the exact line where it did harm, by a hook, so that it happens every run:

- a checkpoint's temporary files vanished between the fence check and the rename (what a concurrent
  writer's clean-up did, deleting file by file): ``save()`` reported success for an empty checkpoint,
  its cached "intact" verdict counted it, and with ``keep=1`` the prune deleted the last good one;
- a reader listed the store, then the writer committed and (``keep=1``) pruned what the reader had
  listed: the reader found no checkpoint (5 times in about 110,000 resumes);
- a byte flipped in place with its timestamps put back was served from the verdict cache;
- a checkpoint the prune counted was emptied while the prune was deleting the older ones.
"""

from __future__ import annotations

import os
import time

import pytest
import torch
from elastic_trainer.store import checkpoint as checkpoint_module
from elastic_trainer.store.checkpoint import CheckpointStore
from elastic_trainer.store.checkpoint_write import CheckpointWriteError


def state(step: int) -> dict:
    return {"model": {"w": torch.full((64, 64), float(step))}, "step": step}


@pytest.fixture
def store(tmp_path) -> CheckpointStore:
    store = CheckpointStore(tmp_path / "ckpt", keep=1)
    store.generations.claim({})
    store.save(state(10), step=10, generation=1)
    return store


def steps(store: CheckpointStore) -> list[int]:
    return [c.step for c in store.committed()]


def empty_files_of(directory) -> None:
    """What a clean-up does to a directory before it removes it: its files go first, one by one."""
    for entry in os.listdir(directory):
        os.unlink(os.path.join(directory, entry))


def test_files_vanishing_between_the_fence_check_and_the_rename_fail_the_save(store):
    real_check = store.generations.check
    emptied = []

    def check_then_emptied(generation):
        real_check(generation)  # passes
        store.generations.check = real_check  # once
        tmp = next(p for p in store.root.iterdir() if p.name.startswith(".tmp-"))
        empty_files_of(tmp)
        emptied.append(tmp.name)

    store.generations.check = check_then_emptied
    with pytest.raises(CheckpointWriteError, match=r"state\.pt"):  # before: it returned the empty checkpoint
        store.save(state(20), step=20, generation=1)
    assert emptied
    assert steps(store) == [10]  # the last good one was not pruned for it, nor the empty one left
    loaded, meta, _ = CheckpointStore(store.root).load_latest()
    assert meta["step"] == 10 and torch.equal(loaded["model"]["w"], state(10)["model"]["w"])


def test_a_reader_racing_the_commit_and_prune_with_keep_1_still_finds_a_checkpoint(store, monkeypatch):
    reader = CheckpointStore(store.root, keep=1)
    real_verify = reader._verdicts.verify
    raced = []

    def verify_after_the_writer_moved_on(path, *args):
        if not raced:  # the reader listed [10]; the writer commits 20 and prunes 10 before 10 is read
            raced.append(path.name)
            store.save(state(20), step=20, generation=1)
        return real_verify(path, *args)

    monkeypatch.setattr(reader._verdicts, "verify", verify_after_the_writer_moved_on)
    found = reader.load_latest()
    assert raced == ["ckpt-g000001-s0000000010"]
    assert found is not None, "a checkpoint existed at every moment: the reader must find one"
    assert found[1]["step"] == 20


def test_a_flipped_byte_with_its_timestamps_kept_is_not_served_from_the_cache(store):
    store.keep = 5
    newest = store.save(state(20), step=20, generation=1)  # this process wrote it: its verdict is cached
    state_file = newest.path / "state.pt"
    before = os.stat(state_file)
    # Timestamps tick at the file system's granularity: the flip must come after the verdict's tick
    # for any key to tell them apart (git's "racy clean" problem). Sleeping only makes that surer.
    time.sleep(0.05)
    with open(state_file, "r+b") as handle:
        middle = handle.seek(0, os.SEEK_END) // 2
        handle.seek(middle)  # inside the tensor's bytes: torch.load itself would not notice
        byte = handle.read(1)
        handle.seek(middle)
        handle.write(bytes([byte[0] ^ 0xFF]))
    os.utime(state_file, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(state_file).st_mtime_ns == before.st_mtime_ns and os.stat(state_file).st_size == before.st_size
    _, meta, _ = store.load_latest()
    assert meta["step"] == 10


def test_a_kept_checkpoint_emptied_during_the_prune_keeps_the_older_one(store, monkeypatch):
    store.keep = 5
    newest = store.save(state(20), step=20, generation=1)
    store.keep = 1
    real_trash = checkpoint_module.trash
    hit = []

    def trash_while_the_kept_one_is_emptied(path):
        moved = real_trash(path)
        if not hit:
            hit.append(path.name)
            empty_files_of(newest.path)  # someone else's clean-up, right after 20 was counted
        return moved

    monkeypatch.setattr(checkpoint_module, "trash", trash_while_the_kept_one_is_emptied)
    store.prune(1)
    assert hit == ["ckpt-g000001-s0000000010"]
    assert 10 in steps(store), "20 was emptied after it was counted: 10 is the last good one and must stay"
    assert CheckpointStore(store.root).load_latest()[1]["step"] == 10


def test_a_cached_verdict_is_dropped_when_a_file_is_replaced_by_one_of_the_same_size(store):
    store.keep = 5
    saved = store.save(state(20), step=20, generation=1)
    replacement = saved.path / "state.pt.new"
    data = bytearray((saved.path / "state.pt").read_bytes())
    data[len(data) // 2] ^= 0xFF
    replacement.write_bytes(bytes(data))
    before = os.stat(saved.path / "state.pt")
    os.utime(replacement, ns=(before.st_atime_ns, before.st_mtime_ns))
    os.replace(replacement, saved.path / "state.pt")  # a new inode: this one was always noticed
    assert store.load_latest()[1]["step"] == 10


def test_a_file_changed_while_it_was_hashed_is_hashed_again(store, monkeypatch):
    from elastic_trainer.store import checkpoint_verify

    store.keep = 5
    saved = store.save(state(20), step=20, generation=1)
    reader = CheckpointStore(store.root, keep=5)
    real_hash = checkpoint_verify._hash_file

    def hash_then_changed(path, *args):
        digest = real_hash(path, *args)  # the bytes as they were
        if path.parent == saved.path:
            time.sleep(0.05)  # past the timestamps' granularity (see the flipped-byte test)
            with open(path, "r+b") as handle:
                middle = handle.seek(0, os.SEEK_END) // 2
                handle.seek(middle)
                byte = handle.read(1)
                handle.seek(middle)
                handle.write(bytes([byte[0] ^ 0xFF]))
        return digest

    monkeypatch.setattr(checkpoint_verify, "_hash_file", hash_then_changed)
    reader.verify(saved)  # what it read was intact
    monkeypatch.setattr(checkpoint_verify, "_hash_file", real_hash)
    # the verdict was keyed on the files as they were after the change: it was served from the cache
    _, meta, _ = reader.load_latest()
    assert meta["step"] == 10
