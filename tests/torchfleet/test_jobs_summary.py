"""The status view's figures as a pure function of the trainer's events (torchfleet/jobs/summary.py),
over tables of events: a steady run, a restart that lost steps, a scale-up that lost none, a run
from scratch after a crash with no checkpoint, and a finished one."""

import json

import pytest

from torchfleet.jobs.summary import (
    Checkpoint,
    WorldChange,
    events_from_lines,
    merge,
    render,
    render_text,
    summarize,
    total_steps_from_args,
)


def ev(kind, wall, **fields):
    return {"ev": kind, "wall": wall, **fields}


def steps(first, last, world, t0, per_s=2.0, gen=1):
    return [ev("step", t0 + (s - first) / per_s, step=s, world=world, gen=gen, loss=1.0 / s)
            for s in range(first, last + 1)]


STEADY = [ev("start", 100.0, world=2, gen=1), *steps(1, 30, 2, 100.0),
          ev("ckpt", 110.0, step=20, gen=1)]
# Killed at step 30 with the last checkpoint at 20: the next group resumes at 20 and trains 21-30 again.
RESTART = [*STEADY, ev("resumed", 130.0, step=20, world=1, gen=2, from_gen=1),
           *steps(21, 40, 1, 131.0, per_s=1.0, gen=2)]
# A scale-up: the stop checkpoint is of the last step trained, so the new group loses nothing.
SCALE_UP = [*RESTART, ev("ckpt", 151.0, step=40, gen=2), ev("resumed", 155.0, step=40, world=2, gen=3, from_gen=2),
            *steps(41, 50, 2, 156.0, gen=3)]
# A crash before any checkpoint: the next group starts from scratch and the 12 steps are lost.
FROM_SCRATCH = [ev("start", 0.0, world=1, gen=1), *steps(1, 12, 1, 0.0),
                ev("start", 20.0, world=1, gen=2), *steps(1, 3, 1, 21.0, gen=2)]
DONE = [*STEADY, *steps(31, 40, 2, 115.0), ev("ckpt", 121.0, step=40, gen=1), ev("done", 121.5, step=40, world=2)]

# (id, events, total steps, step, steps/s, eta, world, history [(step, world)], restarts, lost, checkpoint step, done)
CASES = [
    ("steady", STEADY, 100, 30, 2.0, 35.0, 2, [(0, 2)], 0, 0, 20, False),
    ("restart-loses-steps", RESTART, 100, 40, 1.0, 60.0, 1, [(0, 2), (20, 1)], 1, 10, 20, False),
    ("scale-up-loses-none", SCALE_UP, 100, 50, 2.0, 25.0, 2, [(0, 2), (20, 1), (40, 2)], 1, 10, 40, False),
    ("from-scratch-loses-all", FROM_SCRATCH, None, 3, 2.0, None, 1, [(0, 1)], 1, 12, None, False),
    ("done", DONE, 40, 40, 2.0, None, 2, [(0, 2)], 0, 0, 40, True),
    ("nothing-yet", [], 100, None, None, None, None, [], 0, 0, None, False),
]


