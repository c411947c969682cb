"""The loop's checkpoints (issue 11), in-process: one gloo rank runs the real ``_Run``.

The store's ``save`` is wrapped to make a write slow, failing or fenced at a chosen step; the
events on stdout, in the order they were printed, show what the training thread did meanwhile.
"""

from __future__ import annotations

import signal
import threading
import time

import pytest
import torch
from elastic_trainer.signals import StopRequest
from elastic_trainer.store.checkpoint import CheckpointStore
from elastic_trainer.store.fence import StaleGenerationError
from elastic_trainer.store.staging import HostSnapshot
from elastic_trainer.trainer import _Run

from tests.harness.trainer_run import Task, config, position, printed


@pytest.fixture
def saves(monkeypatch):
    """Make the store's save slow or failing at chosen steps; records how many ran at once."""
    real = CheckpointStore.save
    plan: dict[int, object] = {}  # step -> seconds to stall, or an exception to raise
    seen = {"running": 0, "most": 0}
    lock = threading.Lock()

    def save(self, state, *, step, **kwargs):
        with lock:
            seen["running"] += 1
            seen["most"] = max(seen["most"], seen["running"])
        try:
            what = plan.get(step, 0)
            if isinstance(what, BaseException):
                raise what
            time.sleep(what)
            return real(self, state, step=step, **kwargs)
        finally:
            with lock:
                seen["running"] -= 1

    monkeypatch.setattr(CheckpointStore, "save", save)
    return plan, seen


def test_training_goes_on_while_a_periodic_checkpoint_is_written(group, tmp_path, capsys, saves):
    plan, _ = saves
    plan[2] = 0.6
    assert _Run(Task(), config(tmp_path), StopRequest()).run() == 0
    events = printed(capsys)
    assert position(events, "step", step=3) < position(events, "ckpt", step=2)
    periodic = events[position(events, "ckpt", step=2)]
    assert periodic["blocked_s"] < 0.6 <= periodic["write_s"] <= periodic["seconds"]
    final = events[position(events, "ckpt", step=6)]
    assert final["reason"] == "final" and final["blocked_s"] >= final["write_s"]  # the last step waits
    assert position(events, "ckpt", step=6) < position(events, "done")


def test_at_most_one_write_in_flight_the_next_checkpoint_waits(group, tmp_path, capsys, saves):
    plan, seen = saves
    plan.update({1: 0.3, 2: 0.3, 3: 0.3})
    assert _Run(Task(), config(tmp_path, checkpoint_every=1), StopRequest()).run() == 0
    ckpts = [e for e in printed(capsys) if e["ev"] == "ckpt"]
    assert [e["step"] for e in ckpts] == [1, 2, 3, 4, 5, 6]
    assert seen["most"] == 1
    assert ckpts[1]["waited_s"] > 0.1  # step 2's checkpoint waited for step 1's write
    assert [c.step for c in CheckpointStore(tmp_path / "ckpt").committed()] == [6, 5, 4, 3, 2, 1]


def test_a_stop_waits_for_the_write_in_flight_then_commits_its_own_step(group, tmp_path, capsys, saves):
    plan, _ = saves
    plan[2] = 0.6
    request = StopRequest()
    assert _Run(Task(request, stop_at_call=3), config(tmp_path), request).run() == 143
    events = printed(capsys)
    assert position(events, "ckpt", step=2) < position(events, "ckpt", step=3, reason="stop") < position(
        events, "exit", code=143)
    assert [c.step for c in CheckpointStore(tmp_path / "ckpt").committed()] == [3, 2]


def test_a_write_fenced_in_the_background_ends_the_group_with_exit_3(group, tmp_path, capsys, saves):
    plan, _ = saves
    plan[2] = StaleGenerationError("generation 1 is fenced: generation 2 formed since; not committing")
    assert _Run(Task(), config(tmp_path, total_steps=20), StopRequest()).run() == 3
    events = printed(capsys)
    fenced = events[position(events, "fenced")]
    assert fenced["step"] == 2  # the step whose commit was refused
    assert not [e for e in events if e["ev"] == "ckpt"]
    assert not CheckpointStore(tmp_path / "ckpt").committed()


