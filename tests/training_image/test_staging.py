"""The host snapshot a background checkpoint writes: a true copy, in buffers allocated once."""

from __future__ import annotations

import io
import logging
import threading
from collections import OrderedDict

import pytest
import torch
from elastic_trainer.store.staging import HostSnapshot
from torch import nn


def trained() -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 5), nn.BatchNorm1d(5), nn.Linear(5, 2))
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    model(torch.randn(8, 6)).sum().backward()
    optimizer.step()
    return model, optimizer


def state_of(model, optimizer) -> dict:
    return {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "rng": [torch.get_rng_state()],
            "sampler": {"epoch": 2, "order": [3, 1, 2]}, "step": 7, "pair": (1, torch.ones(2))}


def saved_bytes(obj) -> int:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return len(buffer.getvalue())


def test_the_snapshot_does_not_change_when_training_goes_on():
    # The reason it exists: the next optimizer step mutates the tensors in place while the
    # background writer is still serializing them.
    model, optimizer = trained()
    state = state_of(model, optimizer)
    snapshot = HostSnapshot().take(state)
    before = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    model(torch.randn(8, 6)).sum().backward()
    optimizer.step()
    state["sampler"]["order"].append(9)
    for name, tensor in snapshot["model"].items():
        assert torch.equal(tensor, before[name]), name
        assert not torch.equal(tensor, model.state_dict()[name]) or name.endswith("num_batches_tracked"), name
    assert snapshot["sampler"] == {"epoch": 2, "order": [3, 1, 2]}


def test_buffers_are_allocated_once_and_reused_while_the_layout_holds():
    model, optimizer = trained()
    host = HostSnapshot(reuse_from_bytes=0)  # these tensors are tiny: reuse all of them
    first = host.take(state_of(model, optimizer))
    pointer = first["model"]["0.weight"].data_ptr()
    model(torch.randn(8, 6)).sum().backward()
    optimizer.step()
    second = host.take(state_of(model, optimizer))
    assert host.allocations == 1 and second["model"]["0.weight"].data_ptr() == pointer
    assert torch.equal(second["model"]["0.weight"], model.state_dict()["0.weight"])
    grown = state_of(model, optimizer) | {"new": torch.zeros(3)}  # a new tensor: a new layout
    host.take(grown)
    assert host.allocations == 2


def test_structure_and_values_survive_a_save_and_load_round_trip():
    model, optimizer = trained()
    state = state_of(model, optimizer)
    snapshot = HostSnapshot().take(state)
    assert isinstance(snapshot["model"], OrderedDict)
    assert snapshot["model"]._metadata == state["model"]._metadata  # load_state_dict reads module versions
    assert isinstance(snapshot["pair"], tuple) and snapshot["step"] == 7
    buffer = io.BytesIO()
    torch.save(snapshot, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=True)
    fresh = nn.Sequential(nn.Linear(6, 5), nn.BatchNorm1d(5), nn.Linear(5, 2))
    fresh.load_state_dict(loaded["model"])
    fresh_optimizer = torch.optim.AdamW(fresh.parameters(), lr=0.1)
    fresh_optimizer.load_state_dict(loaded["optimizer"])
    for name, tensor in model.state_dict().items():
        assert torch.equal(fresh.state_dict()[name], tensor), name
    assert torch.equal(loaded["rng"][0], state["rng"][0])


def test_each_tensor_has_a_storage_of_its_own_size():
    # torch.save writes whole storages: views of one big arena would each write the whole arena.
    model, optimizer = trained()
    state = state_of(model, optimizer)
    snapshot = HostSnapshot(reuse_from_bytes=0).take(state)
    for tensor in snapshot["model"].values():
        assert tensor.untyped_storage().nbytes() == tensor.numel() * tensor.element_size()
    assert saved_bytes(snapshot) == saved_bytes(state)


def test_small_tensors_are_copied_afresh_and_never_change_the_arena():
    # RNG states are small and one per rank: a new world size must not cost a new arena
    host = HostSnapshot(reuse_from_bytes=8192)  # a CPU RNG state is 5056 bytes
    big = torch.randn(64, 64)
    first = host.take({"w": big, "rng": [torch.get_rng_state()]})
    second = host.take({"w": big, "rng": [torch.get_rng_state() for _ in range(3)]})
    assert host.allocations == 1 and second["w"].data_ptr() == first["w"].data_ptr()
    assert len(second["rng"]) == 3 and torch.equal(second["rng"][2], torch.get_rng_state())
    assert first["rng"][0].data_ptr() != second["rng"][0].data_ptr()


