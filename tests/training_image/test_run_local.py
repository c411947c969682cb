"""`torchfleet run --local`: the project's template script (training-image/examples/train.py) on local
nodes with a kill and a replacement, in both recovery modes, run as a user runs it; then `status --local`
and `logs --local` on its folder, and Ctrl-C. Issue 22: running your own script locally with a kill
needed the harness's internals, and `kill -9 <pid>` of torchrun's agent left its worker training."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.harness.processes import TAG_VARIABLE, assert_none_left, new_tag, tagged_processes

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "training-image" / "examples" / "train.py"
# Long enough that the replacement usually trains with the survivor before the end; the run is
# correct either way (it says which), so the assertions hold at any load.
SCRIPT_ARGS = ["--total-steps=300", "--global-batch-size=32", "--checkpoint-every=20", "--step-delay-s=0.2"]

pytestmark = pytest.mark.slow


def torchfleet(*args: str, tag: str = "", **kwargs) -> subprocess.Popen[str]:
    env = {**os.environ, TAG_VARIABLE: tag, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-u", "-m", "torchfleet", *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kwargs)


def finished(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "torchfleet", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})


def live(pid: int) -> bool:
    """Running, not a zombie waiting for its parent."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def run_with_one_kill(tmp_path, recovery: str, victim: str) -> str:
    tag = new_tag()
    run = torchfleet("run", "--local", "--recovery", recovery, "--kill-at", "30", "--workdir", str(tmp_path),
                     "--", "python", str(TEMPLATE), *SCRIPT_ARGS, tag=tag)
    out, left = [], []
    deadline = time.monotonic() + 600
    for line in run.stdout:
        out.append(line)
        killed = re.search(rf"killed {victim} at step \d+: SIGKILL of its whole process tree \(pids ([\d ]+):", line)
        if killed:
            # The whole node goes: torchrun's agent, its forkserver and the worker (the bug: a worker
            # orphaned by `kill -9` of the agent trained on). Checked while the run goes on.
            pids = [int(p) for p in killed.group(1).split()]
            assert len(pids) >= (2 if recovery == "inplace" else 3), line  # the launcher, (a forkserver,) a worker
            gone_by = time.monotonic() + 10
            while (left := [p for p in pids if live(p)]) and time.monotonic() < gone_by:
                time.sleep(0.1)
            assert not left, f"still running after the kill: {left}"
        assert time.monotonic() < deadline, "".join(out)
    run.wait(60)
    text = "".join(out)
    assert run.returncode == 0, text
    assert_none_left(tag)
    return text


def test_restart_mode_with_a_kill_of_the_template_script(tmp_path):
    out = run_with_one_kill(tmp_path, "restart", "node1")
    for line in ("started node0 (a torchrun agent, 1 worker)", "training with 2 nodes (step ",
                 "started node2 as the replacement", "finished: all 300 steps"):
        assert line in out, out
    # Which checkpoint: the periodic one before the kill, or, after one more restart shortly before it (a
    # starved node dropped and rejoining, lost_peer.py), the one the workers wrote as they stopped: 2 of 5
    # runs at load 9-13 here failed on "(20|40)" with 4 and 5 restarts where 3 is usual, one with 1 step
    # lost. The figure is checked against the survivor's own log below.
    went_on = re.search(r"went on with 1 at step \d+, [\d.]+ s after the kill, from the checkpoint of step (\d+)", out)
    assert went_on and int(went_on.group(1)) >= 1, out
    assert re.search(r"2 again at step \d+|the job finished before node2 could join", out), out
    assert re.search(r"Restarts: +\d+; \d+ steps lost", out) and "Step:            300 of 300 (100%), done" in out

    status = finished("status", "--local", str(tmp_path))
    assert status.returncode == 0, status.stderr
    assert "State:           finished at" in status.stdout and "exit code 0" in status.stdout
    assert re.search(r"Nodes: +node0 exited with code 0; node1 killed at [\d:]+; node2 exited with code (0|75)",
                     status.stdout), status.stdout
    assert "On disk:         step 300 (generation " in status.stdout and str(tmp_path / "checkpoints") in status.stdout

    # The survivor alone is rank 0 after the kill; with both, rank 0 is either node (torch ranks the nodes by
    # address and agent pid, and pids wrap): the world-2 steps are looked for in every node's lines.
    logs = finished("logs", "--local", str(tmp_path), "--node", "node0")
    assert logs.returncode == 0, logs.stderr
    assert re.search(rf"^\d\d:\d\d:\d\d  resumed from the checkpoint of step {went_on.group(1)}, world size 1$",
                     logs.stdout, re.M), logs.stdout
    assert "@@tf" not in logs.stdout and "[node" not in logs.stdout
    every = finished("logs", "--local", str(tmp_path))
    assert re.search(r"^\[node\d\] \d\d:\d\d:\d\d  step \d+   loss [\d.]+   [\d.]+ steps/s   world 2$", every.stdout,
                     re.M), every.stdout[-3000:]
    raw = finished("logs", "--local", str(tmp_path), "--json")
    assert "[node0] @@tf {" in raw.stdout and "[node1] " in raw.stdout