def test_a_bug_in_the_background_write_is_raised_in_the_training_thread(group, tmp_path, capsys, saves):
    plan, _ = saves
    plan[2] = TypeError("cannot pickle this")  # not the store failing: a bug, as loud as a synchronous one
    with pytest.raises(TypeError, match="cannot pickle this"):
        _Run(Task(), config(tmp_path), StopRequest()).run()


def test_without_async_the_training_thread_waits_for_every_write(group, tmp_path, capsys, saves):
    plan, _ = saves
    plan[2] = 0.4
    assert _Run(Task(), config(tmp_path, async_checkpoint=False), StopRequest()).run() == 0
    events = printed(capsys)
    assert position(events, "ckpt", step=2) < position(events, "step", step=3)
    periodic = events[position(events, "ckpt", step=2)]
    assert periodic["blocked_s"] >= periodic["write_s"] >= 0.4


def test_the_sharded_format_resumes_exactly(group, tmp_path, capsys):
    straight = tmp_path / "straight"
    assert _Run(Task(), config(straight, total_steps=8, checkpoint_format="sharded"), StopRequest()).run() == 0
    interrupted = tmp_path / "interrupted"
    assert _Run(Task(), config(interrupted, total_steps=5, checkpoint_format="sharded"), StopRequest()).run() == 0
    assert _Run(Task(), config(interrupted, total_steps=8, checkpoint_format="sharded"), StopRequest()).run() == 0
    resumed = [e for e in printed(capsys) if e["ev"] == "resumed"]
    assert [(e["step"], e["from_world"]) for e in resumed] == [(5, 1)]
    expected = CheckpointStore(straight / "ckpt").load_latest()[0]
    got, meta, _ = CheckpointStore(interrupted / "ckpt").load_latest()
    assert meta["checkpoint_format"] == "sharded" and meta["step"] == 8
    for name, tensor in expected["model"].items():
        assert torch.equal(tensor, got["model"][name]), name
    for name, buffers in expected["optimizer"]["state"].items():
        assert torch.equal(buffers["momentum_buffer"], got["optimizer"]["state"][name]["momentum_buffer"]), name
    assert expected["scheduler"] == got["scheduler"]


def test_the_host_buffers_are_made_in_the_background_before_the_first_checkpoint(group, tmp_path, capsys,
                                                                                   monkeypatch):
    # Pinning gigabytes takes a while: the first checkpoint must not pay it on the training thread.
    made_by: list[str] = []
    real = HostSnapshot.allocate

    def allocate(self, layout):
        if layout != self._layout:
            made_by.append(threading.current_thread().name)
        real(self, layout)

    monkeypatch.setattr(HostSnapshot, "allocate", allocate)
    run = _Run(Task(hidden=2048), config(tmp_path, total_steps=8, checkpoint_every=4), StopRequest())
    run.checkpoints.snapshot.reuse_from_bytes = 8192  # every tensor of this model (>= 8 KiB) but the RNG states (5 KiB)
    assert run.run() == 0
    assert made_by == ["checkpoint-writer"] and run.checkpoints.snapshot.allocations == 1


def test_the_store_prunes_in_a_hurry_once_a_stop_is_requested_or_the_worker_leaves(group, tmp_path):
    # A SIGTERM during a periodic write's prune must end its hashing: the stop's save waits for it.
    request = StopRequest()
    run = _Run(Task(), config(tmp_path), request)
    in_a_hurry = run.checkpoints.store.in_a_hurry
    assert not in_a_hurry()
    request.signum = signal.SIGTERM
    assert in_a_hurry()
    request.signum = None
    run.checkpoints.leaving = True  # a stop seen by another rank, or leaving on an error
    assert in_a_hurry()
