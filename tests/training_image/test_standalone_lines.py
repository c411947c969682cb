"""What a researcher sees running the launcher standalone in a terminal (issue 32, item 7).

- the progress events as readable lines, not ``@@tf {json}`` (events.py: JSON goes to logs and files,
  which torchfleet reads, text to a terminal); a real launcher under a pseudo-terminal;
- extending a finished run (a larger --total-steps) says in one line that the learning-rate schedule
  is rebuilt, and which flag keeps it (schedule.py; before, the rate changed without a word).
"""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
from elastic_trainer.events import ENV_EVENTS, PREFIX, readable

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "training-image" / "examples" / "train.py"

pytestmark = pytest.mark.slow


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("TORCHFLEET_", "PET_", "TORCHELASTIC_"))}


def _launch(ckpt: Path, total: int, **kwargs) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "elastic_trainer.launcher", "--standalone", "--nproc_per_node=1", str(TEMPLATE),
            f"--checkpoint-dir={ckpt}", f"--total-steps={total}", "--global-batch-size=16", "--checkpoint-every=5"]
    return subprocess.run(argv, env=_env(), timeout=300, **kwargs)


def test_a_terminal_gets_readable_lines(tmp_path):
    leader, follower = pty.openpty()
    try:
        done = _launch(tmp_path / "ckpt", 10, stdout=follower, stderr=subprocess.DEVNULL)
        os.close(follower)
        follower = -1
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the terminal's other end closed
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        if follower != -1:
            os.close(follower)
        os.close(leader)
    shown = b"".join(chunks).decode(errors="replace")
    assert done.returncode == 0, shown
    assert PREFIX not in shown
    assert any(line.rstrip().split("  ", 1)[-1].startswith("step 10   loss ") for line in shown.splitlines()), shown


def test_a_standalone_run_through_a_pipe_gets_readable_lines_too(tmp_path):
    """Issue 32: a researcher's shell that is no terminal (a tool's, `| tee`) got the raw JSON. torchfleet
    reads events only from nodes it starts with a rendezvous, never from a standalone run."""
    done = _launch(tmp_path / "ckpt", 5, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert PREFIX not in done.stdout, done.stdout[-2000:]
    assert any(line.split("  ", 1)[-1].startswith("step 5   loss ") for line in done.stdout.splitlines()), done.stdout


def test_a_pipe_gets_the_events_when_asked(tmp_path):
    done = subprocess.run([sys.executable, "-m", "elastic_trainer.launcher", "--standalone", "--nproc_per_node=1",
                           str(TEMPLATE), f"--checkpoint-dir={tmp_path}", "--total-steps=5", "--global-batch-size=16"],
                          env={**_env(), ENV_EVENTS: "json"}, timeout=300, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert any(line.startswith(PREFIX + '{"ev": "step"') for line in done.stdout.splitlines()), done.stdout[-2000:]


def test_extending_says_the_schedule_is_rebuilt_once(tmp_path):
    ckpt = tmp_path / "ckpt"
    first = _launch(ckpt, 10, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    assert "learning-rate schedule is rebuilt" not in first.stderr
    extended = _launch(ckpt, 20, capture_output=True, text=True)
    assert extended.returncode == 0, extended.stderr
    said = [line for line in extended.stderr.splitlines() if "learning-rate schedule is rebuilt" in line]
    assert len(said) == 1, extended.stderr[-3000:]
    assert "--total-steps=10" in said[0] and "--total-steps=20 at step 10" in said[0]
    assert "--schedule-on-extend=keep keeps the saved one" in said[0]


def test_the_readable_line_of_a_step_and_of_another_event():
    assert readable({"ev": "step", "wall": 0, "step": 3, "loss": 0.123456, "world": 2}).endswith(
        "step 3   loss 0.1235   world 2")
    assert readable({"ev": "resumed", "wall": 0, "step": 100, "generation": 2}).endswith(
        "resumed  generation=2  step=100")
    assert ENV_EVENTS == "TORCHFLEET_EVENTS"


def test_torchfleets_own_harness_asks_for_the_events_whatever_the_shell_set(tmp_path, monkeypatch):
    """run --local reads the nodes' @@tf lines: a user's TORCHFLEET_EVENTS=text must not blind it."""
    from elastic_trainer.local import LocalJob

    monkeypatch.setenv(ENV_EVENTS, "text")
    job = LocalJob(etcd_endpoint="127.0.0.1:1", run_id="r", workdir=tmp_path, script_args=[])
    assert job.node_env()[ENV_EVENTS] == "json"
