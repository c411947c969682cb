"""Every wait of the in-place recovery path ends (issue 23: a recovery that hangs holds GPUs and trains nothing).

Each test makes a wait that would never end on its own: a peer that accepts and never answers, a
Lighthouse that is gone, a torchft call that never returns. They assert what the worker does when
its bound passes (the exit code, the event, the message naming the setting), not how long it took:
the subprocess timeouts below only detect a hang, far above the bounds set here.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from elastic_trainer import EXIT_MEMBERSHIP_CHANGE
from elastic_trainer.events import PREFIX
from elastic_trainer.inplace.group import _InplaceRun
from elastic_trainer.inplace.settings import ENV_LIGHTHOUSE_WAIT_S
from elastic_trainer.local import IMAGE_DIR, SYNTHETIC_EXAMPLE, free_port
from elastic_trainer.local.inplacerun import Lighthouse, lighthouse_binary

HANG = 240  # a hang detector only: every bound in these tests is a few seconds


def events(stdout: str) -> list[dict]:
    return [json.loads(line[len(PREFIX):]) for line in stdout.splitlines() if line.startswith(PREFIX)]


def run_python(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "PYTHONPATH": str(IMAGE_DIR), **(env or {})}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=environ, capture_output=True, text=True,
                          timeout=HANG)


@pytest.fixture
def silent_peer():
    """A TCP server that accepts connections and never answers."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        yield server.getsockname()[1]


def test_a_call_that_never_returns_ends_the_process_with_the_code_and_says_what_it_waited_for(silent_peer):
    done = run_python(f"""
        import socket
        from elastic_trainer.inplace.stall_guard import StallGuard
        bound = StallGuard(1.0, 75, "TORCHFLEET_INPLACE_STALL_S", group=3)
        with socket.create_connection(("127.0.0.1", {silent_peer})) as peer, bound("a peer that never answers"):
            peer.recv(1)  # no timeout: the server never sends
        print("unreachable")
    """)
    assert done.returncode == 75, done.stderr
    assert "unreachable" not in done.stdout
    assert "a peer that never answers did not return within 1 s (TORCHFLEET_INPLACE_STALL_S)" in done.stderr
    assert events(done.stdout) == [{"ev": "exit", "group": 3, "code": 75, "reason": "stalled", "limit_s": 1.0,
                                    "waiting_for": "a peer that never answers", "wall": events(done.stdout)[0]["wall"]}]


def test_calls_that_return_leave_the_process_alone_however_long_it_waits_between_them():
    done = run_python("""
        import time
        from elastic_trainer.inplace.stall_guard import StallGuard
        bound = StallGuard(2.0, 75, "TORCHFLEET_INPLACE_STALL_S")
        for _ in range(100):
            with bound("a quick call"):
                pass
        time.sleep(3.0)  # past the bound, but nothing is armed
        print("went on")
    """)
    assert (done.returncode, done.stdout.strip()) == (0, "went on"), done.stderr


def test_a_bound_that_is_not_positive_is_refused_naming_its_setting():
    from elastic_trainer.inplace.stall_guard import StallGuard

    with pytest.raises(ValueError, match="TORCHFLEET_INPLACE_STALL_S=0: must be a positive number of seconds"):
        StallGuard(0, 75, "TORCHFLEET_INPLACE_STALL_S")


def test_the_wait_for_a_lighthouse_that_is_gone_ends_naming_its_setting(capsys):
    run = object.__new__(_InplaceRun)  # only what the wait reads: no torch, no torchft
    run.lighthouse, run.group, run.stop, run.lighthouse_wait_s = f"http://127.0.0.1:{free_port()}", 1, False, 0.5
    with pytest.raises(TimeoutError, match=f"refused connections for 0.5 s \\({ENV_LIGHTHOUSE_WAIT_S}\\)"):
        run._wait_for_lighthouse()
    assert [e["ev"] for e in events(capsys.readouterr().out)] == ["lighthouse_wait"]