def test_the_arena_can_be_made_ahead_of_the_first_checkpoint():
    # plan() on the training thread (shapes only), allocate() on another: the first take only copies
    model, optimizer = trained()
    host = HostSnapshot(reuse_from_bytes=0)
    layout = host.plan(state_of(model, optimizer))
    allocating = threading.Thread(target=host.allocate, args=(layout,))
    allocating.start()
    allocating.join()
    assert host.allocations == 1
    snapshot = host.take(state_of(model, optimizer))
    assert host.allocations == 1 and torch.equal(snapshot["model"]["0.weight"], model.state_dict()["0.weight"])


def test_tied_weights_are_copied_once():
    shared = torch.randn(4, 3)
    snapshot = HostSnapshot().take({"embedding": shared, "head": shared, "other": shared.clone()})
    assert snapshot["embedding"] is snapshot["head"]
    assert snapshot["other"] is not snapshot["embedding"]


@pytest.mark.parametrize(
    "tensor",
    [torch.tensor(3.5), torch.empty(0, 4), torch.tensor([True, False]), torch.arange(5, dtype=torch.int64),
     torch.randn(3, 2).to(torch.bfloat16), torch.randn(4, 6).t()],
    ids=["scalar", "empty", "bool", "int64", "bfloat16", "non_contiguous"],
)
def test_odd_tensors_are_copied_exactly(tensor):
    copied = HostSnapshot().take({"t": tensor})["t"]
    assert copied.dtype == tensor.dtype and copied.shape == tensor.shape and torch.equal(copied, tensor)


def test_pinning_without_cuda_warns_once_and_still_copies(caplog):
    if torch.cuda.is_available():
        pytest.skip("this machine can pin")
    host = HostSnapshot(pin=True, reuse_from_bytes=0)
    with caplog.at_level(logging.WARNING, logger="elastic_trainer"):
        copied = host.take({"w": torch.ones(3)})
        host.take({"w": torch.zeros(3)})
    assert not host.pinned and torch.equal(copied["w"], torch.zeros(3))
    assert caplog.text.count("not pinned") == 1


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_tensors_are_copied_into_pinned_memory():
    source = {"w": torch.randn(1024, 1024, device="cuda"), "step": torch.tensor(3.0)}
    host = HostSnapshot(pin=True, reuse_from_bytes=0)
    copied = host.take(source)
    assert host.pinned and copied["w"].is_pinned() and copied["w"].device.type == "cpu"
    assert torch.equal(copied["w"], source["w"].cpu())
    source["w"].add_(1)  # the next step, queued after the copy on the same stream
    assert not torch.equal(copied["w"], source["w"].cpu())
    host.take(source)
    assert host.allocations == 1 and torch.equal(copied["w"], source["w"].cpu())


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_a_copy_beside_the_training_stream_holds_the_values_of_its_step():
    # The next step's forward and backward run while the parameters are copied; its update waits.
    weight = torch.randn(4096, 4096, device="cuda")  # 64 MiB: the copy is still running below
    statistics = torch.zeros(4096, device="cuda")  # a buffer a forward pass changes: copied at once
    expected = {"weight": weight.cpu(), "statistics": statistics.cpu()}
    host = HostSnapshot(pin=True)
    host.allocate(host.plan({"weight": weight, "statistics": statistics}))  # as the trainer does, ahead
    copied = host.take({"weight": weight, "statistics": statistics}, beside={weight.untyped_storage().data_ptr()})
    statistics.add_(1)  # the next forward, on the training stream
    weight @ weight  # ... and its compute, overlapping the copy
    host.before_update()
    weight.add_(1)  # the next optimizer step: queued behind the copy on the GPU
    host.ready()
    assert torch.equal(copied["weight"], expected["weight"]) and torch.equal(copied["statistics"],
                                                                             expected["statistics"])
    assert torch.equal(weight.cpu(), expected["weight"] + 1)
