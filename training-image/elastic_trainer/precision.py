"""Mixed precision for a task: bf16 autocast and channels_last on GPUs that support them.

Measured on one H100 80GB (torch 2.11 + CUDA 13, README.md's GPU figures): ResNet-50 trained at
1805 img/s in fp32 and 3696 img/s with bf16 autocast + channels_last, the same step otherwise.
bf16 keeps fp32's exponent range, so unlike fp16 it needs no loss scaling: the optimizer, the
weights and the checkpoint stay fp32, and a run can resume with a different precision.

``auto`` (the default) turns both on where they pay: bf16 only on a GPU that computes it natively
(Ampere and newer; ``is_bf16_supported(including_emulation=False)``: a T4 or V100 would emulate it,
slower than fp32), channels_last on any CUDA device. On a CPU, ``auto`` is fp32 and contiguous.
Resolve after ``torch.cuda.set_device`` (the task's ``build_model`` runs then): the check
initialises CUDA on the current device, and every rank of a node would otherwise do it on GPU 0.
"""

from __future__ import annotations

import argparse
import contextlib
from dataclasses import dataclass

import torch

PRECISIONS = ("auto", "bf16", "fp32")


def bf16_native() -> bool:
    """The current CUDA device computes bf16 natively (False without CUDA)."""
    if not torch.cuda.is_available():
        return False
    try:
        return torch.cuda.is_bf16_supported(including_emulation=False)
    except TypeError:  # torch before 2.4 had no emulation path to exclude
        return torch.cuda.is_bf16_supported()


@dataclass(frozen=True)
class Precision:
    bf16: bool
    channels_last: bool

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser, channels_last: bool = True) -> None:
        parser.add_argument("--precision", choices=PRECISIONS, default="auto",
                            help="auto: bf16 autocast on GPUs that compute bf16 natively, else fp32")
        if channels_last:
            parser.add_argument("--channels-last", action=argparse.BooleanOptionalAction, default=None,
                                help="NHWC images and conv weights (default: on with CUDA)")

    @classmethod
    def resolve(cls, precision: str = "auto", channels_last: bool | None = None, *,
                cuda: bool | None = None, bf16_supported: bool | None = None) -> Precision:
        """The choice for this process; ``cuda`` and ``bf16_supported`` default to the machine's."""
        if precision not in PRECISIONS:
            raise ValueError(f"precision={precision!r}: expected one of {', '.join(PRECISIONS)}")
        cuda = torch.cuda.is_available() if cuda is None else cuda
        if bf16_supported is None:
            bf16_supported = bf16_native() if cuda else False
        if precision == "bf16" and cuda and not bf16_supported:
            raise ValueError("--precision=bf16: this GPU does not compute bf16 natively (it needs Ampere or "
                             "newer); use --precision=fp32 or auto")
        bf16 = precision == "bf16" or (precision == "auto" and cuda and bf16_supported)
        return cls(bf16=bf16, channels_last=cuda if channels_last is None else channels_last)

    @property
    def memory_format(self) -> torch.memory_format:
        return torch.channels_last if self.channels_last else torch.contiguous_format

    def autocast(self, device: torch.device) -> contextlib.AbstractContextManager:
        """The forward pass's context: bf16 autocast, or nothing. The loss is then taken in fp32."""
        if not self.bf16:
            return contextlib.nullcontext()
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)

    def describe(self) -> str:
        return f"{'bf16 autocast' if self.bf16 else 'fp32'}, {'channels_last' if self.channels_last else 'contiguous'}"
