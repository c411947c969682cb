"""`submit --max-duration / --max-cost` (issue 21): one absolute stop time in every pod's environment, the
trainer's TORCHFLEET_STOP_AT (tests/training_image/test_deadline.py runs the trainer against it)."""

from __future__ import annotations

import time

import pytest
import yaml

from torchfleet import cost
from torchfleet.cli import main
from torchfleet.jobs import limits

SUBMIT = ["submit", "a", "--stack", "aws-usw2", "--gpu", "t4", "--nodes", "1:4", "--image", "registry.example.com/t:1",
          "--dry-run"]


def stop_at(capsys, *flags: str) -> tuple[list[int], str]:
    capsys.readouterr()
    assert main([*SUBMIT, *flags, "--", "python", "train.py"]) == 0
    out, err = capsys.readouterr()
    values = []
    for doc in yaml.safe_load_all(out):
        for container in _containers(doc):
            values += [int(e["value"]) for e in container.get("env", []) if e["name"] == limits.ENV_STOP_AT]
    return values, err


def _containers(doc):
    found, todo = [], [doc]
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            if "containers" in item:
                found += item["containers"]
            todo += item.values()
        elif isinstance(item, list):
            todo += item
    return found


@pytest.mark.parametrize(("text", "seconds"), [("90m", 5400), ("6h", 21600), ("1d12h", 129600), ("1.5h", 5400),
                                               ("2h 30m", 9000), ("60s", 60)])
def test_durations(text, seconds):
    assert limits.parse_duration(text) == seconds


def test_max_duration_sets_one_stop_time_in_every_pod(capsys):
    before = time.time()
    values, err = stop_at(capsys, "--max-duration", "6h")
    assert values and len(set(values)) == 1
    assert before + 6 * 3600 - 1 <= values[0] <= time.time() + 6 * 3600
    assert "note: time limit: stops with a checkpoint at" in err and "6h0m" not in err and "6h after" in err


def test_an_inplace_job_gets_the_limit_too(capsys):
    # Until the in-place trainer read TORCHFLEET_STOP_AT (inplace.py) submit refused the flags with it (exit 2).
    before = time.time()
    values, _ = stop_at(capsys, "--recovery", "inplace", "--max-duration", "6h")
    assert values and len(set(values)) == 1
    assert before + 6 * 3600 - 1 <= values[0] <= time.time() + 6 * 3600


def test_max_cost_is_a_duration_at_the_jobs_hourly_ceiling_and_the_earlier_limit_wins(capsys):
    ceiling = cost.for_jobs(*_target_and_request()).total  # 4 nodes on the priciest T4 machine
    before = time.time()
    values, err = stop_at(capsys, "--max-cost", "10")
    assert values[0] == pytest.approx(before + 10 / ceiling * 3600, abs=5)
    assert f"--max-cost 10 USD at most {ceiling:.2f} USD/hour" in err
    values, err = stop_at(capsys, "--max-cost", "10", "--max-duration", "1h")
    assert values[0] == pytest.approx(before + min(3600, 10 / ceiling * 3600), abs=5)


def _target_and_request():
    from torchfleet.jobs import spec as jobspec
    from torchfleet.jobs import target as targets

    t = targets.from_stack("aws-usw2")
    req = jobspec.build_request(t, name="a", gpu="t4", nodes="1:4", gpus_per_node=None,
                                image="registry.example.com/t:1", command=["python", "train.py"])
    return t, [req]


@pytest.mark.parametrize(("flags", "message"), [
    (["--max-duration", "6"], "--max-duration: expected a number with a unit"),
    (["--max-duration", "10s"], "--max-duration: from 1m to 30d"),
    (["--max-duration", "40d"], "--max-duration: from 1m to 30d"),
    (["--max-cost", "-3"], "--max-cost: a number of US dollars above 0"),
    (["--max-cost", "lots"], "--max-cost: a number of US dollars above 0"),
])
def test_bad_limits_are_exit_2_naming_the_flag(capsys, flags, message):
    capsys.readouterr()
    assert main([*SUBMIT, *flags, "--", "python", "train.py"]) == 2
    assert message in capsys.readouterr().err


def test_max_cost_of_a_job_without_an_hourly_price_says_to_use_max_duration(capsys):
    code = main(["submit", "a", "--cpu", "--image", "registry.example.com/t:1", "--max-cost", "5", "--dry-run", "--",
                 "python", "t.py"])
    assert code == 2 and "limit it with --max-duration instead" in capsys.readouterr().err


def test_no_limit_without_the_flags(capsys):
    values, err = stop_at(capsys)
    assert values == [] and "time limit" not in err


def test_a_job_file_sets_the_limits_as_the_flags_do(tmp_path, capsys):
    job = tmp_path / "job.yaml"
    job.write_text("name: a\nstack: aws-usw2\ngpu: t4\nimage: registry.example.com/t:1\nmax-duration: 2h\n"
                   "max-cost: 1000\ncommand: [python, train.py]\n")
    before = time.time()
    assert main(["submit", "-f", str(job), "--dry-run"]) == 0
    out, err = capsys.readouterr()
    values = [int(e["value"]) for doc in yaml.safe_load_all(out) for c in _containers(doc) for e in c.get("env", [])
              if e["name"] == limits.ENV_STOP_AT]
    assert values and values[0] == pytest.approx(before + 7200, abs=5) and "(--max-duration 2h)" in err
