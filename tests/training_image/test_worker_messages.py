"""What a researcher reads on the common paths (issue 22, item 4), from the real processes.

Regressions, each as it was:
- ``python train.py`` without the launcher ended in torch's traceback ``environment variable RANK
  expected, but not set``;
- on every node loss each survivor printed a 44-line traceback (the worker's gloo error inside the
  agent's ``failed (exitcode: 1)`` record), although losing a node is the normal recovery;
- a node meeting a closed rendezvous printed ``rendezvous unavailable (RendezvousClosedError: )``;
- every node start warned ``'elastic_trainer.launcher' found in sys.modules`` (warm.py imported the
  launcher into the forkserver, whose workers then re-run it as ``__mp_main__``);
- ``--checkpoint-every``, ``--keep-checkpoints`` and ``--seed`` had no help and showed no default.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from elastic_trainer.launch import worker_exits
from elastic_trainer.launcher import EXIT_RDZV_UNAVAILABLE
from elastic_trainer.local import IMAGE_DIR, kill_and_resume
from elastic_trainer.trainer import HOLD_FOR_WORLD

TEMPLATE = IMAGE_DIR / "examples" / "train.py"
RUNPY_WARNING = "found in sys.modules"
# gloo's message for a peer that is gone, as a survivor's worker raised it (torch 2.13, CPU)
GLOO_PEER_GONE = ("[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error "
                  "[127.0.0.1]:29110: Connection reset by peer. This is typically caused by a remote worker hanging "
                  "or bugs in the application. Check the logs of the remote worker before reporting an error.")


def _template(*args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in worker_exits.LAUNCHER_ENV}
    return subprocess.run([sys.executable, str(TEMPLATE), *args], capture_output=True, text=True, timeout=240,
                          env={**clean, "PYTHONPATH": str(IMAGE_DIR), **env})


def test_the_template_run_without_a_launcher_says_how_to_launch_it(tmp_path):
    ran = _template(f"--checkpoint-dir={tmp_path}", "--total-steps=2", "--global-batch-size=8")
    assert ran.returncode == worker_exits.EXIT_NOT_LAUNCHED, ran.stderr[-3000:]
    assert "Traceback" not in ran.stderr and "RANK expected" not in ran.stderr, ran.stderr[-3000:]
    assert "train.py: started without the elastic launcher (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT not set)" \
        in ran.stderr
    assert "python -m elastic_trainer.launcher --standalone --nproc_per_node=1 train.py ARGS" in ran.stderr
    assert "torchfleet run --local -- train.py ARGS" in ran.stderr
    suggested = "torchfleet submit NAME --stack STACK --gpu GPU --workdir . -- python train.py ARGS"
    assert "torchrun" in ran.stderr and suggested in ran.stderr
    assert "--image IMAGE" not in ran.stderr  # issue 32: submit has a default image
    assert not (tmp_path / "ckpt").exists() and not any(tmp_path.iterdir())  # nothing was written


def test_every_trainer_flag_says_its_default():
    ran = _template("--help")
    assert ran.returncode == 0, ran.stderr
    text = " ".join(ran.stdout.split("options:", 1)[1].split())  # argparse wraps help at the terminal's width
    for flag, default in (("--checkpoint-every", "50"), ("--keep-checkpoints", "3"), ("--seed", "0"),
                          ("--schedule-on-extend", "rebuild"), ("--step-delay-s", "0"), ("--progress-every", "1")):
        # its help: up to the next option (a flag followed by its metavar)
        shown = re.search(rf"{flag} [A-Za-z_{{}},]+ (.*?)(?= --[a-z-]+ (?:[A-Z_]+|{{[a-z,]+}}) |$)", text)
        assert shown and f"(default: {default}" in shown.group(1), (flag, shown and shown.group(1))


def test_a_peer_loss_is_told_in_one_line():
    import torch.distributed as dist

    assert worker_exits.peer_lost(RuntimeError(GLOO_PEER_GONE))
    assert worker_exits.peer_lost(dist.DistBackendError("NCCL error: remote process exited or there was a network"))
    assert not worker_exits.peer_lost(RuntimeError("Read error in my data reader"))  # the script's own: traceback
    assert not worker_exits.peer_lost(ValueError("Connection reset by peer"))
    line = worker_exits.peer_lost_line(RuntimeError(GLOO_PEER_GONE), 0)
    assert "\n" not in line and "(Read error [127.0.0.1]:29110: Connection reset by peer)" in line
    assert "TORCHFLEET_DEBUG=1" in line


@pytest.mark.slow
def test_a_node_loss_and_a_late_node_read_as_what_they_are(make_job):
    # An elastic range, as jobs run: 1:2, and a node that forms the group alone waits before step 3 for the
    # other (HOLD_FOR_WORLD), or on a loaded machine it could finish alone. This ran as 2:2 while a node
    # joining late could split the run into two world-1 groups; lost_peer.py rejoins a dropped node since.
    job = make_job("--total-steps=60", "--global-batch-size=16", "--checkpoint-every=10", "--step-delay-s=0.05",
                   nnodes="1:2", extra_env={HOLD_FOR_WORLD: "3:2"})
    survivor, victim = job.start_node(), job.start_node()
    # past the checkpoint of step 10: the survivor resumes after the hold's step
    job.events.wait_for(lambda e: e.kind == "step" and e["world"] == 2 and e["step"] >= 12, 240)
    kill_and_resume(job, victim, world_after=1, timeout=180)
    job.wait_for("done", 240)
    assert survivor.wait(120) == 0
    text = survivor.log_text()
    assert RUNPY_WARNING not in text, text[-3000:]
    assert "Traceback" not in text and "failed (exitcode: 75)" not in text, text[-6000:]
    told = [line for line in text.splitlines() if "a peer left the group" in line]
    # One line per loss. Not exactly one loss: under load the rendezvous can drop a starved live node, and the
    # restart that rejoins it is a peer loss to the other node's worker too (lost_peer.py). Rank 0 or 1: which
    # rank a node's worker had depends on the rendezvous order.
    assert told and all(re.match(r"\[torchfleet\] rank [01]: a peer left the group \(", line) for line in told), (
        text[-3000:])

    late = job.start_node("late")  # the run is over: its rendezvous is closed
    assert late.wait(180) == EXIT_RDZV_UNAVAILABLE
    said = late.log_text()
    assert f"the rendezvous '{job.run_id}' (etcd {job.etcd_endpoint}) is closed (RendezvousClosedError)" in said
    assert "etcd-v2 keeps a closed rendezvous for 2 hours" in said and "RendezvousClosedError: )" not in said


def test_the_debug_variable_brings_the_traceback_back(monkeypatch, capsys):
    try:
        raise RuntimeError(GLOO_PEER_GONE)
    except RuntimeError as exc:
        monkeypatch.delenv(worker_exits.DEBUG_ENV, raising=False)
        assert worker_exits.leave_after_peer_loss(exc, 1) == 75
        quiet = capsys.readouterr().err
        monkeypatch.setenv(worker_exits.DEBUG_ENV, "1")
        worker_exits.leave_after_peer_loss(exc, 1)
        loud = capsys.readouterr().err
    assert quiet.count("\n") == 1 and quiet.startswith("[torchfleet] rank 1: a peer left the group")
    assert "Traceback (most recent call last)" in loud and "GLHF" not in quiet


def test_the_agent_reports_a_worker_exit_code_in_one_line(monkeypatch):
    """torchrun's ``logger.exception`` of a worker that exited with a code: its traceback is the agent's own."""
    import logging

    from elastic_trainer.launch.agent import _quiet_worker_exits
    from torch.multiprocessing.spawn import ProcessExitedException, ProcessRaisedException

    monkeypatch.delenv(worker_exits.DEBUG_ENV, raising=False)
    _quiet_worker_exits()
    _quiet_worker_exits()  # idempotent: one filter
    agent_log = logging.getLogger("torch.distributed.elastic.multiprocessing.api")
    assert sum(type(f).__name__ == "WorkerExits" for f in agent_log.filters) == 1

    def record(exc: BaseException) -> logging.LogRecord:
        return agent_log.makeRecord(agent_log.name, logging.ERROR, __file__, 1, "failed (exitcode: %s)", (1,),
                                    (type(exc), exc, None))

    peer_left = record(ProcessExitedException("exit 75", 0, 1, 75))
    assert not agent_log.filter(peer_left)  # the worker said why, in one line
    killed = record(ProcessExitedException("exit 143", 0, 1, 143))
    assert agent_log.filter(killed) and killed.exc_info is None
    crashed = record(ProcessRaisedException("worker traceback", 0, 1))
    assert agent_log.filter(crashed) and crashed.exc_info is not None  # a raise keeps the worker's traceback
    monkeypatch.setenv(worker_exits.DEBUG_ENV, "1")
    assert agent_log.filter(record(ProcessExitedException("exit 75", 0, 1, 75)))
