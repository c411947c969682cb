"""Restart mode: a node lost before its peers' process group formed (issue 23: a survivor took no step for
over 180 s after a kill). training-image/elastic_trainer/lost_peer.py restarts the survivor's workers once
the rendezvous drops the node, instead of letting them wait for it until the process-group timeout.
"""

from __future__ import annotations

import time
import uuid
from types import SimpleNamespace

import pytest
from elastic_trainer.localrun import IMAGE_DIR, LocalJob, worker_pids
from elastic_trainer.lost_peer import round_participants

# Each worker's first start (TORCHELASTIC_RESTART_COUNT=0) sleeps before anything else, so the kill below
# lands after the rendezvous and before the process group forms. A test-only hook: fresh interpreters
# (TORCHFLEET_PRELOAD=0) run sitecustomize, forkserver children would not.
SLOW_FIRST_START = """
import os, time
if os.environ.get("RANK") is not None and os.environ.get("TORCHELASTIC_RESTART_COUNT") == "0":
    time.sleep(8)
"""
PG_TIMEOUT_S = 600  # what the survivor would wait without lost_peer.py; the wait below is a hang detector
HANG = 180


def test_round_participants_reads_the_dynamic_rendezvous_state_and_leaves_other_handlers_alone():
    def handler(closed: bool) -> SimpleNamespace:
        state = SimpleNamespace(participants={"a": 0, "b": 1}, closed=closed)
        return SimpleNamespace(_state_holder=SimpleNamespace(state=state))

    assert round_participants(handler(closed=False)) == 2
    # A closed run (a node that exited 2 closes it, test_launcher_exits.py): its workers end by themselves;
    # restarting them only repeated their failure (seen once before this check).
    assert round_participants(handler(closed=True)) is None
    assert round_participants(SimpleNamespace()) is None  # e.g. the legacy etcd handler


@pytest.mark.slow
def test_a_node_killed_before_the_process_group_formed_does_not_hold_the_survivor(etcd, tmp_path):
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(SLOW_FIRST_START)
    job = LocalJob(etcd_endpoint=etcd.endpoint, run_id=f"lost-{uuid.uuid4().hex[:8]}", workdir=tmp_path / "job",
                   script_args=["--total-steps=100000", "--global-batch-size=16", "--checkpoint-every=20",
                                "--step-delay-s=0.02"],
                   extra_env={"PYTHONPATH": f"{hooks}:{IMAGE_DIR}", "TORCHFLEET_PRELOAD": "0",
                              "TORCHFLEET_PG_TIMEOUT_S": str(PG_TIMEOUT_S)})
    with job:
        survivor, victim = job.start_node("node0"), job.start_node("node1")
        deadline = time.monotonic() + HANG
        while not (worker_pids(victim.pid) and worker_pids(survivor.pid)):  # a round of both has formed
            assert time.monotonic() < deadline, "no round of both nodes formed"
            time.sleep(0.05)
        killed_at = victim.kill()
        went_on = job.events.wait_for(lambda e: e.kind == "step" and e.t > killed_at and e["world"] == 1, HANG,
                                      describe="the survivor's step alone")
    assert went_on.node == "node0"
    assert "[torchfleet] the rendezvous has 1 of this round's 2 nodes" in survivor.log_text()
