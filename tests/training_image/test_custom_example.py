"""training-image/examples/train.py, the bring-your-own-code template (README "Your own training
code", issue 13): a Task the trainer accepts, whose loss is a per-sample sum and which learns; and,
marked slow, the exact command of its docstring through the real launcher, checkpoint included."""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import subprocess
import sys

import pytest
import torch
from elastic_trainer.local import IMAGE_DIR

EXAMPLE = IMAGE_DIR / "examples" / "train.py"
CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("example_train", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_same_seed_makes_the_same_data_in_every_process(example):
    one, two = (example.SpiralClassifier(3, 256, 1e-2, seed=5).dataset.tensors for _ in range(2))
    assert all(torch.equal(a, b) for a, b in zip(one, two, strict=True))
    other = example.SpiralClassifier(3, 256, 1e-2, seed=6).dataset.tensors
    assert not torch.equal(one[0], other[0])


def test_loss_is_a_sum_of_per_sample_losses(example):
    task = example.SpiralClassifier(3, 16, 1e-2, seed=0)
    model = task.build_model()
    points, labels = task.dataset.tensors
    whole = task.loss_sum(model, (points, labels), CPU)
    parts = sum(task.loss_sum(model, (points[i : i + 1], labels[i : i + 1]), CPU) for i in range(16))
    assert torch.allclose(whole, parts, rtol=1e-5)


def test_the_task_learns(example):
    task = example.SpiralClassifier(3, 512, 1e-2, seed=0)
    model = task.build_model()
    optimizer = task.build_optimizer(model)
    scheduler = task.build_scheduler(optimizer, 200)
    points, labels = task.dataset.tensors
    losses = []
    for _ in range(200):
        loss = task.loss_sum(model, (points, labels), CPU) / len(labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        scheduler.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]


def test_its_options_are_the_trainer_s_and_its_own(example, capsys):
    with pytest.raises(SystemExit) as exited:
        example.main(["--help"])
    assert exited.value.code == 0
    usage = capsys.readouterr().out
    for flag in ("--checkpoint-dir", "--total-steps", "--global-batch-size", "--lr", "--classes"):
        assert flag in usage


@pytest.mark.slow
def test_the_docstring_command_trains_and_checkpoints(example, tmp_path):
    """The command in train.py's docstring, run as written (with this machine's paths)."""
    doc = example_command(example.__doc__)
    ckpt = tmp_path / "ckpt"
    argv = [a.replace("/tmp/ckpt", str(ckpt)).replace("train.py", str(EXAMPLE)) for a in doc]
    argv = [sys.executable if a == "python" else a for a in argv]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(IMAGE_DIR), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    metas = sorted(ckpt.glob("ckpt-*/meta.json"))
    assert metas, f"no checkpoint in {ckpt}: {sorted(p.name for p in ckpt.iterdir())}"
    assert json.loads(metas[-1].read_text())["step"] == 100


def example_command(doc: str) -> list[str]:
    start = doc.index("python -m elastic_trainer.launcher")
    text = doc[start:].split("\n\n")[0].replace("\\\n", " ")
    return shlex.split(text)
