"""bench/goodput.py's figures from a made-up event log (issue 14): what counts as useful, redone and resumed.

The benchmark's runs are real; these pin the arithmetic its report rests on.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from elastic_trainer.local import Event

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


# -- --overhead (goodput_overhead.py): one replica group, the GPU run ------------------------
overhead = goodput.run_overhead.__globals__  # the module goodput.py loaded it from (bench/ on sys.path)


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--overhead", "--task=bert"], "--task=bert"),
        (["--overhead", "--repeats=0"], "--repeats=0"),
        (["--overhead", "--repeats=two"], "--repeats=two"),
        (["--overhead", "--modes=restart"], "--modes=restart"),
        (["--task=gpt"], "--task=gpt: only with --overhead"),
        (["--repeats=2"], "--repeats=2: only with --overhead"),
    ],
)
def test_overhead_refuses_bad_options_naming_them_before_starting_anything(argv, named, capsys, monkeypatch):
    started = []
    monkeypatch.setattr(goodput, "run_overhead", lambda *a, **k: started.append(a))
    monkeypatch.setattr(goodput, "Etcd", lambda *a, **k: started.append(a))
    with pytest.raises(SystemExit) as exc:
        goodput.main(argv)
    assert exc.value.code == 2 and named in capsys.readouterr().err
    assert not started


def test_overhead_prints_one_json_object_of_the_run(capsys, monkeypatch):
    calls = []
    monkeypatch.setattr(goodput, "run_overhead", lambda *a, **k: calls.append(a) or {"bench": "overhead"})
    assert goodput.main(["--overhead", "--quick", "--repeats=2", "--task=gpt", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"bench": "overhead"}
    assert calls[0][:3] == ("gpt", True, 2)


def test_rate_from_steps_times_the_steps_after_the_warmup_and_needs_every_step_reported():
    events = [step(10 + i * 0.05, i, world=1) for i in range(1, 31)]
    assert overhead["rate_from_steps"](events, warmup=10, last=30) == pytest.approx(20.0)
    with pytest.raises(ValueError, match="--progress-every must be 1"):
        overhead["rate_from_steps"](events[::2], warmup=10, last=30)


def test_throughput_summary_is_the_medians_ratio_with_every_sample():
    work = overhead["workload"]("gpt", True)
    bare = [{"steps_per_s": r, "cpu_ms_per_step": 40.0} for r in (20.0, 25.0, 30.0)]
    inplace = [{"steps_per_s": r, "cpu_ms_per_step": 41.0} for r in (19.0, 24.0, 25.0)]
    summary = overhead["summarize_throughput"](bare, inplace, work)
    assert summary["ratio"] == pytest.approx(0.96) and summary["meets_target"]
    assert summary["paired_ratios"] == [0.95, 0.96, 0.8333]
    assert summary["step_overhead_ms"] == pytest.approx(1000 / 24 - 1000 / 25, abs=1e-3)
    assert summary["samples"]["inplace_steps_per_s"] == [19.0, 24.0, 25.0]


def test_a_store_heal_counts_the_killed_workers_last_step_even_if_its_line_arrives_after_the_kill():
    # killed at 10.0; its step 17 line arrives at 10.01; the new worker resumes from step 10
    events = [step(9.9, 16, world=1), step(10.01, 17, world=1),
              Event(12.5, "node0", {"ev": "resumed", "step": 10, "source": "store"}), step(12.6, 11, world=1)]
    sample = overhead["store_heal_sample"](events, killed_at=10.0)
    assert sample["kill_to_resumed_s"] == pytest.approx(2.5) and sample["kill_to_next_step_s"] == pytest.approx(2.6)
    assert sample["redone_steps"] == 7


@pytest.mark.parametrize(("extra", "read_store"),
                         [([], False), ([Event(21, "r0", {"ev": "resumed", "step": 5})], True)])
def test_a_peer_heal_is_timed_from_the_replacements_start_and_a_store_read_is_reported(extra, read_store):
    events = [step(9.9, 40, world=2), step(11.05, 41, world=1, node="node0"),
              Event(25.0, "r0", {"ev": "healed", "step": 60}), step(25.2, 61, world=2, node="r0"), *extra]
    sample = overhead["peer_heal_sample"](events, "r0", killed_at=10.0, started_at=18.0)
    assert sample == {"survivor_next_step_s": 1.05, "start_to_healed_s": 7.0, "start_to_step_with_peer_s": 7.2,
                      "read_store": read_store}
