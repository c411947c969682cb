"""The in-place step's pieces that need no Lighthouse (issue 14): the collective's backend and the gradient buffer.

The real runs (three groups, a kill, a heal, the same weights on every group) are test_inplace_runs.py.
"""

from __future__ import annotations

import re

import pytest
import torch
from elastic_trainer.inplace import group, settings
from torch import nn


@pytest.mark.parametrize(
    ("value", "device", "expected"),
    [
        (None, "cpu", "gloo"),
        (None, "cuda", "nccl"),
        ("gloo", "cuda", "gloo"),  # two groups on one GPU (bench/goodput.py --overhead)
        ("nccl", "cuda", "nccl"),
        ("nccl", "cpu", "TORCHFLEET_INPLACE_BACKEND=nccl needs a CUDA device"),
        ("mpi", "cpu", "TORCHFLEET_INPLACE_BACKEND='mpi': must be nccl or gloo"),
    ],
)
def test_backend(value, device, expected, monkeypatch):
    if value is None:
        monkeypatch.delenv(settings.ENV_BACKEND, raising=False)
    else:
        monkeypatch.setenv(settings.ENV_BACKEND, value)
    if expected in ("gloo", "nccl"):
        assert settings.backend(torch.device(device)) == expected
    else:
        with pytest.raises(ValueError, match=re.escape(expected)):
            settings.backend(torch.device(device))


class TwoHeads(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.used, self.unused = nn.Linear(3, 2), nn.Linear(3, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.used(x)


def bound_run(model: nn.Module):
    run = group._InplaceRun.__new__(group._InplaceRun)  # no Lighthouse, no Manager: only the buffer
    run.model = model
    return run._bind_gradients()


def test_backward_lands_in_the_one_buffer_and_an_unreached_parameter_has_a_zero_gradient():
    torch.manual_seed(0)
    model = TwoHeads()
    flat = bound_run(model)
    x = torch.randn(4, 3)
    for _ in range(2):  # a second step: zeroing the buffer is the zero_grad
        flat.zero_()
        model(x).sum().backward()
    expected = torch.autograd.grad(model(x).sum(), list(model.used.parameters()))
    storage = flat.untyped_storage().data_ptr()
    assert all(p.grad.untyped_storage().data_ptr() == storage for p in model.parameters())
    assert torch.equal(model.used.weight.grad, expected[0]) and torch.equal(model.used.bias.grad, expected[1])
    assert model.unused.weight.grad is not None and not model.unused.weight.grad.any()  # the optimizer sees it
    # then the loss sum, sample count and time-limit votes (group._TAIL)
    assert flat.numel() == sum(p.numel() for p in model.parameters()) + 3
    assert torch.equal(flat[:6], model.used.weight.grad.reshape(-1))


def test_a_model_of_mixed_dtypes_is_refused_naming_them():
    model = TwoHeads()
    model.unused.double()
    with pytest.raises(ValueError, match=r"one dtype and device.*float64"):
        bound_run(model)


def test_a_channels_last_weight_gets_a_gradient_of_its_layout_in_the_buffer():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.Flatten(), nn.LazyLinear(2))
    model(torch.randn(1, 3, 6, 6))  # materialise the lazy layer
    model = model.to(memory_format=torch.channels_last)
    reference = [p.detach().clone().requires_grad_() for p in model.parameters()]
    flat = bound_run(model)
    x = torch.randn(2, 3, 6, 6).to(memory_format=torch.channels_last)
    model(x).sum().backward()
    conv = model[0].weight
    assert conv.grad.stride() == conv.stride() != conv.contiguous().stride()
    assert conv.grad.untyped_storage().data_ptr() == flat.untyped_storage().data_ptr()
    expected = torch.func.functional_call(model, dict(zip([n for n, _ in model.named_parameters()], reference,
                                                         strict=True)), (x,)).sum()
    grads = torch.autograd.grad(expected, reference)
    assert all(torch.allclose(p.grad, g) for p, g in zip(model.parameters(), grads, strict=True))


def test_the_store_prunes_in_a_hurry_once_a_stop_is_requested(tmp_path, monkeypatch):
    # A spot notice during a periodic write's prune must end its hashing: the stop's save waits for it
    # (checkpoint.py, in_a_hurry), in this mode as in the restart mode.
    import signal
    from types import SimpleNamespace

    from elastic_trainer.signals import StopRequest
    from elastic_trainer.trainer import TrainConfig

    for name, value in {"TORCHFLEET_REPLICA_GROUP": "0", "TORCHFLEET_REPLICA_GROUPS": "2",
                        "TORCHFT_LIGHTHOUSE": "http://127.0.0.1:1"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("POD_IP", raising=False)
    request = StopRequest()
    run = group._InplaceRun(SimpleNamespace(dataset=list(range(64))),
                              TrainConfig(checkpoint_dir=tmp_path, total_steps=4, global_batch_size=8), request)
    assert not run.store.in_a_hurry()
    request.signum = signal.SIGTERM
    assert run.store.in_a_hurry()
