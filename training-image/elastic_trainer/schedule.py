"""The learning-rate schedule of a resumed run, and what a changed ``--total-steps`` does to it (issue 22).

A Task builds its scheduler for ``total_steps`` (``CosineAnnealingLR(T_max=total_steps)``,
``StepLR(step_size=total_steps // 3)``), and a scheduler's ``state_dict`` holds what it was built
with (``T_max``, ``step_size``, ``base_lrs``) besides its position. Restoring it as saved brought a
finished run's horizon back into an extended one: a 100-step cosine run resumed with
``--total-steps=200`` kept ``T_max=100``, and past ``T_max`` the cosine is periodic, so the learning
rate climbed from 0 back to its peak (StepLR kept its old step size the same way).

The policy, ``--schedule-on-extend`` (training-image/README.md, "Extending a job"):

- ``rebuild`` (the default): when the checkpoint was written for another ``--total-steps``, the
  schedule is the one the task builds for the new total, at the resumed step: from there on the
  learning rate at every step is the one a run asked for the new total from the start has at that
  step. Warm-up is not repeated (it lies behind the resumed step); the optimizer's state (momentum,
  Adam's moments) is kept. A finished 100-step cosine run extended to 200 resumes at the cosine of
  200 at step 100 (half the peak) and anneals to 0 at step 200. Hugging Face's schedulers behave so
  on a resume with a new ``max_steps``: they are LambdaLRs of a ``functools.partial`` holding
  ``num_training_steps`` (transformers/optimization.py), and ``LambdaLR.state_dict`` saves only a
  callable's ``__dict__``, which a partial's keywords are not in (torch/optim/lr_scheduler.py).
- ``keep``: the checkpoint's schedule as saved, old horizon included (for a schedule that should
  run on regardless of the total, e.g. a cyclic one).

With the same ``--total-steps`` the saved schedule is restored exactly, whichever the choice.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import torch

from elastic_trainer.events import emit, log

EXTEND_POLICIES = ("rebuild", "keep")
# A scheduler's position, not its settings: what differs between a fresh schedule and a saved one of
# the same settings (LRScheduler.state_dict is its __dict__ but the optimizer).
_POSITION_KEYS = frozenset({"last_epoch", "_step_count", "_last_lr", "_get_lr_called_within_step", "_is_initial",
                            "verbose", "base_lrs", "_initial_step"})


def _settings(state: Any) -> Any:
    if isinstance(state, Mapping):
        return {k: _settings(v) for k, v in state.items() if k not in _POSITION_KEYS}
    if isinstance(state, (list, tuple)):
        return [_settings(v) for v in state]
    if isinstance(state, torch.Tensor):
        return state.tolist()
    return state


def horizon_changed(scheduler, state: Mapping[str, Any], total_steps: int) -> bool:
    """Whether the checkpoint's schedule was built for another number of steps than this run's.

    A checkpoint records its run's ``total_steps``; one written before it did is compared by the
    schedule's settings (T_max, step_size, milestones, ...): the task built another schedule now.
    """
    if state.get("total_steps") is not None:
        return int(state["total_steps"]) != total_steps
    return _settings(scheduler.state_dict()) != _settings(state["scheduler"])


def fast_forward(scheduler, steps: int) -> None:
    """Step a fresh scheduler to ``steps``: the same calls, in the same order, as a run that trained them."""
    with warnings.catch_warnings():
        # "lr_scheduler.step() before optimizer.step()": true here, and meant
        warnings.simplefilter("ignore", UserWarning)
        for _ in range(steps):
            scheduler.step()


def restore(task, optimizer: torch.optim.Optimizer, scheduler, state: Mapping[str, Any], step: int,
            total_steps: int, policy: str = "rebuild"):
    """The scheduler to train on after resuming at ``step`` from ``state`` (a checkpoint's).

    ``scheduler`` is the one the task built for ``total_steps`` before the optimizer's state was
    loaded; what is returned may be another one, built again on the optimizer (``rebuild``).
    """
    if policy not in EXTEND_POLICIES:
        raise ValueError(f"--schedule-on-extend: one of {', '.join(EXTEND_POLICIES)}, got {policy!r}")
    saved = state.get("scheduler")
    if scheduler is None or saved is None:
        return scheduler
    if policy == "keep" or not horizon_changed(scheduler, state, total_steps):
        scheduler.load_state_dict(saved)
        return scheduler
    # The loaded optimizer's groups hold the saved run's last LR and its schedule's starting LR
    # (initial_lr, set by the first scheduler built on it): a schedule starts from the latter. The
    # optimizer's hyperparameters stay the checkpoint's, as they do without a schedule.
    for group in optimizer.param_groups:
        group["lr"] = group.setdefault("initial_lr", group["lr"])
    rebuilt = task.build_scheduler(optimizer, total_steps)
    fast_forward(rebuilt, step)
    # One line that says so (issue 32: an extended run changed its learning rate without a word); the
    # logger is rank 0's at INFO (events.setup_logging), so N ranks print it once
    saved_total = state.get("total_steps")
    was = f"--total-steps={saved_total}" if saved_total is not None else "another --total-steps"
    log.info("extending: the checkpoint's schedule was for %s, so the learning-rate schedule is rebuilt for "
             "--total-steps=%d at step %d (--schedule-on-extend=keep keeps the saved one)", was, total_steps, step)
    # and an event, which `run --local` shows in its own output (the log line reached only node0.log)
    if not torch.distributed.is_initialized() or torch.distributed.get_rank() == 0:
        emit("schedule_rebuilt", step=step, total_steps=total_steps, was_total_steps=saved_total)
    return rebuilt