def test_inplace_mode_with_a_kill_of_the_template_script(tmp_path):
    out = run_with_one_kill(tmp_path, "inplace", "group1-1")
    for line in ("training with 2 groups (step ", "started group1-2 as the replacement", "finished: all 300 steps"):
        assert line in out, out
    # the survivor never restarts: its worker processes are the same before and after the kill
    assert re.search(r"went on with 1 at step \d+, [\d.]+ s after the kill, in the same worker processes "
                     r"\(nothing restarted\)", out), out


def test_kill_every_then_ctrl_c_while_the_replacement_starts_stops_every_process(tmp_path):
    """--kill-every on the clock; Ctrl-C in the middle of a recovery (etcd, the survivor, the starting
    replacement) leaves nothing running, as the demo's contract."""
    tag = new_tag()
    run = torchfleet("run", "--local", "--kill-every", "5s", "--workdir", str(tmp_path), "--", str(TEMPLATE),
                     *SCRIPT_ARGS, tag=tag)
    deadline, seen = time.monotonic() + 400, []
    for line in run.stdout:
        seen.append(line)
        if "started node2 as the replacement" in line:
            break
        assert time.monotonic() < deadline, "".join(seen)
    trained = float(re.search(r"([\d.]+)s  training with 2 nodes", "".join(seen)).group(1))
    killed = float(re.search(r"([\d.]+)s  killed node1 at step", "".join(seen)).group(1))
    assert killed - trained >= 4.9, "".join(seen)  # 5 s of training with every node (times shown to 0.1 s)
    assert len(tagged_processes(tag)) >= 4  # etcd, the survivor's launcher, forkserver, worker, the replacement
    run.send_signal(signal.SIGINT)
    rest, _ = run.communicate(timeout=60)
    assert run.returncode == 130, rest
    assert "every process the run started has been stopped" in rest
    assert_none_left(tag)
    status = finished("status", "--local", str(tmp_path))
    assert status.returncode == 0 and "exit code 130" in status.stdout, status.stdout + status.stderr


def test_a_script_without_progress_events_ends_with_the_reason_instead_of_waiting(tmp_path):
    """The timeline follows elastic_trainer's progress events: a script that prints none and exits 0
    ends the run with exit 1 and why, rather than a wait for a step that never comes."""
    script = tmp_path / "plain.py"
    script.write_text("print('trained, in my own way')\n")
    tag = new_tag()
    run = torchfleet("run", "--local", "--workdir", str(tmp_path / "run"), "--", str(script), tag=tag)
    out, _ = run.communicate(timeout=300)
    assert run.returncode == 1, out
    assert "node0 and every other node exited (code 0) before the trainer reported its last step" in out
    assert "training-image/examples/train.py is a template" in out
    assert_none_left(tag)


@pytest.mark.parametrize(("args", "message"), [
    (["run", "--", str(TEMPLATE)], "--local: required"),
    (["run", "--local"], "SCRIPT: the training script goes after --"),
    (["run", "--local", "--", "python", "-m", "train"], "SCRIPT: the training script goes after --"),
    (["run", "--local", "--", "nope.py"], "SCRIPT: nope.py is not a file"),
    (["run", "--local", "--kill-every", "soon", "--", str(TEMPLATE)], "--kill-every: a duration such as 30s"),
    (["run", "--local", "--kill-every", "1s", "--", str(TEMPLATE)], "--kill-every: at least 5s"),
    (["run", "--local", "--nodes", "1", "--kill-at", "10", "--", str(TEMPLATE)], "--nodes: a kill needs at least 2"),
    (["run", "--local", "--kill-at", "10", "--kill-every", "30s", "--", str(TEMPLATE)], "give one of them"),
    (["run", "--local", "--kill-at", "50", "--", str(TEMPLATE), "--total-steps=10", "--global-batch-size=8"],
     "--kill-at: steps below the script's --total-steps=10 (the run ends at step 10), got 50"),
    (["status", "--local", "/nonexistent"], "--local: /nonexistent is not a folder"),
    (["logs", "--local", str(REPO)], "has no run.json: not the folder of a `torchfleet run --local`"),
    (["status"], "required: NAME (a job's name) or --local DIR"),
])
def test_bad_input_exits_2_naming_the_argument_before_anything_starts(tmp_path, args, message):
    done = subprocess.run([sys.executable, "-m", "torchfleet", *args], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr
    assert not (tmp_path / "torchfleet-runs").exists()  # no folder, no process


def test_the_readmes_local_run_runs_as_printed(tmp_path):
    """README.md's `run --local` command, word for word (its folder moved under tmp_path): as printed in
    session 6 it lacked the template's required --global-batch-size, every node exited 2 and the run
    failed, while this file's tests ran their own copy of the arguments."""
    line = next(text for text in (REPO / "README.md").read_text().splitlines()
                if text.startswith(".venv/bin/torchfleet run --local "))
    words = shlex.split(line)[1:]  # the arguments after `.venv/bin/torchfleet`
    split = words.index("--")
    steps = next(int(w.split("=", 1)[1]) for w in words if w.startswith("--total-steps="))
    tag = new_tag()
    run = torchfleet(*words[:split], "--workdir", str(tmp_path), *words[split:], tag=tag)
    out, _ = run.communicate(timeout=600)
    assert run.returncode == 0, out
    assert_none_left(tag)
    assert "killed node1 at step 60: SIGKILL of its whole process tree" in out, out
    assert f"finished: all {steps} steps" in out, out
    # what the README says it shows; at a heavy load the job can finish first, which the run says
    assert re.search(r"2 again at step \d+|the job finished before node2 could join", out), out
