"""The example tasks' own contracts: loss is a sum over samples in fp32, data made from the seed,
the GPT presets' sizes, imagenet's precision and synthetic images (with a stand-in for
torchvision where it is not installed: the CPU CI venv has none)."""

from __future__ import annotations

import importlib.util
import sys
import types

import pytest
import torch
from elastic_trainer.local import IMAGE_DIR
from torch import nn

CPU = torch.device("cpu")


def load_example(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", IMAGE_DIR / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def gpt():
    return load_example("gpt")


def test_gpt_presets_have_the_size_they_claim(gpt):
    tiny = gpt.SIZES["tiny"]
    assert sum(p.numel() for p in gpt.GPT(tiny).parameters()) == tiny.parameters()
    big = gpt.SIZES["368m"]
    assert round(big.parameters() / 1e6) == 368
    # fp32 weights + AdamW's two moments: the 4.4 GB state of README.md's GPU figures
    assert round(big.parameters() * 4 * 3 / 1e9, 1) == 4.4


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_gpt_loss_is_a_sum_of_per_sample_losses_in_fp32(gpt, precision):
    task = gpt.GPTTask(gpt.SIZES["tiny"], samples=8, seed=0, lr=1e-3, weight_decay=0.1, precision=precision)
    model = task.build_model().eval()
    batch = task.dataset.tensors
    whole = task.loss_sum(model, batch, CPU)
    parts = sum(task.loss_sum(model, (batch[0][i : i + 1],), CPU) for i in range(8))
    assert whole.dtype == torch.float32
    assert torch.allclose(whole, parts, rtol=1e-2 if precision == "bf16" else 1e-5)


def test_gpt_data_and_training(gpt):
    size = gpt.SIZES["tiny"]
    first, again = gpt.sequences(16, size, seed=3), gpt.sequences(16, size, seed=3)
    assert torch.equal(first.tensors[0], again.tensors[0])  # every process makes the same data
    assert first.tensors[0].shape == (16, size.context + 1)
    task = gpt.GPTTask(size, samples=64, seed=0, lr=3e-3, weight_decay=0.1)
    model = task.build_model()
    optimizer = task.build_optimizer(model)
    assert not optimizer.defaults["fused"]  # fused AdamW only with the parameters on a GPU
    losses = []
    for _ in range(15):
        loss = task.loss_sum(model, (task.dataset.tensors[0][:16],), CPU) / 16
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0]  # the sequences are learnable


@pytest.fixture
def imagenet(monkeypatch):
    module = load_example("imagenet")
    if module.torchvision is None:  # a stand-in: get_model returns a small conv net
        def get_model(arch, weights, num_classes):
            return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                                 nn.Flatten(), nn.Linear(4, num_classes))

        monkeypatch.setattr(module, "torchvision", types.SimpleNamespace(models=types.SimpleNamespace(
            get_model=get_model)))
    return module


def test_synthetic_images_are_made_from_the_seed(imagenet):
    one, two = (imagenet.synthetic_images(6, 16, 10, seed=1) for _ in range(2))
    assert torch.equal(one.tensors[0], two.tensors[0]) and torch.equal(one.tensors[1], two.tensors[1])
    assert one.tensors[0].dtype == torch.uint8 and one.tensors[0].shape == (6, 3, 16, 16)
    assert not torch.equal(one.tensors[0], imagenet.synthetic_images(6, 16, 10, seed=2).tensors[0])


@pytest.mark.parametrize(("precision", "channels_last"), [("fp32", False), ("bf16", True)])
def test_imagenet_step_in_each_precision(imagenet, precision, channels_last):
    data = imagenet.synthetic_images(4, 16, 10, seed=0)
    task = imagenet.ImageTask(data, 10, "resnet18", 0.1, 0.9, 1e-4, precision, channels_last)
    model = task.build_model().eval()
    assert task.precision.bf16 is (precision == "bf16")
    conv = next(m for m in model.modules() if isinstance(m, nn.Conv2d))
    assert conv.weight.is_contiguous(memory_format=torch.channels_last) is channels_last
    images, labels = data.tensors
    loss = task.loss_sum(model, (images, labels), CPU)
    assert loss.dtype == torch.float32
    # uint8 images are normalised on the device as ToTensor + Normalize would
    mean, std = torch.tensor(imagenet.MEAN).view(1, 3, 1, 1), torch.tensor(imagenet.STD).view(1, 3, 1, 1)
    with task.precision.autocast(CPU):
        logits = model((images.float() / 255 - mean) / std)
    expected = nn.functional.cross_entropy(logits.float(), labels, reduction="sum")
    assert torch.allclose(loss, expected, rtol=1e-2 if precision == "bf16" else 1e-5)


def test_imagenet_needs_a_dataset_or_synthetic_images(imagenet, capsys):
    with pytest.raises(SystemExit) as exited:
        imagenet.main(["--checkpoint-dir=/nonexistent", "--total-steps=1", "--global-batch-size=2"])
    assert exited.value.code == 2
    assert "one of the arguments --data --synthetic-images is required" in capsys.readouterr().err


def test_imagenet_refuses_bad_synthetic_sizes(imagenet, capsys):
    with pytest.raises(SystemExit) as exited:
        imagenet.main(["--checkpoint-dir=/nonexistent", "--total-steps=1", "--global-batch-size=2",
                       "--synthetic-images=4", "--image-size=2"])
    assert exited.value.code == 2
    assert "--image-size=2: must be at least 8" in capsys.readouterr().err
