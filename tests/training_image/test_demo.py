"""`torchfleet demo`: the offline default job, run for real, and its cleanup on Ctrl-C."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.harness.processes import TAG_VARIABLE, assert_none_left, new_tag, tagged_processes

REPO = Path(__file__).resolve().parents[2]
# the demo's own entry, without depending on how torchfleet/cli.py wires the subcommand
RUNNER = (
    "import argparse, sys; from torchfleet import demo; p = argparse.ArgumentParser(); "
    "demo.register(p.add_subparsers()); a = p.parse_args(sys.argv[1:]); sys.exit(a.func(a))"
)

pytestmark = pytest.mark.slow


def start_demo(tmp_path, tag: str, *args: str, workdir: bool = True) -> subprocess.Popen[str]:
    env = {**os.environ, TAG_VARIABLE: tag, "PYTHONPATH": str(REPO), "TMPDIR": str(tmp_path)}
    kept = [f"--workdir={tmp_path}"] if workdir else []
    return subprocess.Popen([sys.executable, "-u", "-c", RUNNER, "demo", *kept, *args],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_demo_prints_the_recovery_timeline(tmp_path):
    tag = new_tag()
    demo = start_demo(tmp_path, tag)
    out, _ = demo.communicate(timeout=300)
    assert demo.returncode == 0, out
    for line in ("training with 2 nodes", "killed node1", "resumed with 1 node from the checkpoint of step",
                 "started node2 as the replacement", "rejoined with 2 nodes", "finished: all 400 steps"):
        assert line in out, out
    assert "kill to resume" in out
    # The closing status view (issue 13): at least one restart (the kill) and one join (node2's; issue 32:
    # a join is no restart; a loaded machine can add a worker group), and the steps the timeline says
    # were lost are the ones the view counts (the join's stop checkpoint loses none).
    lost = re.search(r"lost (\d+) steps;", out).group(1)
    view = re.search(r"Restarts: +(\d+); (\d+) steps lost .*; (\d+) joins? \(nodes added", out)
    assert view and int(view.group(1)) >= 1 and int(view.group(3)) >= 1 and view.group(2) == lost, out
    assert re.search(r"World size:      2 now; over time: 2 \(step \d+\) -> 1 \(step \d+\) -> 2", out), out
    assert (tmp_path / "checkpoints").is_dir()  # kept: --workdir was given
    assert_none_left(tag)


def test_ctrl_c_stops_every_process_the_demo_started(tmp_path):
    tag = new_tag()
    demo = start_demo(tmp_path, tag)
    deadline = time.monotonic() + 120
    for line in demo.stdout:
        if "training with 2 nodes" in line:
            break
        assert time.monotonic() < deadline
    assert len(tagged_processes(tag)) >= 5  # etcd, 2 launchers, their forkservers and workers
    demo.send_signal(signal.SIGINT)
    rest, _ = demo.communicate(timeout=60)
    assert demo.returncode == 130, rest
    assert "every process the demo started has been stopped" in rest
    assert_none_left(tag)


def test_inplace_demo_keeps_the_survivor_and_heals_the_replacement_from_it(tmp_path):
    """`torchfleet demo --recovery inplace`: the same interruption, the survivor's worker never restarts,
    the replacement heals from its live state, and nothing is left running."""
    tag = new_tag()
    demo = start_demo(tmp_path, tag, "--recovery", "inplace", "--steps", "200", workdir=False)
    out, _ = demo.communicate(timeout=300)
    assert demo.returncode == 0, out
    # Regression (issue 22): without --workdir the closing lines named the checkpoint folder the demo
    # had just removed with its temporary folder.
    assert "the checkpoints went with the run's temporary folder (--workdir DIR keeps them)" in out
    assert str(tmp_path) not in out and not list(tmp_path.glob("torchfleet-demo-*"))
    for line in ("training with 2 groups", "killed group1-1 at step",
                 "in the same worker process (nothing restarted); 0 steps to redo",
                 "started group1-replacement as the replacement",
                 "from group0-0's live state (no checkpoint read); 2 groups again", "finished: all 200 steps"):
        assert line in out, out
    went_on = float(re.search(r"went on alone at step \d+, ([\d.]+) s after the kill", out).group(1))
    assert went_on <= 5.0, out  # the Lighthouse's heartbeat timeout, not a restart
    assert re.search(r"Restarts: +0; 0 steps lost", out), out  # the status view counts no restart
    assert_none_left(tag)


def test_inplace_demo_without_torchft_says_how_to_get_it(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO), "TORCHFLEET_LIGHTHOUSE_BINARY": str(tmp_path / "missing")}
    done = subprocess.run([sys.executable, "-c", RUNNER, "demo", "--recovery", "inplace"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "--recovery inplace: needs torchft's torchft_lighthouse" in done.stderr
