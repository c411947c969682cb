"""The real trainer in-process, for the tests of its loop, checkpoints and resume.

One gloo rank (world size 1) runs the real ``_Run``; a test simulates other ranks by replacing
its two collectives. The ``group`` fixture is offered to tests/training_image by its conftest.py::

    assert _Run(Task(), config(tmp_path), StopRequest()).run() == 0
    steps = [e["step"] for e in printed(capsys, "step")]
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator

import pytest
import torch
import torch.distributed as dist
from elastic_trainer.events import PREFIX
from elastic_trainer.signals import StopRequest
from elastic_trainer.train_config import TrainConfig
from torch import nn
from torch.utils.data import TensorDataset


class Task:
    """A tiny regression with dropout (so RNG state matters) and a step schedule.

    With ``stop`` and ``stop_at_call``: a spot notice (SIGTERM) arrives during that forward pass.
    """

    def __init__(self, stop: StopRequest | None = None, stop_at_call: int = 0, hidden: int = 8) -> None:
        generator = torch.Generator().manual_seed(3)
        inputs = torch.randn(64, 4, generator=generator)
        self.dataset = TensorDataset(inputs, inputs.sum(1, keepdim=True))
        self.stop, self.stop_at_call, self.calls, self.hidden = stop, stop_at_call, 0, hidden

    def build_model(self) -> nn.Module:
        return nn.Sequential(nn.Linear(4, self.hidden), nn.Dropout(0.2), nn.Linear(self.hidden, 1))

    def build_optimizer(self, model):
        return torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def build_scheduler(self, optimizer, total_steps):
        return torch.optim.lr_scheduler.StepLR(optimizer, step_size=3)

    def loss_sum(self, model, batch, device):
        self.calls += 1
        if self.calls == self.stop_at_call:
            self.stop.signum = signal.SIGTERM
        inputs, targets = (t.to(device) for t in batch)
        return nn.functional.mse_loss(model(inputs), targets, reduction="sum")


@pytest.fixture
def group() -> Iterator[None]:
    """A process group of one gloo rank, as torchrun would have made it."""
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def config(tmp_path, **overrides) -> TrainConfig:
    """6 steps of a global batch of 8, a checkpoint every 2 under ``tmp_path/ckpt``."""
    return TrainConfig(**{"checkpoint_dir": tmp_path / "ckpt", "total_steps": 6, "global_batch_size": 8,
                          "checkpoint_every": 2, "keep_checkpoints": 10, **overrides})


def printed(capsys, kind: str | None = None) -> list[dict]:
    """The progress events printed since the last read, in order; only those of ``kind`` if given."""
    lines = capsys.readouterr().out.splitlines()
    found = [json.loads(line[len(PREFIX):]) for line in lines if line.startswith(PREFIX)]
    return [e for e in found if kind is None or e["ev"] == kind]


def position(events: list[dict], kind: str, **fields) -> int:
    """Index of the first event of ``kind`` with these fields."""
    return next(i for i, e in enumerate(events) if e["ev"] == kind and all(e.get(k) == v for k, v in fields.items()))
