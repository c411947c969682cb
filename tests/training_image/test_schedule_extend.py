"""Extending a job: a resume with another ``--total-steps`` (elastic_trainer/schedule.py, issue 22).

Regression: a finished 100-step job resubmitted with ``--total-steps=200`` resumed with the saved
schedule, ``T_max=100``: the cosine climbed from 0 back to its peak, and StepLR kept its old step
size. The policy ``rebuild`` (the default): from the resumed step on, the learning rate is the one a
run asked for the new total from the start has at that step. Checked on the real trainer (one gloo
rank), numerically, against that run and against the closed forms.
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from elastic_trainer import schedule
from elastic_trainer.signals import StopRequest
from elastic_trainer.store.checkpoint import CheckpointStore
from elastic_trainer.train_config import TrainConfig
from elastic_trainer.trainer import _Run

from tests.harness.trainer_run import Task, config, printed

LR = 0.01
GAMMA = 0.5


def cosine(optimizer, total_steps):
    return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=total_steps)


def step_lr(optimizer, total_steps):
    return torch.optim.lr_scheduler.StepLR(optimizer, step_size=max(total_steps // 4, 1), gamma=GAMMA)


def warmup_cosine(optimizer, total_steps):
    warm = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.1, total_iters=3)
    decay = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=total_steps - 3)
    return torch.optim.lr_scheduler.SequentialLR(optimizer, [warm, decay], milestones=[3])


class ScheduledTask(Task):
    """The harness's task with a schedule of the run's length; records the LR each step trains with."""

    def __init__(self, build) -> None:
        super().__init__()
        self.build, self.lrs = build, []

    def build_optimizer(self, model):
        self.optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
        return self.optimizer

    def build_scheduler(self, optimizer, total_steps):
        return self.build(optimizer, total_steps)

    def loss_sum(self, model, batch, device):
        self.lrs.append(self.optimizer.param_groups[0]["lr"])  # the LR of this step's update
        return super().loss_sum(model, batch, device)


def reference_lrs(build, total_steps: int) -> list[float]:
    """The LR of steps 1..total_steps in a run asked for total_steps from the start."""
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=LR)
    scheduler = build(optimizer, total_steps)
    lrs = []
    for _ in range(total_steps):
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return lrs


def finish_then_extend(tmp_path, build, first: int, then: int, **overrides) -> list[float]:
    assert _Run(ScheduledTask(build), config(tmp_path, total_steps=first, **overrides), StopRequest()).run() == 0
    extended = ScheduledTask(build)
    assert _Run(extended, config(tmp_path, total_steps=then, **overrides), StopRequest()).run() == 0
    return extended.lrs


@pytest.mark.parametrize("build", [cosine, step_lr], ids=["cosine", "step"])
def test_an_extended_job_follows_the_schedule_of_its_new_total(group, tmp_path, capsys, build):
    lrs = finish_then_extend(tmp_path, build, 12, 24)
    assert [e["step"] for e in printed(capsys, "resumed")] == [12]
    assert lrs == reference_lrs(build, 24)[12:]  # exactly: the same scheduler calls in the same order
    state, meta, _ = CheckpointStore(tmp_path / "ckpt").load_latest()
    assert (meta["step"], state["total_steps"]) == (24, 24)


def test_the_cosine_resumes_at_its_new_horizon_and_anneals_to_zero(group, tmp_path, capsys):
    lrs = finish_then_extend(tmp_path, cosine, 12, 24)
    for step, lr in enumerate(lrs, start=12):  # lrs[0] is the LR of step 13, after 12 scheduler steps
        assert lr == pytest.approx(LR * (1 + math.cos(math.pi * step / 24)) / 2, rel=1e-9, abs=1e-15)
    assert lrs[0] == pytest.approx(LR / 2)
    assert all(later < earlier for earlier, later in itertools.pairwise(lrs))  # never climbs back


def test_steplr_resumes_with_the_step_size_of_its_new_total(group, tmp_path, capsys):
    lrs = finish_then_extend(tmp_path, step_lr, 12, 24)  # step size 3 before, 6 now
    assert lrs == pytest.approx([LR * GAMMA ** (step // 6) for step in range(12, 24)], rel=1e-12)


def test_keep_restores_the_old_horizon_the_bug_as_a_choice(group, tmp_path, capsys):
    lrs = finish_then_extend(tmp_path, cosine, 12, 24, schedule_on_extend="keep")
    # CosineAnnealingLR past T_max=12 is periodic: the LR climbs from 0 back to its peak
    assert lrs[0] == pytest.approx(0, abs=1e-12)
    assert lrs[-1] > 0.9 * LR


def test_the_same_total_restores_the_saved_schedule_exactly(group, tmp_path, capsys):
    """A spot interruption, not an extension: whatever the policy, the saved state is the schedule."""
    store = tmp_path / "ckpt"
    stopped = ScheduledTask(cosine)
    assert _Run(stopped, config(tmp_path, total_steps=12), StopRequest()).run() == 0
    state, _, _ = CheckpointStore(store).load_latest()
    task = ScheduledTask(cosine)
    model = task.build_model()
    optimizer = task.build_optimizer(model)
    optimizer.load_state_dict(state["optimizer"])
    restored = schedule.restore(task, optimizer, task.build_scheduler(optimizer, 12), state, 12, 12)
    assert restored.state_dict() == state["scheduler"]


def fresh(build, total_steps: int):
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=LR, momentum=0.9)
    return optimizer, build(optimizer, total_steps)


def saved_after(build, total_steps: int, steps: int, *, with_total: bool) -> dict:
    optimizer, scheduler = fresh(build, total_steps)
    schedule.fast_forward(scheduler, steps)
    state = {"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict()}
    return {**state, "total_steps": total_steps} if with_total else state


def _builder_task(build):
    task = Task.__new__(ScheduledTask)
    task.build = build
    return task


def test_warm_up_is_not_repeated_when_the_schedule_is_rebuilt():
    state = saved_after(warmup_cosine, 12, 12, with_total=True)
    optimizer, scheduler = fresh(warmup_cosine, 24)
    optimizer.load_state_dict(state["optimizer"])
    rebuilt = schedule.restore(_builder_task(warmup_cosine), optimizer, scheduler, state, 12, 24)
    expected = reference_lrs(warmup_cosine, 24)[12]
    assert optimizer.param_groups[0]["lr"] == expected == rebuilt.get_last_lr()[0]
    assert expected > reference_lrs(warmup_cosine, 24)[0]  # not back at the warm-up's start


@pytest.mark.parametrize("build", [cosine, step_lr], ids=["cosine", "step"])
def test_a_checkpoint_from_before_the_policy_is_judged_by_its_schedule_s_settings(build):
    """Checkpoints written before total_steps was saved: T_max / step_size tell the old horizon."""
    state = saved_after(build, 12, 12, with_total=False)
    optimizer, scheduler = fresh(build, 24)
    assert schedule.horizon_changed(scheduler, state, 24)
    optimizer.load_state_dict(state["optimizer"])
    schedule.restore(_builder_task(build), optimizer, scheduler, state, 12, 24)
    assert optimizer.param_groups[0]["lr"] == reference_lrs(build, 24)[12]
    _, scheduler = fresh(build, 12)
    assert not schedule.horizon_changed(scheduler, state, 12)


def test_a_bad_policy_is_a_usage_error_naming_the_flag(capsys):
    import argparse

    parser = argparse.ArgumentParser()
    TrainConfig.add_arguments(parser)
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(["--checkpoint-dir=x", "--total-steps=1", "--global-batch-size=1",
                           "--schedule-on-extend=restart"])
    assert exited.value.code == 2
    assert "argument --schedule-on-extend: invalid choice: 'restart'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="--schedule-on-extend: one of rebuild, keep, got 'stretch'"):
        schedule.restore(None, None, object(), {"scheduler": {}}, 0, 1, "stretch")


def test_a_rebuilt_schedule_is_an_event_that_run_local_says(group, tmp_path, capsys):
    """Issue 32: the 'schedule is rebuilt' line reached only node0.log; run --local reads events."""
    from elastic_trainer.local import Event

    from torchfleet.local_schedule import schedule_line

    finish_then_extend(tmp_path, cosine, 12, 24)
    said = printed(capsys, "schedule_rebuilt")
    assert [(e["step"], e["total_steps"], e["was_total_steps"]) for e in said] == [(12, 24, 12)]
    line = schedule_line(Event(0.0, "node0", said[0]))
    assert line == ("extending: the learning-rate schedule is rebuilt for --total-steps=24 at step 12 "
                    "(the checkpoint's "
                    "was for --total-steps=12; the script's --schedule-on-extend=keep keeps the saved one)")


def test_the_same_total_emits_no_schedule_event(group, tmp_path, capsys):
    finish_then_extend(tmp_path, cosine, 12, 12)
    assert printed(capsys, "schedule_rebuilt") == []
