"""ImageNet-style training (the blog's job): a torchvision ResNet on an ImageFolder, elastic.

In a pod (the controller prepends the rendezvous arguments)::

    python -m elastic_trainer.launcher --nnodes=1:4 --nproc_per_node=1 \\
        examples/imagenet.py --data=/mnt/shared/data/tiny-imagenet-200 \\
        --checkpoint-dir=/mnt/shared/output/imagenet --total-steps=100000 --global-batch-size=256

``--data`` holds ``train/<class>/...`` images (tiny-imagenet's layout works as it is). The global
batch is fixed whatever the number of nodes, so the learning rate needs no change when nodes
come and go; its default follows the linear scaling rule, 0.1 per 256 samples (Goyal et al. 2017).
torchvision comes with the image's base and is imported only when the job runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from elastic_trainer.trainer import TrainConfig, train
from torch import nn


class ImageFolderTask:
    def __init__(self, data: Path, arch: str, lr: float, momentum: float, weight_decay: float, image_size: int):
        try:
            from torchvision import datasets, models, transforms
        except ImportError as exc:  # the CPU CI environment has no torchvision; the image has
            raise SystemExit(f"imagenet example: torchvision is required ({exc})") from exc
        normalize = transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
        self.dataset = datasets.ImageFolder(
            str(data / "train"),
            transforms.Compose([
                transforms.RandomResizedCrop(image_size),
                transforms.RandomHorizontalFlip(),
                transforms.ToTensor(),
                normalize,
            ]),
        )
        self._models = models
        self.arch, self.lr, self.momentum, self.weight_decay = arch, lr, momentum, weight_decay

    def build_model(self) -> nn.Module:
        return self._models.get_model(self.arch, weights=None, num_classes=len(self.dataset.classes))

    def build_optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.SGD(model.parameters(), lr=self.lr, momentum=self.momentum,
                               weight_decay=self.weight_decay)

    def build_scheduler(self, optimizer: torch.optim.Optimizer, total_steps: int):
        # per global step, so the schedule is unaffected by membership changes
        return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=max(total_steps, 1))

    def loss_sum(self, model: nn.Module, batch, device: torch.device) -> torch.Tensor:
        images, targets = batch
        images = images.to(device, non_blocking=True)
        targets = targets.to(device, non_blocking=True)
        return nn.functional.cross_entropy(model(images), targets, reduction="sum")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    TrainConfig.add_arguments(parser)
    parser.add_argument("--data", type=Path, required=True, help="ImageFolder root with a train/ directory")
    parser.add_argument("--arch", default="resnet18", help="a torchvision model name")
    parser.add_argument("--lr", type=float, default=None, help="default: 0.1 x global batch / 256")
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--weight-decay", type=float, default=1e-4)
    parser.add_argument("--image-size", type=int, default=224, help="64 suits tiny-imagenet")
    parser.set_defaults(num_workers=4, progress_every=10)
    args = parser.parse_args(argv)
    lr = args.lr if args.lr is not None else 0.1 * args.global_batch_size / 256
    task = ImageFolderTask(args.data, args.arch, lr, args.momentum, args.weight_decay, args.image_size)
    return train(task, TrainConfig.from_args(args))


if __name__ == "__main__":
    sys.exit(main())
