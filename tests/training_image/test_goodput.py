"""bench/goodput.py's figures from a made-up event log (issue 14): what counts as useful, redone and resumed.

The benchmark's runs are real; these pin the arithmetic its report rests on.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from elastic_trainer.localrun import Event

spec = importlib.util.spec_from_file_location("goodput", Path(__file__).resolve().parents[2] / "bench" / "goodput.py")
goodput = importlib.util.module_from_spec(spec)
spec.loader.exec_module(goodput)


def step(t: float, number: int, world: int = 3, node: str = "node0") -> Event:
    return Event(t, node, {"ev": "step", "step": number, "world": world})


def test_progress_counts_a_step_redone_after_a_restore_once():
    # steps 1..10, restored to 5, then 6..12: net progress over the window is 12 - 2 = 10, not 17
    events = [step(i, i) for i in range(1, 11)] + [step(10 + i, 4 + i) for i in range(1, 9)]
    assert goodput.progress(events, start=2.5, end=100) == (2, 12)


def test_trained_share_counts_a_step_of_two_groups_out_of_three_as_two_thirds():
    events = [step(1, 1), step(2, 2, world=2), step(2.01, 2, world=2, node="node1"), step(3, 3)]
    assert goodput.trained_share(events, 0, 10, groups=3) == pytest.approx(1 + 2 / 3 + 1)


@pytest.mark.parametrize(
    ("mode", "events", "resume_s", "redone"),
    [
        # in place: the survivors' next step at 2 groups, 1.1 s after the kill, continuing at 41
        ("inplace", [step(9.9, 40), step(11.1, 41, world=2)], 1.1, 0),
        # restart: a restore to the checkpoint of 30 at 14 s, its first step at 15 s: 10 steps redone
        ("restart", [step(9.9, 40), Event(14, "node1", {"ev": "resumed", "step": 30}), step(15, 31, world=2)],
         5.0, 10),
        # restart before any checkpoint: "start" from step 0
        ("restart", [step(9.9, 40), Event(14, "node1", {"ev": "start"}), step(15, 1, world=2)], 5.0, 40),
    ],
)
def test_measure_fault(mode, events, resume_s, redone):
    sample = goodput.measure_fault(events, {"node": "node2", "killed_at": 10.0}, mode, t0=0.0)
    assert (sample["resume_s"], sample["redone_steps"]) == (pytest.approx(resume_s), redone)


def test_a_fault_the_job_never_recovered_from_has_no_resume_time():
    sample = goodput.measure_fault([step(9.9, 40)], {"node": "node2", "killed_at": 10.0}, "inplace", t0=0.0)
    assert sample["resume_s"] is None and sample["redone_steps"] is None


def test_summary_goodput_is_useful_steps_per_second_over_the_baseline():
    run = {"steps_per_s": 24.0, "samples": [{"resume_s": 1.0, "redone_steps": 0, "join_s": 9.0,
                                             "join_redone_steps": 0},
                                            {"resume_s": 2.0, "redone_steps": 3, "join_s": 11.0,
                                             "join_redone_steps": 1}],
           "faults_injected": 2, "batches_trained": 1400.0, "duration_s": 60.0}
    summary = goodput.summarize(run, baseline_rate=25.0)
    assert summary["goodput"] == pytest.approx(0.96)
    assert (summary["resume_s"], summary["redone_steps"], summary["join_s"]) == (1.5, 4, 10.0)
    assert summary["sample_goodput"] == pytest.approx(1400 / 60 / 25, abs=1e-4)
