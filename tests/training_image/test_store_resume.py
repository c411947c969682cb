"""The trainer's resume and save paths against a damaged or full store (issue 11).

In-process: one gloo rank (world size 1) runs the real ``_Run``; other ranks' views are
simulated by replacing its two collectives. Regressions pinned here:

- resume on CUDA crashed: the checkpoint was loaded with ``map_location=cuda``, the saved RNG
  ByteTensors landed on the GPU and ``torch.set_rng_state`` raised ``TypeError: RNG state must
  be a torch.ByteTensor`` on every restart. Without a GPU, a tensor subclass that reports
  ``cuda:0`` (and hands its bytes over only through ``.to("cpu")``) reproduces that exact error;
- a resume hashed the newest checkpoint twice on rank 0 and once on every other rank;
- a checkpoint torch.load refuses, or without a key the trainer needs, crash-looped the job;
- a full store made a failed periodic checkpoint fatal.
"""

from __future__ import annotations

import json
import random
import signal

import pytest
import torch
from elastic_trainer import EXIT_CHECKPOINT_FAILED, EXIT_FENCED
from elastic_trainer.events import PREFIX
from elastic_trainer.rng import rng_state, set_rng_state
from elastic_trainer.signals import StopRequest
from elastic_trainer.store import checkpoint_verify
from elastic_trainer.store.checkpoint import CheckpointStore
from elastic_trainer.store.checkpoint_write import CheckpointWriteError
from elastic_trainer.trainer import _Run

from tests.harness.trainer_run import Task, config, printed


class OnGpu(torch.Tensor):
    """A CPU tensor that says it lives on cuda:0, as a state loaded with map_location=cuda does."""

    @staticmethod
    def __new__(cls, data: torch.Tensor):
        tensor = torch.Tensor._make_wrapper_subclass(cls, data.shape, dtype=data.dtype, device=torch.device("cuda", 0))
        tensor.cpu_data = data
        return tensor

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.ops.aten.detach.default:
            return OnGpu(args[0].cpu_data)
        if func is torch.ops.aten._to_copy.default and kwargs.get("device") == torch.device("cpu"):
            return args[0].cpu_data.clone()  # a device-to-host copy
        raise NotImplementedError(f"{func} on the simulated GPU")


def on_gpu(obj):
    """What torch.load(map_location=cuda) does to a state, for the uint8 tensors the RNG states are."""
    if isinstance(obj, torch.Tensor) and obj.dtype == torch.uint8:
        return OnGpu(obj)
    if isinstance(obj, dict):
        return {key: on_gpu(value) for key, value in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(on_gpu(value) for value in obj)
    return obj


def trained(tmp_path, capsys, **overrides) -> CheckpointStore:
    assert _Run(Task(), config(tmp_path, **overrides), StopRequest()).run() == 0
    capsys.readouterr()
    return CheckpointStore(tmp_path / "ckpt")


def test_rng_states_that_landed_on_the_gpu_are_restored(monkeypatch):
    random.seed(5)
    torch.manual_seed(5)
    saved = rng_state()
    expected = (torch.rand(3), random.random())
    restored_cuda = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda state, index: restored_cuda.append((state, index)))
    cuda_states = [torch.arange(16, dtype=torch.uint8), torch.arange(16, dtype=torch.uint8) + 1]
    with pytest.raises(TypeError, match=r"RNG state must be a torch\.ByteTensor"):
        torch.set_rng_state(OnGpu(saved["torch"]))  # the crash of issue 11, reproduced
    set_rng_state(on_gpu({**saved, "cuda": cuda_states}))
    assert torch.equal(torch.rand(3), expected[0]) and random.random() == expected[1]
    # every CUDA generator's state is handed over as a CPU ByteTensor; a node with fewer GPUs sets what it has
    assert [(type(s), s.device.type, index) for s, index in restored_cuda] == [(torch.Tensor, "cpu", 0)]
    assert torch.equal(restored_cuda[0][0], cuda_states[0])


