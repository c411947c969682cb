"""The sharded format: two real gloo ranks on loopback write one checkpoint, a single process loads it.

One spawn of two processes runs every multi-rank case (each costs an ``import torch`` per rank on
this 2-core machine); the ranks leave what they saw in JSON files that the test then checks.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import socket
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from elastic_trainer.store import sharded
from elastic_trainer.store.checkpoint import CheckpointStore
from elastic_trainer.store.checkpoint_verify import CorruptCheckpointError
from elastic_trainer.store.staging import HostSnapshot
from torch import nn
from torch.distributed.checkpoint import FileSystemReader

WORLD = 2


def build() -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(3)  # identical replicas on every rank, as data-parallel training keeps them
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4))
    return model, torch.optim.AdamW(model.parameters(), lr=0.01)


def train_steps(model: nn.Module, optimizer: torch.optim.Optimizer, steps: int) -> None:
    generator = torch.Generator().manual_seed(11)
    for _ in range(steps):
        model(torch.randn(16, 8, generator=generator)).square().mean().backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def _outcome(call) -> str:
    try:
        result = call()
    except Exception as exc:
        return type(exc).__name__
    return "committed" if result is not None else "none"


def _rank_main(rank: int, port: int, root: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    try:
        group = dist.new_group(backend="gloo")
        store = CheckpointStore(root, keep=5)
        if rank == 0:
            store.generations.claim({})
        dist.barrier()
        model, optimizer = build()
        train_steps(model, optimizer, 3)
        snapshot = HostSnapshot()
        extra = {"step": 3, "rng": [f"rank{r}" for r in range(WORLD)]}

        def save(step: int):
            staged = snapshot.take(sharded.tensors_of(model, optimizer))
            return sharded.save(store, staged, extra, step=step, generation=1, group=group, info={"world_size": 2})

        seen = {"first": _outcome(lambda: save(3))}
        if rank == 0:
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, Path(root) / "expected.pt")

        # a write that fails on rank 1 only (the store is full there) fails on both; nothing is committed
        original_write = sharded._DigestingStream.write
        if rank == 1:
            def full(self, data):
                raise OSError(errno.ENOSPC, "No space left on device")
            sharded._DigestingStream.write = full
        seen["disk_full_on_rank1"] = _outcome(lambda: save(4))
        sharded._DigestingStream.write = original_write
        seen["after_failure"] = _outcome(lambda: save(5))  # the group is still usable

        dist.barrier()
        if rank == 0:
            store.generations.claim({"note": "a newer group formed"})
        dist.barrier()
        seen["fenced"] = _outcome(lambda: save(6))
        Path(root, f"rank{rank}.json").write_text(json.dumps(seen))
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("sharded") / "ckpt"
    mp.spawn(_rank_main, args=(_free_port(), str(root)), nprocs=WORLD, join=True)
    return root


def seen(root: Path, rank: int) -> dict:
    return json.loads((root / f"rank{rank}.json").read_text())


def test_every_rank_writes_part_of_one_deduplicated_copy(written):
    checkpoint = CheckpointStore(written).committed()[-1]
    assert (checkpoint.step, seen(written, 0)["first"], seen(written, 1)["first"]) == (3, "committed", "none")
    names = {p.name for p in checkpoint.path.iterdir()}
    assert names == {"meta.json", ".metadata", "extra.pt", "__0_0.distcp", "__1_0.distcp"}
    storage = FileSystemReader(checkpoint.path).read_metadata().storage_data
    by_file: dict[str, list[str]] = {}
    for index, info in storage.items():
        by_file.setdefault(info.relative_path, []).append(index.fqn)
    # each tensor is stored once (DCP's planner deduplicates the replicas), and both ranks wrote some
    fqns = [fqn for fqns in by_file.values() for fqn in fqns]
    assert len(fqns) == len(set(fqns))
    assert set(by_file) == {"__0_0.distcp", "__1_0.distcp"}
    assert "model.0.weight" in fqns and "optimizer.state.0.weight.exp_avg" in fqns


def test_meta_lists_every_file_with_the_hash_of_the_bytes_written(written):
    checkpoint = CheckpointStore(written).committed()[-1]
    meta = json.loads((checkpoint.path / "meta.json").read_text())
    assert meta["checkpoint_format"] == "sharded" and meta["world_size"] == 2
    assert set(meta["files"]) == {".metadata", "extra.pt", "__0_0.distcp", "__1_0.distcp"}
    for name, recorded in meta["files"].items():
        data = (checkpoint.path / name).read_bytes()
        assert recorded == {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}, name
    assert CheckpointStore(written).verify(checkpoint)["step"] == 3


def test_loads_at_another_world_size_exactly(written):
    checkpoint = CheckpointStore(written).committed()[-1]
    state = sharded.read(checkpoint)  # no process group: one process reads what two wrote
    assert (state["step"], state["rng"]) == (3, ["rank0", "rank1"])
    model, optimizer = build()  # untrained, no optimizer state yet: a fresh worker
    model.load_state_dict(state["model"])
    sharded.restore_optimizer(model, optimizer, state["optimizer"])
    expected = torch.load(written / "expected.pt", weights_only=True)
    for name, tensor in expected["model"].items():
        assert torch.equal(model.state_dict()[name], tensor), name
    for index, buffers in expected["optimizer"]["state"].items():
        for key, value in buffers.items():
            assert torch.equal(optimizer.state_dict()["state"][index][key], value), (index, key)
    assert optimizer.state_dict()["param_groups"] == expected["optimizer"]["param_groups"]


def test_a_write_that_fails_on_one_rank_fails_on_all_and_leaves_nothing(written):
    # Nobody waits forever on a peer that failed, and rank 0 cleans the temporary directory up.
    assert seen(written, 0)["disk_full_on_rank1"] == "CheckpointWriteError"
    assert seen(written, 1)["disk_full_on_rank1"] == "CheckpointWriteError"
    assert (seen(written, 0)["after_failure"], seen(written, 1)["after_failure"]) == ("committed", "none")


def test_a_fenced_group_does_not_commit(written):
    assert (seen(written, 0)["fenced"], seen(written, 1)["fenced"]) == ("StaleGenerationError", "none")
    assert [c.step for c in CheckpointStore(written).committed()] == [5, 3]
    assert not [p for p in written.iterdir() if p.name.startswith(".tmp")]


@pytest.mark.parametrize("damage", ["truncate_shard", "remove_shard", "flip_a_byte_of_the_metadata"])
def test_a_damaged_sharded_checkpoint_fails_verification(written, tmp_path, damage):
    source = CheckpointStore(written).committed()[-1]
    copy = tmp_path / source.path.name
    copy.mkdir()
    for file in source.path.iterdir():
        (copy / file.name).write_bytes(file.read_bytes())
    if damage == "truncate_shard":
        shard = copy / "__1_0.distcp"
        shard.write_bytes(shard.read_bytes()[:100])
    elif damage == "remove_shard":
        (copy / "__0_0.distcp").unlink()
    else:
        data = bytearray((copy / ".metadata").read_bytes())
        data[len(data) // 2] ^= 0xFF
        (copy / ".metadata").write_bytes(bytes(data))
    store = CheckpointStore(tmp_path)
    with pytest.raises(CorruptCheckpointError):
        store.verify(store.committed()[0])


def test_unreadable_dcp_files_are_a_corrupt_checkpoint_not_a_crash(written, tmp_path):
    source = CheckpointStore(written).committed()[-1]
    copy = tmp_path / source.path.name
    copy.mkdir()
    for file in source.path.iterdir():
        (copy / file.name).write_bytes(file.read_bytes())
    (copy / ".metadata").write_bytes(b"not a pickle")
    with pytest.raises(CorruptCheckpointError, match="reading the sharded checkpoint failed"):
        sharded.read(CheckpointStore(tmp_path).committed()[0])



class _RunsCode:
    """What a hostile writer could put in .metadata: unpickling it calls ``exec``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return exec, (f"open({str(self.marker)!r}, 'w').write('ran')",)


def test_the_dcp_metadata_is_data_never_code_to_run(written, tmp_path):
    # Regression (issue 23): DCP reads .metadata with pickle.load (torch 2.13, filesystem.py
    # read_metadata), so whoever could write the shared store could run code in every worker that
    # resumed: its sha256 in meta.json guards against damage, not against a writer who updates both.
    import pickle

    source = CheckpointStore(written).committed()[-1]
    copy = tmp_path / "store" / source.path.name
    copy.mkdir(parents=True)
    for file in source.path.iterdir():
        (copy / file.name).write_bytes(file.read_bytes())
    marker = tmp_path / "ran"
    (copy / ".metadata").write_bytes(pickle.dumps(_RunsCode(marker)))
    meta = json.loads((copy / "meta.json").read_text())
    data = (copy / ".metadata").read_bytes()
    meta["files"][".metadata"] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    (copy / "meta.json").write_text(json.dumps(meta))
    store = CheckpointStore(tmp_path / "store")
    store.verify(store.committed()[0])  # consistent: only the content is hostile
    with pytest.raises(CorruptCheckpointError, match="exec"):
        sharded.read(store.committed()[0])
    assert not marker.exists(), "unpickling the metadata ran code"
    assert store.load_latest() is None  # skipped, never raised