@pytest.mark.parametrize(("events", "total", "step", "rate", "eta", "world", "history", "restarts", "lost",
                          "ckpt", "done"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_summary_from_events(events, total, step, rate, eta, world, history, restarts, lost, ckpt, done):
    s = summarize(events, total)
    assert s.step == step
    assert s.steps_per_s == (pytest.approx(rate) if rate is not None else None)
    assert s.eta_s == (pytest.approx(eta) if eta is not None else None)
    assert s.world == world
    assert [(c.step, c.world) for c in s.world_history] == history
    assert (s.restarts, s.lost_steps, s.done) == (restarts, lost, done)
    assert (s.last_checkpoint.step if s.last_checkpoint else None) == ckpt


def test_rate_is_of_the_current_group_only():
    # Right after a resume there is one step event of the new group: no speed yet, rather than one
    # computed across the pause.
    events = [*STEADY, ev("resumed", 200.0, step=20, world=1, gen=2), ev("step", 201.0, step=21, world=1)]
    assert summarize(events, 100).steps_per_s is None


def test_events_are_read_from_log_lines_and_merged_once():
    lines = ["[torchfleet] torchrun --nnodes=1:2", "@@tf " + json.dumps(ev("start", 1.0, world=1)),
             "2026 [rank0] INFO @@tf {not json", "prefix @@tf " + json.dumps(ev("step", 2.0, step=1, world=1)),
             "@@tf [1, 2]", "@@tf " + json.dumps({"wall": 3.0})]
    found = events_from_lines(lines)
    assert [e["ev"] for e in found] == ["start", "step"]
    # The previous container's log repeats what the current one holds; another pod adds its own.
    merged = merge(found, [found[1], ev("exit", 1.5, rank=1, code=143)])
    assert [e["ev"] for e in merged] == ["start", "exit", "step"]


@pytest.mark.parametrize(("args", "total"), [
    (["train.py", "--total-steps", "400"], 400), (["--module", "m", "--total-steps=50", "--lr", "1"], 50),
    (["train.py", "--total-steps"], None), (["train.py", "--total-steps=x"], None), (["train.py"], None),
])
def test_total_steps_from_the_command(args, total):
    assert total_steps_from_args(args) == total


def test_render_names_every_figure():
    text = render_text(summarize(RESTART, 100), now=160.0)
    assert "Step:            40 of 100 (40%)   loss 0.025" in text
    assert "Speed:           1.00 steps/s   ETA 1m00s" in text
    assert "World size:      1 now; over time: 2 (step 0) -> 1 (step 20)" in text
    assert "Restarts:        1; 10 steps lost" in text
    assert "Last checkpoint: step 20 (generation 1), 50s ago" in text


def test_render_before_any_event_says_so():
    assert render(summarize([]))[0][1].startswith("no progress events yet")


def test_summary_as_dict_is_plain_data():
    s = summarize(SCALE_UP, 100)
    data = json.loads(json.dumps(s.as_dict()))
    assert data["world_history"][1] == {"step": 20, "world": 1, "wall": 130.0}
    assert s.world_history[2] == WorldChange(40, 2, 155.0)
    assert s.last_checkpoint == Checkpoint(40, 2, 151.0)


def test_stopped_tensorboard_scalars_are_shown_once_with_why():
    failed = {"ev": "scalars_failed", "wall": 125.0, "dir": "/mnt/shared/j/tb",
              "error": "add_scalar failed: OSError: [Errno 28] No space left on device"}
    again = {**failed, "wall": 150.0, "error": "close failed: OSError: later"}
    s = summarize([*RESTART[:3], failed, *RESTART[3:], again], 100)
    assert s.scalars_failed == "add_scalar failed: OSError: [Errno 28] No space left on device"
    lines = dict(render(s))
    assert lines["TensorBoard"] == ("scalars stopped (add_scalar failed: OSError: [Errno 28] No space left on "
                                    "device); training goes on without them")
    assert "TensorBoard" not in dict(render(summarize(RESTART, 100)))  # said only when it happened


def test_non_finite_steps_are_counted_once_and_a_give_up_is_named():
    # Two in-place groups report the same skipped steps; a restart-mode give-up is one exit per group
    # (rank 0's), the other ranks' exits are not counted again.
    nan = [ev("nonfinite", 120.0 + s, step=s, loss="nan", in_a_row=1, group=g) for s in (31, 32) for g in (0, 1)]
    gave_up = [ev("exit", 133.0, step=32, code=65, reason="nonfinite", rank=r) for r in (0, 1)]
    s = summarize([*STEADY, *nan, *gave_up], 100)
    assert (s.nonfinite_steps, s.nonfinite_exits) == ((31, 32), 1)
    assert dict(render(s))["Non-finite loss"] == (
        "2 steps skipped (NaN or infinite loss), last at step 32; too many in a row once "
        "(--max-nonfinite-steps): the workers restarted from the last checkpoint")
    assert "Non-finite loss" not in dict(render(summarize(STEADY, 100)))  # said only when it happened
    assert json.loads(json.dumps(s.as_dict()))["nonfinite_steps"] == [31, 32]


# In-place jobs (issue 23: the status view said `Restarts: 1` for an in-place run in which nothing
# restarted). Every replica group prints its own events, with its `group` (elastic_trainer/inplace/group.py).
def group_steps(first, last, world, t0, groups=(0, 1)):
    return [ev("step", t0 + (s - first) * 0.05, step=s, group=g, world=world) for s in range(first, last + 1)
            for g in groups]


# Both groups in the job's first quorum at step 0: each announces the start (a run of `torchfleet demo
# --recovery inplace` where neither group healed from the other).
TOGETHER = [ev("start", 10.0, group=0, pid=1), ev("quorum", 10.1, group=0, step=0, participants=2, replica_rank=0),
            ev("start", 10.2, group=1, pid=2), *group_steps(1, 30, 2, 11.0),
            ev("ckpt", 12.0, step=20, gen=1, group=0, reason="periodic")]
# The sequence of a demo run (its logs, trimmed): group 1 trains alone, group 0 heals from it, group 1 is
# killed, the replacement starts after the survivor's last step, finds the final checkpoint, and ends.
LATE_GROUP = [ev("start", 59.62, group=1, pid=9515), *group_steps(1, 5, 1, 59.67, groups=(1,)),
              ev("healed", 59.93, group=0, pid=9521, step=5), *group_steps(6, 37, 2, 60.05),
              *group_steps(38, 200, 1, 62.9, groups=(0,)), ev("done", 71.958, group=0, step=200),
              ev("ckpt", 71.979, step=200, gen=2, group=0, reason="final"),
              ev("resumed", 74.345, step=200, group=1, from_gen=2, source="store"),
              ev("done", 74.346, group=1, step=200), ev("final_seen", 74.346, group=1, step=200, waited_s=0.0)]
# What is a restart: the Lighthouse was lost, both groups' workers exited and resumed from the store.
WHOLE_JOB = [*TOGETHER, ev("exit", 13.0, group=0, step=30, code=75, reason="no quorum"),
             ev("exit", 13.0, group=1, step=30, code=75, reason="no quorum"),
             ev("resumed", 20.0, step=20, group=0, from_gen=1, source="store"),
             ev("resumed", 20.1, step=20, group=1, from_gen=1, source="store"), *group_steps(21, 25, 2, 21.0)]


@pytest.mark.parametrize(("events", "step", "restarts", "lost", "done"), [
    (TOGETHER, 30, 0, 0, False), (LATE_GROUP, 200, 0, 0, True), (WHOLE_JOB, 25, 1, 10, False)],
    ids=["groups-start-together", "group-started-after-the-last-step", "whole-job-resumed-from-the-store"])
def test_inplace_restarts_count_job_restarts_not_group_announcements(events, step, restarts, lost, done):
    s = summarize(merge(events), 200)
    assert (s.step, s.restarts, s.lost_steps, s.done) == (step, restarts, lost, done)
    assert f"Restarts:        {restarts}; {lost} steps lost" in render_text(s)


# Issue 32: `Restarts: 4` after one kill. run --local's world sizes 1 (step 0) -> 2 (step 16) -> 1 (step 50)
# -> 2 (step 178): node0 held before step 1 for the second node, its workers restarted when node1 came
# (once at world 1, the round missing it; once at world 2), then the kill, then the replacement's join.
ONE_KILL_WITH_JOINS = [ev("start", 0.0, world=1, gen=1), ev("hold", 1.0, step=1, world=1, until_world=2),
                       ev("ckpt", 5.0, step=1, gen=1), ev("resumed", 6.0, step=1, world=1, gen=2),
                       *steps(2, 16, 1, 7.0, gen=2), ev("ckpt", 15.0, step=16, gen=2),
                       ev("resumed", 16.0, step=16, world=2, gen=3), *steps(17, 55, 2, 17.0, gen=3),
                       ev("ckpt", 30.0, step=50, gen=3),
                       ev("resumed", 40.0, step=50, world=1, gen=4), *steps(51, 178, 1, 41.0, gen=4),
                       ev("ckpt", 120.0, step=178, gen=4), ev("resumed", 121.0, step=178, world=2, gen=5),
                       *steps(179, 200, 2, 122.0, gen=5)]


def test_nodes_joining_are_not_restarts_and_are_said_apart():
    s = summarize(ONE_KILL_WITH_JOINS, 300)
    assert [(c.step, c.world) for c in s.world_history] == [(0, 1), (16, 2), (50, 1), (178, 2)]
    assert (s.restarts, s.joins, s.lost_steps) == (1, 3, 5)  # the kill at step 55, resumed at 50
    assert ("Restarts:        1; 5 steps lost (trained again after resuming from a checkpoint); 3 joins (nodes added, "
            "not counted as restarts)") in render_text(s)
    assert s.as_dict()["joins"] == 3


def test_a_failure_at_the_same_world_size_is_a_restart():
    s = summarize(FROM_SCRATCH)
    assert (s.restarts, s.joins) == (1, 0)
    assert "join" not in render_text(s)