def worker(lighthouse: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """One in-place worker (no node around it to start it again), with short torchft timeouts."""
    script = env.pop("SCRIPT", None)
    environ = {**os.environ, "PYTHONPATH": str(IMAGE_DIR), "TORCHFLEET_RECOVERY": "inplace",
               "TORCHFT_LIGHTHOUSE": lighthouse, "TORCHFLEET_REPLICA_GROUP": "0", "TORCHFLEET_REPLICA_GROUPS": "1",
               "TORCHFLEET_INPLACE_QUORUM_TIMEOUT_S": "2", "TORCHFLEET_INPLACE_TIMEOUT_S": "2",
               "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1", "RUST_LOG": "error", **env}
    command = ["-c", script] if script else [str(SYNTHETIC_EXAMPLE)]
    return subprocess.run([sys.executable, *command, f"--checkpoint-dir={tmp_path / 'ckpt'}", "--total-steps=1000",
                           "--global-batch-size=8", "--step-delay-s=0.01"], env=environ, capture_output=True,
                          text=True, timeout=HANG)


@pytest.mark.slow
def test_a_worker_whose_lighthouse_is_gone_exits_for_its_node_to_start_it_again(tmp_path):
    done = worker(f"http://127.0.0.1:{free_port()}", tmp_path, **{ENV_LIGHTHOUSE_WAIT_S: "1"})
    assert done.returncode == EXIT_MEMBERSHIP_CHANGE, done.stderr[-3000:]
    assert [e["reason"] for e in events(done.stdout) if e["ev"] == "exit"] == ["no lighthouse"]


@pytest.mark.slow
def test_a_worker_whose_lighthouse_never_answers_exits_for_its_node_to_start_it_again(tmp_path, silent_peer):
    done = worker(f"http://127.0.0.1:{silent_peer}", tmp_path, TORCHFLEET_INPLACE_STALL_S="10")
    assert done.returncode == EXIT_MEMBERSHIP_CHANGE, done.stderr[-3000:]
    # torchft's quorum call times out ("no quorum"); the stall guard is the bound behind it ("stalled")
    assert [e["reason"] for e in events(done.stdout) if e["ev"] == "exit"] in (["no quorum"], ["stalled"])


@pytest.mark.slow
def test_a_torchft_call_that_never_returns_ends_the_worker(tmp_path):
    if lighthouse_binary() is None:
        pytest.fail("torchft_lighthouse is not installed (pip install -e .[dev] installs torchft)")
    # should_commit blocks for good from the third step on: what no timeout of torchft's can end
    script = textwrap.dedent(f"""
        import runpy, sys, threading
        import torchft.manager
        vote = torchft.manager.Manager.should_commit
        def stuck(self, timeout=None):
            if self.current_step() >= 3:
                threading.Event().wait()
            return vote(self, timeout)
        torchft.manager.Manager.should_commit = stuck
        sys.argv = [{str(SYNTHETIC_EXAMPLE)!r}, *sys.argv[1:]]
        runpy.run_path(sys.argv[0], run_name="__main__")
    """)
    lighthouse = Lighthouse(log_path=tmp_path / "lighthouse.log").start()
    try:
        done = worker(lighthouse.address, tmp_path, SCRIPT=script, TORCHFLEET_INPLACE_STALL_S="10")
    finally:
        lighthouse.stop()
    assert done.returncode == EXIT_MEMBERSHIP_CHANGE, done.stderr[-3000:]
    exits = [e for e in events(done.stdout) if e["ev"] == "exit"]
    stalled = [(e["reason"], e["waiting_for"]) for e in exits]
    assert stalled == [("stalled", "the commit vote (torchft's should_commit)")]
    assert "did not return within 10 s (TORCHFLEET_INPLACE_STALL_S)" in done.stderr


@pytest.mark.slow
def test_a_stall_bound_within_torchfts_own_timeouts_is_refused(tmp_path):
    done = worker(f"http://127.0.0.1:{free_port()}", tmp_path, TORCHFLEET_INPLACE_STALL_S="5")
    assert done.returncode == 2, done.stderr[-3000:]
    assert "TORCHFLEET_INPLACE_STALL_S=5: must exceed TORCHFLEET_INPLACE_QUORUM_TIMEOUT_S + 3 x " \
           "TORCHFLEET_INPLACE_TIMEOUT_S (8 s)" in done.stderr
