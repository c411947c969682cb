"""Your own training code on Torchfleet: a Task for the elastic_trainer library (README.md, "Your
own training code"). Copy this file, replace the dataset and the model, keep the rest.

    python -m elastic_trainer.launcher --standalone --nproc_per_node=1 train.py \\
        --checkpoint-dir=/tmp/ckpt --total-steps=100 --global-batch-size=64

The trainer does the elastic part: it joins the job, splits each global batch over whoever is
there, checkpoints to --checkpoint-dir (the job's folder on the shared store, the default in a
job `torchfleet submit` made), resumes exactly after a spot interruption and stops cleanly on
SIGTERM. A Task only says what to train.
"""

from __future__ import annotations

import argparse
import sys

import torch
from elastic_trainer.trainer import TrainConfig, train
from torch import nn
from torch.utils.data import TensorDataset


class SpiralClassifier:
    """The Task: ``dataset``, ``build_model``, ``build_optimizer``, ``build_scheduler``, ``loss_sum``."""

    def __init__(self, classes: int, samples: int, lr: float, seed: int) -> None:
        # Every process builds the same data from the seed; the trainer gives each its share.
        generator = torch.Generator().manual_seed(seed)
        label = torch.randint(classes, (samples,), generator=generator)
        radius = torch.rand(samples, generator=generator)
        angle = radius * 4 + label * (2 * torch.pi / classes) + 0.2 * torch.randn(samples, generator=generator)
        points = torch.stack([radius * angle.cos(), radius * angle.sin()], dim=1)
        self.dataset = TensorDataset(points, label)
        self.classes = classes
        self.lr = lr

    def build_model(self) -> nn.Module:
        return nn.Sequential(nn.Linear(2, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, self.classes))

    def build_optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.AdamW(model.parameters(), lr=self.lr)

    def build_scheduler(self, optimizer: torch.optim.Optimizer, total_steps: int):
        return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=max(total_steps, 1))

    def loss_sum(self, model: nn.Module, batch, device: torch.device) -> torch.Tensor:
        # A sum over this rank's samples, not a mean: the trainer divides by the global batch,
        # so the gradient is the same at any world size.
        points, labels = (t.to(device) for t in batch)
        return nn.functional.cross_entropy(model(points), labels, reduction="sum")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    TrainConfig.add_arguments(parser)  # --checkpoint-dir, --total-steps, --global-batch-size, ...
    parser.add_argument("--classes", type=int, default=3)
    parser.add_argument("--samples", type=int, default=4096)
    parser.add_argument("--lr", type=float, default=1e-2)
    args = parser.parse_args(argv)
    return train(SpiralClassifier(args.classes, args.samples, args.lr, args.seed), TrainConfig.from_args(args))


if __name__ == "__main__":
    sys.exit(main())
