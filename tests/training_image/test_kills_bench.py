"""bench/kills.py's report (issue 23): percentiles, given-up recoveries, and which log folders it keeps.

The benchmark's kills are real; these pin the arithmetic and the clean-up its report rests on.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

spec = importlib.util.spec_from_file_location("kills", Path(__file__).resolve().parents[2] / "bench" / "kills.py")
kills = importlib.util.module_from_spec(spec)
spec.loader.exec_module(kills)


@pytest.mark.parametrize(("values", "q", "expected"), [
    ([3.0, 1.0, 2.0], 50, 2.0), (list(range(1, 101)), 95, 95), (list(range(1, 21)), 95, 19), ([7.0], 95, 7.0),
    ([], 95, None)])
def test_percentile_is_the_nearest_rank(values, q, expected):
    assert kills.percentile(values, q) == expected


def test_a_recovery_that_gave_up_is_counted_not_averaged():
    found = kills.distribution([1.0, None, 3.0, 2.0])
    assert found == {"n": 4, "gave_up": 1, "median": 2.0, "p95": 3.0, "max": 3.0}


def test_the_slowest_recoveries_and_every_given_up_one_keep_their_folders(tmp_path):
    folders = {name: tmp_path / name for name in ("fast", "slow", "hung", "failed-start")}
    for folder in folders.values():
        folder.mkdir()
    samples = [{"folder": str(folders["fast"]), "kill_to_step_s": 1.0},
               {"folder": str(folders["slow"]), "kill_to_step_s": 9.0},
               {"folder": str(folders["hung"]), "kill_to_step_s": None, "error": "no event within 180 s"},
               {"folder": str(folders["failed-start"]), "kill_to_step_s": None, "error": "never trained"}]
    top = kills.keep_slowest(samples, 1)
    assert [s["folder"] for s in top] == [str(folders["slow"])]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["failed-start", "hung", "slow"]  # fast removed
