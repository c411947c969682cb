"""A worker that dies before its first step: the user sees its own exception (issue 32).

Before: `run --local` said after the restarts "node0 restarted its worker 3 times without a step; the end
of its log: | (empty)" (torchrun's --run_path report carries the traceback behind torch's log prefix, which
the excerpt drops), `status --local` said "no progress events yet", and `logs` showed the traceback only
behind "E1128 ... multiprocessing/api.py:836]" on every line, under torch's own frames.
The script below passes the Task check (its mistake is at run time), so the workers really start.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.processes import TAG_VARIABLE, assert_none_left, new_tag
from torchfleet.jobs import worker_error

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = (REPO / "training-image" / "examples" / "train.py").read_text()
RAISES = "        return self.mdl  # a typo the Task check cannot see: an attribute, at run time\n"


def _torchfleet(*argv: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "torchfleet", *argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.slow
def test_run_status_and_logs_show_the_workers_own_exception(tmp_path):
    script = tmp_path / "dies.py"
    script.write_text(TEMPLATE.replace("    def build_model(self) -> nn.Module:\n",
                                       "    def build_model(self) -> nn.Module:\n" + RAISES, 1))
    line = next(i for i, text in enumerate(script.read_text().splitlines(), 1) if "self.mdl" in text)
    where = f'File "{script}", line {line}, in build_model'
    tag = new_tag()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("TORCHFLEET_")}, TAG_VARIABLE: tag}
    run = _torchfleet("run", "--local", "--nodes", "1", "--name", "dies", "--", str(script), "--total-steps=10",
                      "--global-batch-size=8", cwd=tmp_path, env=env)
    assert run.returncode == 1, run.stderr
    assert "AttributeError: 'SpiralClassifier' object has no attribute 'mdl'" in run.stderr
    assert where in run.stderr and "(empty)" not in run.stderr
    assert "spawn.py" not in run.stderr and "ProcessRaisedException" not in run.stderr  # not torch's frames
    assert_none_left(tag)

    folder = tmp_path / "torchfleet-runs" / "dies"
    status = _torchfleet("status", "--local", str(folder), cwd=tmp_path, env=env)
    assert "Worker error:" in status.stdout and "no attribute 'mdl'" in status.stdout, status.stdout
    assert f'line {line})' in status.stdout

    logs = _torchfleet("logs", "--local", str(folder), cwd=tmp_path, env=env)
    assert f"  {where}" in logs.stdout.splitlines()  # the worker's line, without torch's log prefix
    assert "AttributeError: 'SpiralClassifier' object has no attribute 'mdl'" in logs.stdout.splitlines()


def test_a_plain_traceback_keeps_the_users_frames():
    """A worker started without --run_path prints its traceback itself."""
    log = "\n".join([
        "[torchfleet] torchrun ...",
        "Traceback (most recent call last):",
        '  File "/ws/train.py", line 60, in <module>',
        "    main()",
        '  File "/usr/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1, in __call__',
        "    return forward(x)",
        '  File "/ws/train.py", line 12, in forward',
        "    return self.lin(y)",
        "NameError: name 'y' is not defined",
        "I1128 16:00:00.000000 1 torch/distributed/elastic/agent/server/api.py:1] restarting",
    ])
    assert worker_error.last_worker_error(log) == [
        "Traceback (most recent call last):", '  File "/ws/train.py", line 60, in <module>', "    main()",
        '  File "/ws/train.py", line 12, in forward', "    return self.lin(y)", "NameError: name 'y' is not defined"]
    assert worker_error.summary(log) == "NameError: name 'y' is not defined (File \"/ws/train.py\", line 12)"


def test_a_log_without_a_traceback_has_none():
    assert worker_error.last_worker_error("step 1\nstep 2\n") == [] and worker_error.summary("") is None
