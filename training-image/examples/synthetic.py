"""A tiny synthetic regression job for CPUs: the demo's and the real-run tests' workload.

    python -m elastic_trainer.launcher --nnodes=1:2 --rdzv_endpoint=HOST:2379 --rdzv_id=demo \\
        examples/synthetic.py --checkpoint-dir=/mnt/shared/demo --total-steps=200 --global-batch-size=32

The data is generated from the seed, identically in every process, and the model has dropout,
so an exact resume needs the saved RNG states as well as the weights.

Its gradient is clipped to norm 1 unless ``--clip-grad-norm`` says otherwise: with SGD at lr 0.05
and momentum 0.9, global batches of 8 or fewer samples otherwise diverge to NaN within a few
hundred steps.

It also shows the library's optional hooks (training-image/README.md, "Outputs"): ``evaluate`` (the
mean squared error on held-out samples, every ``--eval-every`` steps and after the last) and
``scalars`` (the learning rate, beside the training loss in TensorBoard).
"""

from __future__ import annotations

import argparse
import sys

import torch
from elastic_trainer.trainer import TrainConfig, train
from torch import nn
from torch.utils.data import TensorDataset


class SyntheticRegression:
    def __init__(self, samples: int, features: int, seed: int) -> None:
        generator = torch.Generator().manual_seed(seed + 12345)
        inputs = torch.randn(samples, features, generator=generator)
        weights = torch.randn(features, 1, generator=generator)
        targets = torch.tanh(inputs @ weights) + 0.05 * torch.randn(samples, 1, generator=generator)
        self.dataset = TensorDataset(inputs, targets)
        held_out = torch.randn(256, features, generator=generator)  # drawn after the training data: it is unchanged
        self.held_out = (held_out, torch.tanh(held_out @ weights))
        self.features = features

    def build_model(self) -> nn.Module:
        return nn.Sequential(nn.Linear(self.features, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 1))

    def build_optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    def build_scheduler(self, optimizer: torch.optim.Optimizer, total_steps: int):
        return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=max(total_steps, 1))

    def loss_sum(self, model: nn.Module, batch, device: torch.device) -> torch.Tensor:
        inputs, targets = (t.to(device) for t in batch)
        return nn.functional.mse_loss(model(inputs), targets, reduction="sum")

    def evaluate(self, model: nn.Module, device: torch.device, step: int) -> dict[str, float]:
        inputs, targets = (t.to(device) for t in self.held_out)
        return {"mse": nn.functional.mse_loss(model(inputs), targets).item()}

    def scalars(self, model: nn.Module, optimizer: torch.optim.Optimizer, step: int) -> dict[str, float]:
        return {"train/lr": optimizer.param_groups[0]["lr"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    TrainConfig.add_arguments(parser)
    parser.set_defaults(clip_grad_norm=1.0)  # see the module docstring
    parser.add_argument("--samples", type=int, default=4096)
    parser.add_argument("--features", type=int, default=16)
    args = parser.parse_args(argv)
    return train(SyntheticRegression(args.samples, args.features, args.seed), TrainConfig.from_args(args))


if __name__ == "__main__":
    sys.exit(main())
