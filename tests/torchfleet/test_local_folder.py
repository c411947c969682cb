"""`status --local DIR` and `logs --local DIR [-f]` on a local run's folder (torchfleet/local_folder.py),
through the real command; the folder is written as `torchfleet run --local` writes it (its record class),
and tests/training_image/test_run_local.py reads the folder of a real run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

from tests.harness import REPO
from torchfleet.local_folder import Record


def event(**fields) -> str:
    return "@@tf " + json.dumps(fields) + "\n"


def torchfleet(*args: str, **kwargs):
    return subprocess.run([sys.executable, "-m", "torchfleet", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120, **kwargs)


def a_run(folder: Path) -> Record:
    record = Record(folder, name="try", recovery="restart", nodes_wanted=2,
                    command=["train.py", "--total-steps=100"])
    for name in ("node0", "node1"):
        record.node_started(SimpleNamespace(name=name, pid=os.getpid()), 0)
    (folder / "node0.log").write_text(
        "[torchfleet] torchrun ...\n" + event(ev="start", wall=1000.0, world=2, gen=1)
        + event(ev="step", wall=1001.0, step=10, loss=0.5, world=2, gen=1)
        + event(ev="step", wall=1002.0, step=20, loss=0.25, world=2, gen=1))
    (folder / "node1.log").write_text("[torchfleet] torchrun ...\n")
    return record


def test_status_of_a_local_run_folder(tmp_path):
    record = a_run(tmp_path)
    record.node_killed("node1")
    ckpt = tmp_path / "checkpoints" / "ckpt-g000001-s0000000020"
    ckpt.mkdir(parents=True)
    (ckpt / "meta.json").write_text("{}")
    done = torchfleet("status", "--local", str(tmp_path))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "Run:             try: restart recovery, 2 nodes"
    assert lines[1] == "Command:         train.py --total-steps=100"
    assert lines[2].startswith("State:           running (torchfleet run, pid ")  # this test's pid is alive
    assert lines[3].startswith("Nodes:           node0 running; node1 killed at ")
    assert "Step:            20 of 100 (20%)   loss 0.25" in done.stdout
    assert "Speed:           10.00 steps/s" in done.stdout
    assert f"On disk:         step 20 (generation 1) in {tmp_path / 'checkpoints'}" in done.stdout
    record.node_exited("node0", 0)
    record.ended(0)
    after = torchfleet("status", "--local", str(tmp_path)).stdout
    assert "exit code 0" in after and "node0 exited with code 0" in after


def test_logs_of_a_local_run_readable_json_and_one_node(tmp_path):
    a_run(tmp_path)
    done = torchfleet("logs", "--local", str(tmp_path))
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert out[0] == "[node0] [torchfleet] torchrun ..." and out[-1] == "[node1] [torchfleet] torchrun ..."
    assert any(line.startswith("[node0] ") and line.endswith("  step 20   loss 0.25   10.00 steps/s   world 2")
               for line in out), out
    raw = torchfleet("logs", "--local", str(tmp_path), "--json", "--node", "node0").stdout
    assert raw == (tmp_path / "node0.log").read_text()
    missing = torchfleet("logs", "--local", str(tmp_path), "--node", "node7")
    assert missing.returncode == 2 and "--node: run try has no node 'node7'; its nodes: node0, node1" in missing.stderr


def test_logs_follow_prints_what_the_nodes_add_until_the_run_ends(tmp_path):
    record = a_run(tmp_path)
    follow = subprocess.Popen([sys.executable, "-m", "torchfleet", "logs", "--local", str(tmp_path), "-f",
                               "--node", "node0"], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        with (tmp_path / "node0.log").open("a") as log:
            log.write(event(ev="ckpt", wall=1003.0, step=20, gen=1, reason="periodic"))
        time.sleep(2)
        record.ended(0)
        out, _ = follow.communicate(timeout=60)
    finally:
        follow.kill()
    assert follow.returncode == 0
    assert out.splitlines()[-1].endswith("  checkpoint of step 20 committed (generation 1, periodic)"), out


def test_a_task_error_in_the_first_step_shows_the_workers_error(tmp_path):
    # issue 32, a second fresh walk: each attempt's start event puts the step at 0, and a step of 0 hid the
    # Worker error line of a run whose Task raised in its first step
    record = Record(tmp_path, name="bad", recovery="restart", nodes_wanted=1, command=["bad.py"])
    record.node_started(SimpleNamespace(name="node0", pid=os.getpid()), 0)
    attempt = (event(ev="start", wall=1000.0, world=1, gen=1) + "Traceback (most recent call last):\n"
               '  File "/ws/bad.py", line 7, in loss_sum\n    return self.loss_summ(model)\n'
               "AttributeError: 'Bad' object has no attribute 'loss_summ'\n")
    (tmp_path / "node0.log").write_text("[torchfleet] torchrun ...\n" + attempt * 3)
    shown = torchfleet("status", "--local", str(tmp_path)).stdout
    assert "Worker error:    node0: AttributeError: 'Bad' object has no attribute 'loss_summ'" in shown, shown
    (tmp_path / "node0.log").write_text("[torchfleet] torchrun ...\n" + attempt
                                        + event(ev="step", wall=1001.0, step=1, loss=0.5, world=1, gen=1))
    assert "Worker error" not in torchfleet("status", "--local", str(tmp_path)).stdout  # it trained since
