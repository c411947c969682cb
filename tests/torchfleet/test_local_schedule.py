"""`torchfleet run --local`'s waits on the job's events (torchfleet/local_schedule.py), on a real EventLog.

Regression: a job that finished while the replacement of a killed node was starting (the survivor's last
steps took less than --replace-after) ended in the wait for the replacement's join, which looked only at
events after the replacement started: `run --local` sat there the whole RECOVERY_TIMEOUT_S (600 s, seen
here with the README's command), then failed. The same with --kill-every: a finish before the next interval
began was missed, and one more node was killed after the end.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

from elastic_trainer.local import Event, EventLog

from torchfleet import local_schedule


def _job(*events: tuple[float, str, dict]) -> SimpleNamespace:
    log = EventLog()
    for t, node, data in events:
        log.add(Event(t, node, data))
    return SimpleNamespace(events=log)


def test_the_wait_for_a_join_ends_at_a_finish_that_came_before_the_replacement_started():
    now = time.monotonic()
    job = _job((now - 5, "node0", {"ev": "step", "step": 61, "world": 1}),
               (now - 4, "node0", {"ev": "done", "step": 64, "world": 1}))
    started_at = now - 2  # the replacement, 2 s after the survivor's first step
    ended = local_schedule._step(job, started_at, 2, timeout=1.0, describe="a step with all 2 again")
    assert ended.kind == "done" and ended["step"] == 64


def test_a_step_before_since_still_does_not_count():
    now = time.monotonic()
    job = _job((now - 5, "node0", {"ev": "step", "step": 3, "world": 2}))
    try:
        local_schedule._step(job, now - 4, 2, timeout=0.2)
    except TimeoutError:
        return
    raise AssertionError("a step before `since` was taken for one after it")


def test_a_clock_schedule_sees_a_finish_before_its_interval_began():
    now = time.monotonic()
    job = _job((now - 3, "node0", {"ev": "done", "step": 64, "world": 1}))
    schedule = local_schedule.Schedule(nodes=2, every_s=0.5)
    assert local_schedule._trigger(job, schedule, since=now - 1).kind == "done"  # not None: no kill after the end
