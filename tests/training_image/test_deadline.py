"""A job's time limit (TORCHFLEET_STOP_AT, from `submit --max-duration/--max-cost`): every rank stops after
the same step, the stop checkpoint is committed, the worker exits 0, and a later run resumes from it
(issue 21). The real trainer in-process (tests/harness/trainer_run.py)."""

from __future__ import annotations

import time

import pytest
from elastic_trainer import deadline
from elastic_trainer.signals import StopRequest
from elastic_trainer.store.checkpoint import CheckpointStore
from elastic_trainer.trainer import _Run

from tests.harness.trainer_run import Task, config, printed


def test_the_limit_stops_after_a_step_with_a_checkpoint_and_exit_0(group, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(deadline.ENV_STOP_AT, str(time.time() + 3600))
    votes: list[int] = []
    monkeypatch.setattr(deadline, "due", lambda limit: votes.append(1) or len(votes) >= 3)  # past it at step 3
    assert _Run(Task(), config(tmp_path, checkpoint_every=10), StopRequest()).run() == 0
    events = printed(capsys)
    assert [e["step"] for e in events if e["ev"] == "step"] == [1, 2, 3]
    assert [(e["step"], e["code"], e["reason"]) for e in events if e["ev"] == "exit"] == [(3, 0, "time_limit")]
    assert not [e for e in events if e["ev"] == "done"]  # stopped, not finished
    assert [c.step for c in CheckpointStore(tmp_path / "ckpt").committed()] == [3]  # the stop checkpoint


def test_a_run_after_the_limit_resumes_from_the_stop_checkpoint(group, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(deadline.ENV_STOP_AT, str(time.time() - 1))  # already past: one step, saved
    assert _Run(Task(), config(tmp_path), StopRequest()).run() == 0
    assert [e["step"] for e in printed(capsys, "exit")] == [1]
    monkeypatch.setenv(deadline.ENV_STOP_AT, str(time.time() + 3600))
    assert _Run(Task(), config(tmp_path), StopRequest()).run() == 0
    events = printed(capsys)
    assert [e["step"] for e in events if e["ev"] == "resumed"] == [1]
    assert [e["step"] for e in events if e["ev"] == "done"] == [6]


def test_a_sigterm_before_the_limit_is_still_a_spot_notice(group, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(deadline.ENV_STOP_AT, str(time.time() + 3600))
    stop = StopRequest()
    task = Task(stop, stop_at_call=2)
    assert _Run(task, config(tmp_path), stop).run() == 143  # retried by the job, as before


@pytest.mark.parametrize("value", ["soon", "-5", "nan", "inf"])
def test_a_malformed_limit_is_an_error_naming_the_variable(value):
    with pytest.raises(ValueError, match=r"\$TORCHFLEET_STOP_AT: expected Unix seconds"):
        deadline.stop_at({deadline.ENV_STOP_AT: value})


def test_no_limit_without_the_variable():
    assert deadline.stop_at({}) is None and not deadline.due(None)
