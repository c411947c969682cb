"""Mixed precision choices (precision.py): what auto picks, and what the forward pass runs in."""

from __future__ import annotations

import pytest
import torch
from elastic_trainer.precision import Precision
from torch import nn


@pytest.mark.parametrize(
    ("precision", "channels_last", "cuda", "bf16_supported", "expected"),
    [
        ("auto", None, True, True, (True, True)),  # an A100/H100: both on
        ("auto", None, True, False, (False, True)),  # a T4/V100 would emulate bf16, slower than fp32
        ("auto", None, False, False, (False, False)),  # CPU: fp32, contiguous
        ("fp32", None, True, True, (False, True)),
        ("auto", False, True, True, (True, False)),  # --no-channels-last
        ("bf16", None, False, False, (True, False)),  # asked for on a CPU: CPU autocast
        ("fp32", True, False, False, (False, True)),
    ],
)
def test_resolve(precision, channels_last, cuda, bf16_supported, expected):
    chosen = Precision.resolve(precision, channels_last, cuda=cuda, bf16_supported=bf16_supported)
    assert (chosen.bf16, chosen.channels_last) == expected


@pytest.mark.parametrize(
    ("precision", "cuda", "message"),
    [("bf16", True, "--precision=bf16: this GPU does not compute bf16 natively"),
     ("fp16", False, "precision='fp16': expected one of auto, bf16, fp32")],
)
def test_refused_choices_say_why(precision, cuda, message):
    with pytest.raises(ValueError, match=message):
        Precision.resolve(precision, cuda=cuda, bf16_supported=False)


def test_this_machine_resolves_auto_from_its_device():
    chosen = Precision.resolve()
    assert chosen.channels_last is torch.cuda.is_available()


@pytest.mark.parametrize(("bf16", "dtype"), [(True, torch.bfloat16), (False, torch.float32)])
def test_the_forward_pass_runs_in_the_chosen_precision(bf16, dtype):
    layer = nn.Linear(4, 3)
    with Precision(bf16=bf16, channels_last=False).autocast(torch.device("cpu")):
        out = layer(torch.randn(2, 4))
    assert out.dtype == dtype
    assert layer.weight.dtype == torch.float32  # the weights, optimizer and checkpoint stay fp32


def test_memory_format():
    assert Precision(bf16=False, channels_last=True).memory_format is torch.channels_last
    assert Precision(bf16=False, channels_last=False).memory_format is torch.contiguous_format
