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


# The reviewer's run (issue 32): `run --local --nodes 2 --kill-at 60 -- my_train.py --total-steps=300` with a
# fast script. node0 trained every step alone; node1 came after the job's end, found its rendezvous closed
# and exited 75 (the launcher's "closed without this node"). The run said `exit codes {'node0': 0, 'node1': 75}`
# and `0 kill(s)`, exited 1 and said nothing of the kill that never came.
class _Node:
    def __init__(self, name: str, code: int) -> None:
        self.name, self.pid, self.code, self.started_at = name, 1000, code, time.monotonic()

    def wait(self, timeout: float) -> int:
        return self.code


def _replay(tmp_path, events, codes: dict[str, int], schedule, capsys):
    from torchfleet import local_folder, local_nodes

    job = _job(*events)
    job.nodes = []

    def start(slot: int, index: int) -> _Node:
        node = _Node(f"node{index}", codes[f"node{index}"])
        job.nodes.append(node)
        return node

    record = local_folder.Record(tmp_path, name="t")
    nodes = local_schedule._Nodes(job, record, start)
    code = local_schedule._timeline(job, nodes, set(), schedule, local_nodes.Timeline(), 300, False)
    return code, capsys.readouterr().out


def test_a_first_node_that_came_after_the_end_fails_nothing_and_the_missed_kill_is_said(tmp_path, capsys):
    now = time.monotonic()
    events = [(now - 9, "node0", {"ev": "hold", "step": 1, "world": 1, "until_world": 2}),
              (now - 8, "node0", {"ev": "step", "step": 1, "world": 1, "loss": 1.0}),
              (now - 1, "node0", {"ev": "done", "step": 300, "world": 1})]
    code, out = _replay(tmp_path, events, {"node0": 0, "node1": 75},
                        local_schedule.Schedule(nodes=2, every_s=None, at_steps=[60]), capsys)
    assert code == 0, out
    assert "node1 exited 75: the job had finished without it and closed its rendezvous" in out
    assert ("no kill: the kill at step 60 (--kill-at) never happened: the run ended at step 300 before all 2 nodes "
            "trained together") in out
    assert "--step-delay-s" in out


def test_a_clock_kill_the_run_ended_before_is_said(tmp_path, capsys):
    now = time.monotonic()
    events = [(now - 9, "node0", {"ev": "step", "step": 1, "world": 1}),
              (now - 8, "node1", {"ev": "step", "step": 2, "world": 2}),
              (now - 1, "node0", {"ev": "done", "step": 300, "world": 2})]
    code, out = _replay(tmp_path, events, {"node0": 0, "node1": 0},
                        local_schedule.Schedule(nodes=2, every_s=30.0), capsys)
    assert code == 0, out
    assert ("no kill: the kill after 30 s of training with every node (--kill-every) never happened: the run ended at "
            "step 300, 7 s after all 2 nodes trained together (step 2)") in out


def test_a_node_that_fails_otherwise_still_fails_the_run(tmp_path, capsys):
    now = time.monotonic()
    events = [(now - 9, "node0", {"ev": "step", "step": 1, "world": 2}),
              (now - 1, "node0", {"ev": "done", "step": 300, "world": 2})]
    code, out = _replay(tmp_path, events, {"node0": 0, "node1": 1},
                        local_schedule.Schedule(nodes=2, every_s=None), capsys)
    assert code == 1, out
    assert "no kill" not in out  # none was asked for


def test_torchfleet_logs_says_a_rebuilt_schedule_in_words():
    import json

    from torchfleet.jobs import log_lines

    raw = "@@tf " + json.dumps({"ev": "schedule_rebuilt", "wall": 1.0, "step": 300, "total_steps": 600,
                                "was_total_steps": 300})
    assert log_lines.Readable().line(raw).endswith(
        "the learning-rate schedule is rebuilt for --total-steps=600 at step 300 (the checkpoint's was for "
        "--total-steps=300; --schedule-on-extend=keep keeps the saved one)")


def test_a_kill_that_came_later_than_kill_at_says_why():
    # issue 32: `--recovery inplace --kill-at 60` printed `killed group1-1 at step 97` with no reason
    schedule = local_schedule.Schedule(2, None, [60], kills=1)  # the first kill, just made
    waited = local_schedule.kill_moved(schedule, 97, 97, "groups")
    assert "--kill-at 60 moved: a kill waits until all 2 groups train together, which first happened at step 97" \
        in waited
    lagged = local_schedule.kill_moved(schedule, 64, 12)
    assert "--kill-at 60 moved" in lagged and "kills when it sees step 60" in lagged and "step 64" in lagged
    assert local_schedule.kill_moved(schedule, 60, 12) == ""  # on time: nothing to say
    assert local_schedule.kill_moved(local_schedule.Schedule(2, 30.0, [], kills=1), 97, 97) == ""  # --kill-every