def test_a_resume_on_a_cuda_worker_loads_to_the_cpu(group, tmp_path, capsys, monkeypatch):
    trained(tmp_path, capsys)
    real_load = torch.load
    locations = []

    def load_like_torch(path, map_location=None, **kwargs):
        locations.append(str(map_location))
        state = real_load(path, map_location="cpu", **kwargs)
        return on_gpu(state) if "cuda" in str(map_location) else state

    monkeypatch.setattr(torch, "load", load_like_torch)
    run = _Run(Task(), config(tmp_path, total_steps=8), StopRequest())
    run.device = torch.device("cuda", 0)  # a GPU worker; its collectives are not what is tested here
    run._broadcast_object = lambda obj: obj
    run._gather_objects = lambda obj: [obj]
    state, meta = run._pick_checkpoint()
    assert locations == ["cpu"] and meta["step"] == 6
    set_rng_state(state["rng"][0])  # what run() does at the same world size: raised TypeError before the fix


def test_a_resume_verifies_once_on_rank_0_and_never_elsewhere(group, tmp_path, capsys, hashed):
    store = trained(tmp_path, capsys)
    newest = store.committed()[0]
    hashed.clear()
    run = _Run(Task(), config(tmp_path, total_steps=8), StopRequest())
    state, meta = run._pick_checkpoint()
    assert hashed == [newest.path.name] and meta["step"] == 6 and state["step"] == 6

    hashed.clear()
    other = _Run(Task(), config(tmp_path, total_steps=8), StopRequest())
    other.rank = 1  # rank 0 broadcasts its choice and meta; this rank only deserializes
    other._broadcast_object = lambda obj: (newest, {"step": 6, "generation": 1})
    other._gather_objects = lambda obj: [None, obj]
    state, meta = other._pick_checkpoint()
    assert hashed == [] and state["step"] == 6 and meta["step"] == 6


def refuse_torch_load(path):
    """A state.pt torch.load(weights_only=True) refuses, with a meta.json that matches it."""
    torch.save({"model": {}, "step": 6, "hook": print}, path / "state.pt")
    rewrite_meta(path)


def drop_sampler(path):
    state = torch.load(path / "state.pt", weights_only=True)
    del state["sampler"]
    torch.save(state, path / "state.pt")
    rewrite_meta(path)


def rewrite_meta(path):
    meta = json.loads((path / "meta.json").read_text())
    digest = checkpoint_verify._hash_file(path / "state.pt", (path / "state.pt").stat().st_size).as_meta()
    meta.update(digest, files={"state.pt": digest})
    (path / "meta.json").write_text(json.dumps(meta))


@pytest.mark.parametrize(("damage", "reason"), [(refuse_torch_load, "weights_only"), (drop_sampler, "lacks sampler")])
def test_a_checkpoint_that_verifies_but_cannot_be_used_is_skipped(group, tmp_path, capsys, damage, reason):
    store = trained(tmp_path, capsys)
    newest = store.committed()[0]
    damage(newest.path)
    store.verify(newest)  # size and sha256 match: only using it fails
    run = _Run(Task(), config(tmp_path, total_steps=8), StopRequest())
    assert run.run() == 0  # before the fix: exit 1 on every restart
    out = capsys.readouterr().out
    skipped = [json.loads(line[len(PREFIX):]) for line in out.splitlines() if '"ckpt_skipped"' in line]
    assert [e["name"] for e in skipped] == [newest.path.name] and reason in skipped[0]["reason"]
    resumed = next(json.loads(line[len(PREFIX):]) for line in out.splitlines() if '"resumed"' in line)
    assert resumed["step"] == 4
    assert newest.path.is_dir()  # kept for a person to look at: nothing deleted to make room


