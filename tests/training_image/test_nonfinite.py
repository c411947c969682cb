"""A NaN or infinite loss skips its step's update; too many in a row end the worker without saving.

Unit tests of the guard, then real runs (etcd, torchrun, gloo; the real Lighthouse for in-place)
with NaN losses injected at chosen steps (TORCHFLEET_FAULT_NAN_STEPS).
"""

from __future__ import annotations

import math

import pytest
import torch
from elastic_trainer import EXIT_NONFINITE
from elastic_trainer.local.inplacerun import InplaceJob, lighthouse_binary
from elastic_trainer.nonfinite import FAULT_NAN_STEPS, NonFiniteGuard, nan_steps
from elastic_trainer.store.checkpoint import CheckpointStore

TIMEOUT = 90


@pytest.mark.parametrize(("text", "steps"), [("", set()), ("5", {5}), ("5,7", {5, 7}), ("3-5, 9", {3, 4, 5, 9})])
def test_nan_steps_parses_single_steps_and_ranges(text, steps):
    assert nan_steps({FAULT_NAN_STEPS: text}) == steps


@pytest.mark.parametrize("text", ["five", "5-", "-3", "2-x"])
def test_a_malformed_fault_step_list_is_refused_naming_the_variable(text):
    with pytest.raises(ValueError, match=f"{FAULT_NAN_STEPS}: .* is not a step or a range"):
        nan_steps({FAULT_NAN_STEPS: text})


def test_the_guard_skips_non_finite_losses_and_gives_up_after_more_than_its_limit_in_a_row():
    guard = NonFiniteGuard(limit=2, report=False)
    decisions = [guard.admits(loss, step) for step, loss in
                 enumerate([1.0, math.nan, math.inf, 2.0, -math.inf, math.nan], start=1)]
    assert decisions == [True, False, False, True, False, False]
    assert (guard.skipped, guard.in_a_row, guard.gave_up) == (4, 2, False)  # a finite step resets the count
    assert not guard.admits(math.nan, 7) and guard.gave_up


def test_a_limit_of_zero_gives_up_at_the_first_non_finite_loss():
    guard = NonFiniteGuard(limit=0, report=False)
    assert guard.admits(0.5, 1) and not guard.gave_up
    assert not guard.admits(math.nan, 2) and guard.gave_up


def _run_to_the_end(make_job, total: int, nan: str, *flags: str, batch: int = 16):
    """A one-node job with NaN losses at ``nan`` steps; it must finish. The job and each step's loss."""
    job = make_job(f"--total-steps={total}", f"--global-batch-size={batch}", *flags, nnodes="1:1",
                   extra_env={FAULT_NAN_STEPS: nan})
    node = job.start_node()
    assert job.wait_for("done", TIMEOUT)["step"] == total
    assert node.wait(TIMEOUT) == 0
    return job, {e["step"]: e["loss"] for e in job.steps()}


def _state(checkpoint_dir, step: int) -> dict:
    store = CheckpointStore(checkpoint_dir)
    checkpoint = next(c for c in store.committed() if c.step == step)
    return store.load(checkpoint, "cpu")[0]


@pytest.mark.slow
def test_skipped_steps_leave_weights_and_optimizer_as_they_were(make_job):
    # No periodic checkpoint inside a run of NaN steps: the final one (step 6) shows the state after them.
    job, losses = _run_to_the_end(make_job, 6, "5-6", "--checkpoint-every=4")
    skipped = [e for e in job.events.snapshot() if e.kind == "nonfinite"]
    assert [(e["step"], e["loss"], e["in_a_row"]) for e in skipped] == [(5, "nan", 1), (6, "nan", 2)]
    assert losses[5] is None and losses[6] is None and math.isfinite(losses[4])

    before, after = _state(job.checkpoint_dir, 4), _state(job.checkpoint_dir, 6)
    for name, tensor in before["model"].items():  # the two NaN steps changed nothing
        assert torch.equal(tensor, after["model"][name]), name
    for index, buffers in before["optimizer"]["state"].items():
        assert torch.equal(buffers["momentum_buffer"], after["optimizer"]["state"][index]["momentum_buffer"])
    assert after["scheduler"]["last_epoch"] == before["scheduler"]["last_epoch"] + 2  # the schedule went on


