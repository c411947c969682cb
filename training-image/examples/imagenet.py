"""ImageNet-style training (the blog's job): a torchvision ResNet on an ImageFolder, elastic.

In a pod (the controller prepends the rendezvous arguments)::

    python -m elastic_trainer.launcher --nnodes=1:4 --nproc_per_node=1 \\
        examples/imagenet.py --data=/mnt/shared/data/tiny-imagenet-200 \\
        --checkpoint-dir=/mnt/shared/output/imagenet --total-steps=100000 --global-batch-size=256

``--data`` holds ``train/<class>/...`` images (tiny-imagenet's layout works as it is);
``--synthetic-images=N`` trains on N random images held in memory instead (benchmarks, GPU tests:
no dataset needed, no decoding cost). The global batch is fixed whatever the number of nodes, so
the learning rate needs no change when nodes come and go; its default follows the linear scaling
rule, 0.1 per 256 samples (Goyal et al. 2017). On GPUs that compute bf16 natively the forward pass
runs under bf16 autocast with channels_last (ResNet-50 on an H100: 1805 -> 3696 img/s, docs/benchmarks.md);
``--precision=fp32`` and ``--no-channels-last`` turn them off. torchvision comes with the image's
base; without it the script says so when it runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from elastic_trainer.precision import Precision
from elastic_trainer.trainer import TrainConfig, train
from torch import nn
from torch.utils.data import Dataset, TensorDataset

# At the top level, so that the launcher's forkserver preloads it (it parses this file's imports):
# `import torchvision` took ~7 s on a GPU machine, on every worker restart otherwise.
try:
    import torchvision
except ImportError as exc:  # the CPU CI environment has no torchvision; the image has
    torchvision = None
    _TORCHVISION_MISSING = str(exc)

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def _torchvision():
    if torchvision is None:
        raise SystemExit(f"imagenet example: torchvision is required ({_TORCHVISION_MISSING})")
    return torchvision


def image_folder(data: Path, image_size: int) -> tuple[Dataset, int]:
    from torchvision import datasets, transforms

    dataset = datasets.ImageFolder(
        str(data / "train"),
        transforms.Compose([
            transforms.RandomResizedCrop(image_size),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            transforms.Normalize(mean=MEAN, std=STD),
        ]),
    )
    return dataset, len(dataset.classes)


def synthetic_images(count: int, image_size: int, num_classes: int, seed: int) -> Dataset:
    """``count`` random uint8 images and labels, the same in every process (made from the seed).

    uint8 in memory and in the batch: a quarter of float32's memory and host-to-device copy;
    ``loss_sum`` normalises on the device as ``ToTensor`` + ``Normalize`` would.
    """
    generator = torch.Generator().manual_seed(seed + 4242)
    images = torch.randint(0, 256, (count, 3, image_size, image_size), dtype=torch.uint8, generator=generator)
    labels = torch.randint(0, num_classes, (count,), generator=generator)
    return TensorDataset(images, labels)


class ImageTask:
    def __init__(self, dataset: Dataset, num_classes: int, arch: str, lr: float, momentum: float,
                 weight_decay: float, precision: str = "auto", channels_last: bool | None = None):
        self._models = _torchvision().models
        self.dataset, self.num_classes = dataset, num_classes
        self.arch, self.lr, self.momentum, self.weight_decay = arch, lr, momentum, weight_decay
        self._choice = (precision, channels_last)
        self.precision: Precision | None = None  # resolved in build_model, after the CUDA device is set
        self._norm: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = {}

    def build_model(self) -> nn.Module:
        self.precision = Precision.resolve(*self._choice)
        model = self._models.get_model(self.arch, weights=None, num_classes=self.num_classes)
        # .to(device) later keeps the memory format (preserve_format)
        return model.to(memory_format=self.precision.memory_format)

    def build_optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.SGD(model.parameters(), lr=self.lr, momentum=self.momentum,
                               weight_decay=self.weight_decay)

    def build_scheduler(self, optimizer: torch.optim.Optimizer, total_steps: int):
        # per global step, so the schedule is unaffected by membership changes
        return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=max(total_steps, 1))

    def _normalization(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        # made once per device: a blocking host-to-device copy in every step would make the CPU
        # wait for the GPU's queue each step
        if device not in self._norm:
            scale = torch.tensor([MEAN, STD]).view(2, 1, 3, 1, 1) * 255
            self._norm[device] = tuple(scale.to(device))
        return self._norm[device]

    def loss_sum(self, model: nn.Module, batch, device: torch.device) -> torch.Tensor:
        precision = self.precision or Precision.resolve(*self._choice)
        images, targets = batch
        images = images.to(device, non_blocking=True).contiguous(memory_format=precision.memory_format)
        targets = targets.to(device, non_blocking=True)
        if images.dtype == torch.uint8:  # synthetic images: ToTensor + Normalize, on the device
            mean, std = self._normalization(device)
            images = (images.float() - mean) / std
        with precision.autocast(device):
            logits = model(images)
        # the sum in fp32 whatever the forward ran in: the trainer divides it by the global batch
        return nn.functional.cross_entropy(logits.float(), targets, reduction="sum")


def task_and_config(argv: list[str] | None = None) -> tuple[ImageTask, TrainConfig]:
    """The task and the trainer's settings from the command line (bench/gpu.py's bare loop uses it too)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    TrainConfig.add_arguments(parser)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--data", type=Path, help="ImageFolder root with a train/ directory")
    source.add_argument("--synthetic-images", type=int, metavar="N",
                        help="N random images in memory instead of a dataset (benchmarks, tests)")
    parser.add_argument("--num-classes", type=int, default=1000, help="with --synthetic-images")
    parser.add_argument("--arch", default="resnet18", help="a torchvision model name")
    parser.add_argument("--lr", type=float, default=None, help="default: 0.1 x global batch / 256")
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--weight-decay", type=float, default=1e-4)
    parser.add_argument("--image-size", type=int, default=224, help="64 suits tiny-imagenet")
    Precision.add_arguments(parser)
    parser.set_defaults(num_workers=4, progress_every=10)
    args = parser.parse_args(argv)
    for flag, value, minimum in (("--synthetic-images", args.synthetic_images, 1),
                                 ("--num-classes", args.num_classes, 2), ("--image-size", args.image_size, 8)):
        if value is not None and value < minimum:
            parser.error(f"{flag}={value}: must be at least {minimum}")
    lr = args.lr if args.lr is not None else 0.1 * args.global_batch_size / 256
    _torchvision()  # before building a dataset: a clear error, not a traceback
    if args.data is not None:
        dataset, num_classes = image_folder(args.data, args.image_size)
    else:
        dataset, num_classes = synthetic_images(args.synthetic_images, args.image_size, args.num_classes,
                                                args.seed), args.num_classes
    task = ImageTask(dataset, num_classes, args.arch, lr, args.momentum, args.weight_decay,
                     args.precision, args.channels_last)
    return task, TrainConfig.from_args(args)


def main(argv: list[str] | None = None) -> int:
    return train(*task_and_config(argv))


if __name__ == "__main__":
    sys.exit(main())
