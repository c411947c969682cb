"""The local harness's process lookups, against a real launcher and torchrun."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from elastic_trainer.local import IMAGE_DIR, kill_tree, worker_pids

SHOW_PID = "import os, time\nprint('worker', os.getpid(), flush=True)\ntime.sleep(120)\n"


@pytest.mark.slow
@pytest.mark.parametrize("environ", [{}, {"TORCHFLEET_PRELOAD": "0"}], ids=["forkserver", "spawned"])
def test_worker_pids_finds_the_training_process_however_it_was_started(tmp_path, environ):
    # bench/gpu.py and the gpu tests SIGKILL exactly these to time an agent's worker restart
    script = tmp_path / "show_pid.py"
    script.write_text(SHOW_PID)
    env = {"PYTHONPATH": str(IMAGE_DIR), "PATH": "/usr/bin:/bin", **environ}
    launcher = subprocess.Popen([sys.executable, "-m", "elastic_trainer.launcher", "--standalone", "--nproc_per_node=1",
                                 str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        line = ""
        while not line.startswith("worker"):
            assert time.monotonic() < deadline and launcher.poll() is None, "the worker never started"
            line = launcher.stdout.readline()
        assert worker_pids(launcher.pid) == [int(line.split()[1])]
    finally:
        kill_tree(launcher.pid)
        launcher.wait(30)