def test_when_another_rank_cannot_load_the_choice_all_fall_back_together(group, tmp_path, capsys, caplog):
    store = trained(tmp_path, capsys)
    newest, previous = store.committed()[:2]
    run = _Run(Task(), config(tmp_path, total_steps=8), StopRequest())
    answers = iter([[None, "ckpt-...: torch.load failed (I/O error)"], [None, None]])
    chosen = []
    run._broadcast_object = lambda obj: chosen.append(obj[0].path.name) or obj
    run._gather_objects = lambda obj: next(answers)
    _, meta = run._pick_checkpoint()
    assert chosen == [newest.path.name, previous.path.name] and meta["step"] == previous.step
    assert printed(capsys, "ckpt_skipped")[0]["reason"] == "rank 1: ckpt-...: torch.load failed (I/O error)"
    assert "skipping checkpoint: rank 1" in caplog.text


def failing_saves(monkeypatch, fail_steps):
    real_save = CheckpointStore.save

    def save(self, state, *, step, **kwargs):
        if step in fail_steps:
            raise CheckpointWriteError(f"writing the checkpoint of {step} failed: [Errno 28] No space left on device")
        return real_save(self, state, step=step, **kwargs)

    monkeypatch.setattr(CheckpointStore, "save", save)


def test_a_failed_periodic_checkpoint_is_reported_and_training_goes_on(group, tmp_path, capsys, monkeypatch):
    failing_saves(monkeypatch, {2, 4})
    run = _Run(Task(), config(tmp_path), StopRequest())
    assert run.run() == 0
    out = capsys.readouterr().out
    failed = [json.loads(line[len(PREFIX):]) for line in out.splitlines() if '"ckpt_failed"' in line]
    assert [(e["step"], e["reason"]) for e in failed] == [(2, "periodic"), (4, "periodic")]
    assert "No space left on device" in failed[0]["error"]
    assert [c.step for c in CheckpointStore(tmp_path / "ckpt").committed()] == [6]


@pytest.mark.parametrize(("stop", "fail_step"), [(True, 1), (False, 6)])
def test_a_failed_stop_or_final_checkpoint_exits_with_its_own_code(group, tmp_path, capsys, monkeypatch, stop,
                                                                     fail_step):
    failing_saves(monkeypatch, {fail_step})
    request = StopRequest()
    if stop:
        request.signum = signal.SIGTERM  # a spot notice before the first step: that step is checkpointed
    assert _Run(Task(), config(tmp_path), request).run() == EXIT_CHECKPOINT_FAILED == 74
    assert [e["code"] for e in printed(capsys, "exit")] == [74]
    assert EXIT_FENCED == 3  # the other store exit code, unchanged


def test_a_stop_save_after_a_resume_hashes_no_older_checkpoint(group, tmp_path, capsys, hashed):
    # Regression: the stop save's prune, inside the training thread's wait for it, hashed the
    # older kept checkpoints a restarted process had not verified (seconds per 4 GB state, spent
    # in the SIGTERM window).
    trained(tmp_path, capsys, keep_checkpoints=3)  # 2, 4, 6
    hashed.clear()
    request = StopRequest()
    request.signum = signal.SIGTERM  # a spot notice before the first step of the resumed run
    assert _Run(Task(), config(tmp_path, total_steps=10, keep_checkpoints=3), request).run() == 143
    assert hashed == ["ckpt-g000001-s0000000006"]  # the resume's one verification, and nothing more
    # 4 and 2 not verified by this process: neither counted nor deleted, nothing good is lost
    assert [c.step for c in CheckpointStore(tmp_path / "ckpt").committed()] == [7, 6, 4, 2]
    hashed.clear()  # the next run's periodic save, in the background, settles what was left
    assert _Run(Task(), config(tmp_path, total_steps=10, keep_checkpoints=3), StopRequest()).run() == 0
    assert hashed == ["ckpt-g000002-s0000000007", "ckpt-g000001-s0000000006"]
    assert [c.step for c in CheckpointStore(tmp_path / "ckpt").committed()] == [10, 8, 7]