@pytest.mark.slow
def test_a_run_with_a_few_nan_steps_trains_on_and_finishes(make_job):
    job, losses = _run_to_the_end(make_job, 40, "5-6,12", "--checkpoint-every=10")
    assert [s for s in range(1, 41) if losses[s] is None] == [5, 6, 12]
    final = _state(job.checkpoint_dir, 40)
    assert all(torch.isfinite(t).all() for t in final["model"].values())


@pytest.mark.slow
def test_too_many_in_a_row_end_the_worker_unsaved_and_each_restart_resumes_from_before_them(make_job):
    # Deterministic divergence from step 5 on: every restart resumes from step 4 and gives up at
    # step 7 again; with one restart allowed the node then fails (torchrun exits 1).
    job = make_job("--total-steps=40", "--global-batch-size=16", "--checkpoint-every=2", "--max-nonfinite-steps=2",
                   nnodes="1:1", extra_env={FAULT_NAN_STEPS: "5-40", "PET_MAX_RESTARTS": "1"})
    node = job.start_node()
    assert node.wait(TIMEOUT) == 1

    exits = [(e["step"], e["code"]) for e in job.events.snapshot() if e.kind == "exit"]
    assert exits == [(7, EXIT_NONFINITE), (7, EXIT_NONFINITE)]
    assert [e["step"] for e in job.events.snapshot() if e.kind == "resumed"] == [4]
    store = CheckpointStore(job.checkpoint_dir)
    assert max(c.step for c in store.committed()) == 4  # step 6, inside the NaN run, was not saved
    assert all(torch.isfinite(t).all() for t in store.load_latest("cpu")[0]["model"].values())


@pytest.mark.slow
def test_in_place_groups_skip_the_same_steps_and_keep_agreeing(tmp_path):
    if lighthouse_binary() is None:
        pytest.fail("torchft_lighthouse is not installed (pip install -e .[dev] installs torchft)")
    # min_groups=2: the first group to start could otherwise train past the poisoned steps alone
    args = ["--total-steps=40", "--global-batch-size=32", "--checkpoint-every=10", "--step-delay-s=0.02"]
    with InplaceJob(tmp_path / "job", args, groups=2, min_groups=2, extra_env={FAULT_NAN_STEPS: "20-22"}) as job:
        nodes = [job.start_group(0), job.start_group(1)]
        assert [node.wait(TIMEOUT) for node in nodes] == [0, 0]
        events = job.events.snapshot()
    skipped = sorted((e["group"], e["step"]) for e in events if e.kind == "nonfinite")
    assert skipped == [(g, s) for g in (0, 1) for s in (20, 21, 22)]
    digests: dict[int, set[float]] = {}
    for e in events:
        if e.kind == "step" and e["world"] == 2:
            digests.setdefault(e["step"], set()).add(e["digest"])
    assert all(len(d) == 1 for d in digests.values()), "the groups' weights differ"
    # a step's digest is of the weights it was computed from: 20..23 all saw the weights after step 19
    assert digests[20] == digests[21] == digests[22] == digests[23] != digests[24]


@pytest.mark.slow
def test_the_synthetic_example_trains_at_a_global_batch_of_four(make_job):
    # It diverged to NaN within ~30 steps at this batch before its gradient was clipped (--clip-grad-norm).
    job, losses = _run_to_the_end(make_job, 300, "", "--checkpoint-every=100", "--progress-every=10", batch=4)
    assert not [e for e in job.events.snapshot() if e.kind == "nonfinite"]
    assert all(math.isfinite(loss) for loss in losses.values()) and losses[300] < losses[1]


def test_a_finite_loss_with_a_non_finite_gradient_norm_is_skipped_too():
    guard = NonFiniteGuard(limit=3, report=False)
    assert guard.admits(0.5, 1, grad_norm=2.0)
    assert not guard.admits(0.5, 2, grad_norm=math.inf) and guard.in_a_row == 1  # overflowed in backward
    assert not guard.admits(0.5, 3, grad_norm=math.nan) and guard.in_a_row == 2
    assert guard.admits(0.5, 4, grad_norm=1e30) and guard.in_a_row == 0
