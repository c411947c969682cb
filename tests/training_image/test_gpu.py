"""The training image on a GPU: the real launcher, trainer and etcd-v2, every CUDA code path (issue 11).

Each job runs one node (``--nnodes=1:1``, one worker): NCCL refuses two ranks on one GPU. Where a
machine has two GPUs or more, the world-size test runs its two-node parts on a GPU each;
on one GPU it runs them on the CPU (gloo) and resumes their checkpoint on the GPU and back: a
checkpoint is portable between devices and world sizes, so that is the same resharding path.

Skipped without CUDA. ``TORCHFLEET_GPU_TESTS_ON_CPU=1`` runs the same bodies on the CPU (the
trainer picks gloo and the CPU when ``CUDA_VISIBLE_DEVICES`` hides every GPU), which proves the
tests' own logic on a machine without a GPU. On a GPU machine with no etcd installed,
``TORCHFLEET_ETCD_BINARY`` names the binary (conftest.py); python-etcd must be importable.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import signal
import time

import pytest
import torch
from elastic_trainer.hooks import FAULT_STALL_COMMIT
from elastic_trainer.local import IMAGE_DIR, worker_pids
from elastic_trainer.store.fence import Generations
from elastic_trainer.trainer import TrainConfig

ON_CPU = os.environ.get("TORCHFLEET_GPU_TESTS_ON_CPU") == "1"
CUDA = torch.cuda.is_available()
TIMEOUT = 180  # per wait: a fresh GPU worker needs ~10 s before its first step (README.md's GPU figures)
TOTAL = 80
# The synthetic example has dropout: an exact continuation needs the saved CUDA RNG state back.
ARGS = ["--global-batch-size=16", "--checkpoint-every=20", "--step-delay-s=0.02", "--seed=7",
        "--keep-checkpoints=10"]

pytestmark = pytest.mark.gpu


@pytest.fixture(params=[
    pytest.param("cuda", marks=pytest.mark.skipif(not CUDA, reason="needs CUDA (no GPU on this machine)")),
    pytest.param("cpu", marks=pytest.mark.skipif(not ON_CPU, reason="the GPU tests' bodies run on the CPU only "
                                                                    "with TORCHFLEET_GPU_TESTS_ON_CPU=1")),
])
def device(request) -> str:
    return request.param


def device_env(device: str) -> dict[str, str]:
    if device == "cpu":
        return {"CUDA_VISIBLE_DEVICES": ""}  # the trainer falls back to gloo on the CPU
    # cuBLAS picks its workspace per stream; a fixed config keeps matmuls bitwise repeatable
    return {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"}


def trainer_options() -> set[str]:
    parser = argparse.ArgumentParser()
    TrainConfig.add_arguments(parser)
    return {option for action in parser._actions for option in action.option_strings}


def checkpoint_modes(sync: bool = True) -> list:
    """The trainer's default, plus each alternative it offers (issue 11's items 2 and 3)."""
    options = trainer_options()
    modes = [pytest.param((), id="default")]
    if sync and "--no-async-checkpoint" in options:
        modes.append(pytest.param(("--no-async-checkpoint",), id="sync"))
    if "--checkpoint-format" in options:
        modes.append(pytest.param(("--checkpoint-format=sharded",), id="sharded"))
    return modes


def losses_after(job, since: float) -> dict[int, float]:
    return {e["step"]: e["loss"] for e in job.steps() if e.t >= since}


def assert_ran_on(job, device: str) -> None:
    """Every worker group of the job said which device it trained on."""
    starts = [e for e in job.events.snapshot() if e.kind in ("start", "resumed")]
    assert starts, "no worker group started"
    devices = {e.data.get("device", "").split(":")[0] for e in starts}
    assert devices == {device}, f"trained on {devices}, expected {device}"


def committed_steps(job, generation: int | None = None) -> list[int]:
    from elastic_trainer.store.checkpoint import CheckpointStore

    return sorted(c.step for c in CheckpointStore(job.checkpoint_dir).committed()
                  if generation is None or c.generation == generation)


@pytest.mark.parametrize("mode", checkpoint_modes())
def test_resume_at_the_same_world_size_continues_the_losses_exactly(make_job, device, mode):
    # Regression (issue 11): on CUDA the checkpoint was loaded with map_location=cuda, the saved RNG
    # ByteTensors landed on the GPU and every resume died in torch.set_rng_state with
    # "TypeError: RNG state must be a torch.ByteTensor" (the worker crash-looped through its restarts).
    env = device_env(device)
    baseline = make_job(f"--total-steps={TOTAL}", *ARGS, *mode, nnodes="1:1", extra_env=env)
    baseline.start_node()
    baseline.wait_for("done", TIMEOUT)
    assert baseline.nodes[0].wait(TIMEOUT) == 0
    expected = losses_after(baseline, 0)
    assert sorted(expected) == list(range(1, TOTAL + 1))

    job = make_job(f"--total-steps={TOTAL}", *ARGS, *mode, nnodes="1:1", extra_env=env)
    job.start_node()
    job.wait_for("step", TIMEOUT, step=50)  # mid interval: steps 41-50 are recomputed
    killed_at = job.nodes[0].kill()
    job.start_node("replacement")
    resumed = job.wait_for("resumed", TIMEOUT, since=killed_at)
    assert resumed["step"] == max(committed_steps(job, generation=resumed["from_gen"]))
    assert resumed["step"] >= 40
    job.wait_for("done", TIMEOUT)
    assert job.nodes[1].wait(TIMEOUT) == 0
    assert_ran_on(job, device)
    got = losses_after(job, resumed.t)
    assert sorted(got) == list(range(resumed["step"] + 1, TOTAL + 1))
    # bitwise: the same data, the same dropout masks from the restored RNG states, the same kernels
    assert got == {step: expected[step] for step in got}


@pytest.mark.parametrize("mode", checkpoint_modes(sync=False))
def test_resume_at_another_world_size_on_another_device(make_job, device, mode):
    # world 2 -> world 1 on `device` -> world 2 again, one checkpoint directory. Two ranks on one
    # GPU are refused by NCCL: with fewer than two GPUs the world-size-2 parts run on the CPU.
    two_gpus = device == "cuda" and torch.cuda.device_count() >= 2
    pair = [{"CUDA_VISIBLE_DEVICES": str(i)} for i in range(2)] if two_gpus else [device_env("cpu")] * 2
    args = ["--global-batch-size=16", "--checkpoint-every=10", "--step-delay-s=0.02", "--seed=3", *mode]
    first = make_job("--total-steps=20", *args, nnodes="2:2", extra_env=device_env(device))
    for env in pair:
        first.start_node(env=env)
    assert first.wait_for("done", TIMEOUT)["step"] == 20
    assert [node.wait(TIMEOUT) for node in first.nodes] == [0, 0]

    middle = make_job("--total-steps=40", *args, nnodes="1:1", workdir=first.workdir, extra_env=device_env(device))
    middle.start_node()
    resumed = middle.wait_for("resumed", TIMEOUT)
    assert (resumed["step"], resumed["world"], resumed["from_world"]) == (20, 1, 2)
    assert middle.wait_for("done", TIMEOUT)["step"] == 40
    assert middle.nodes[0].wait(TIMEOUT) == 0
    assert_ran_on(middle, device)

    last = make_job("--total-steps=60", *args, nnodes="2:2", workdir=first.workdir, extra_env=device_env(device))
    for env in pair:
        last.start_node(env=env)
    resumed = last.wait_for("resumed", TIMEOUT)
    assert (resumed["step"], resumed["world"], resumed["from_world"]) == (40, 2, 1)
    assert last.wait_for("done", TIMEOUT)["step"] == 60
    assert [node.wait(TIMEOUT) for node in last.nodes] == [0, 0]

    losses = {**losses_after(first, 0), **losses_after(middle, 0), **losses_after(last, 0)}
    assert sorted(losses) == list(range(1, 61)), "a step was skipped or never ran"
    assert all(math.isfinite(loss) for loss in losses.values())
    assert losses[60] < losses[1]  # it kept learning across both changes, not restarting


@pytest.mark.parametrize("mode", checkpoint_modes())
def test_sigterm_commits_a_checkpoint_and_exits_143(make_job, device, mode):
    job = make_job("--total-steps=60", "--global-batch-size=16", "--checkpoint-every=1000", "--step-delay-s=0.03",
                   *mode, nnodes="1:1", extra_env=device_env(device))
    noticed = job.start_node()
    job.wait_for("step", TIMEOUT, step=20)
    sent_at = noticed.sigterm()
    assert noticed.wait(TIMEOUT) == 143
    stop = job.wait_for("ckpt", TIMEOUT, since=sent_at, reason="stop")
    assert stop.t - sent_at < 15, "must fit GKE's 15 s notice window"
    assert stop["step"] == max(e["step"] for e in job.steps()), "the stop checkpoint holds the last step that ran"
    assert committed_steps(job) == [stop["step"]]

    again = job.start_node("restarted")
    resumed = job.wait_for("resumed", TIMEOUT, since=sent_at)
    assert resumed["step"] == stop["step"], "a step was lost"
    assert job.wait_for("done", TIMEOUT)["step"] == 60
    assert again.wait(TIMEOUT) == 0
    assert_ran_on(job, device)


def test_a_commit_stalled_behind_a_newer_generation_is_fenced(make_job, device):
    # The checkpoint of step 20 is written but its commit stalls (fault injection; with
    # asynchronous checkpoints the stall is in the background writer while training goes on);
    # meanwhile a newer worker group claims a generation. The stalled commit must be refused.
    job = make_job("--total-steps=80", "--global-batch-size=16", "--checkpoint-every=10", "--step-delay-s=0.03",
                   nnodes="1:1", extra_env={**device_env(device), FAULT_STALL_COMMIT: "20:6"})
    job.start_node()
    writing = job.wait_for("ckpt_writing", TIMEOUT, step=20)
    newer = Generations(job.checkpoint_dir).claim({"note": "another group of the same job"})
    fenced = job.wait_for("fenced", TIMEOUT, since=writing.t, gen=1)
    assert fenced["step"] >= 20
    assert committed_steps(job, generation=1) == [10], "the stalled commit (or a later one) got through"
    resumed = job.wait_for("resumed", TIMEOUT, since=fenced.t)
    assert resumed["gen"] > newer and resumed["step"] == 10
    assert job.wait_for("done", TIMEOUT)["step"] == 80
    assert_ran_on(job, device)


def test_a_corrupt_newest_checkpoint_is_skipped(make_job, device):
    args = ["--global-batch-size=16", "--checkpoint-every=10"]
    first = make_job("--total-steps=40", *args, nnodes="1:1", extra_env=device_env(device))
    first.start_node()
    assert first.wait_for("done", TIMEOUT)["step"] == 40
    assert first.nodes[0].wait(TIMEOUT) == 0
    newest = max(first.checkpoint_dir.glob("ckpt-*"))
    damaged = max((path for path in newest.rglob("*") if path.is_file() and path.name != "meta.json"),
                  key=lambda path: path.stat().st_size)
    data = bytearray(damaged.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte, same size: only the digest can tell
    damaged.write_bytes(bytes(data))

    again = make_job("--total-steps=60", *args, nnodes="1:1", workdir=first.workdir, extra_env=device_env(device))
    node = again.start_node("again")
    skipped = again.wait_for("ckpt_skipped", TIMEOUT)
    assert skipped["name"] == newest.name
    assert again.wait_for("resumed", TIMEOUT)["step"] == 30
    assert again.wait_for("done", TIMEOUT)["step"] == 60
    assert node.wait(TIMEOUT) == 0
    assert_ran_on(again, device)


def test_a_killed_worker_is_restarted_by_its_agent_and_resumes(make_job, device):
    # What every survivor's agent does on a membership change: new workers on the same node,
    # forked from the warm forkserver, resuming from the newest checkpoint.
    job = make_job("--total-steps=120", "--global-batch-size=16", "--checkpoint-every=20", "--step-delay-s=0.03",
                   nnodes="1:1", extra_env=device_env(device))
    node = job.start_node()
    job.wait_for("step", TIMEOUT, step=30)
    workers = worker_pids(node.pid)
    assert len(workers) == 1
    killed_at = time.monotonic()
    os.kill(workers[0], signal.SIGKILL)
    resumed = job.wait_for("resumed", TIMEOUT, since=killed_at)
    assert resumed["step"] == max(committed_steps(job, generation=resumed["from_gen"]))
    assert resumed["step"] >= 20
    assert worker_pids(node.pid) != workers
    assert job.wait_for("done", TIMEOUT)["step"] == 120
    assert node.wait(TIMEOUT) == 0
    assert_ran_on(job, device)


GPT = IMAGE_DIR / "examples" / "gpt.py"
IMAGENET = IMAGE_DIR / "examples" / "imagenet.py"


def test_the_gpt_example_resumes_after_a_sigterm(make_job, device):
    # fused AdamW on a GPU (its state is loaded back onto the GPU), bf16 autocast where the GPU has it
    args = ["--size=tiny", "--samples=512", "--total-steps=60", "--global-batch-size=16", "--checkpoint-every=1000",
            "--step-delay-s=0.03", "--lr=3e-3"]
    job = make_job(*args, nnodes="1:1", script=GPT, extra_env=device_env(device))
    node = job.start_node()
    job.wait_for("step", TIMEOUT, step=30)
    sent_at = node.sigterm()
    assert node.wait(TIMEOUT) == 143
    stop = job.wait_for("ckpt", TIMEOUT, since=sent_at, reason="stop")
    job.start_node("restarted")
    resumed = job.wait_for("resumed", TIMEOUT, since=sent_at)
    assert resumed["step"] == stop["step"]
    assert job.wait_for("done", TIMEOUT)["step"] == 60
    losses = losses_after(job, 0)
    # continued from the trained weights and optimizer state, not from a fresh model
    assert losses[stop["step"] + 1] < 0.8 * losses[1]
    assert_ran_on(job, device)


@pytest.mark.skipif(importlib.util.find_spec("torchvision") is None, reason="needs torchvision")
def test_the_imagenet_example_trains_and_resumes_on_synthetic_images(make_job, device):
    args = ["--synthetic-images=64", "--image-size=64", "--num-classes=10", "--arch=resnet18",
            "--global-batch-size=16", "--checkpoint-every=10", "--num-workers=2", "--progress-every=1"]
    first = make_job("--total-steps=20", *args, nnodes="1:1", script=IMAGENET, extra_env=device_env(device))
    first.start_node()
    assert first.wait_for("done", TIMEOUT)["step"] == 20
    assert first.nodes[0].wait(TIMEOUT) == 0
    again = make_job("--total-steps=30", *args, nnodes="1:1", script=IMAGENET, workdir=first.workdir,
                     extra_env=device_env(device))
    again.start_node()
    assert again.wait_for("resumed", TIMEOUT)["step"] == 20
    assert again.wait_for("done", TIMEOUT)["step"] == 30
    assert all(math.isfinite(loss) for loss in losses_after(again, 0).values())
    assert_ran_on(again, device)
