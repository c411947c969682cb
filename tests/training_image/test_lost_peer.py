"""Restart mode: a node lost before its peers' process group formed (issue 23: a survivor took no step for
over 180 s after a kill). training-image/elastic_trainer/lost_peer.py restarts the survivor's workers once
the rendezvous drops the node, instead of letting them wait for it until the process-group timeout.
"""

from __future__ import annotations

import time
import uuid
from datetime import timedelta
from types import SimpleNamespace

import pytest
from elastic_trainer.localrun import IMAGE_DIR, LocalJob, worker_pids
from elastic_trainer.lost_peer import heartbeat_window_s, nodes_present

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


def test_a_node_counts_while_it_is_in_the_round_or_heartbeats_and_other_handlers_are_left_alone():
    def handler(participants, heartbeats, closed=False) -> SimpleNamespace:
        state = SimpleNamespace(participants=participants, last_heartbeats=heartbeats, closed=closed)
        return SimpleNamespace(_state_holder=SimpleNamespace(state=state))

    assert nodes_present(handler({"a": 0, "b": 1}, {"a": 1.0, "b": 1.0})) == 2
    assert nodes_present(handler({"a": 0}, {"a": 1.0})) == 1  # b dropped and silent: lost
    # b dropped from the round while alive (its heartbeats starved at a load average near 10: both
    # nodes of a new round restarted their workers for nothing before this) heartbeats again: present
    assert nodes_present(handler({"a": 0}, {"a": 1.0, "b": 2.0})) == 2
    # A closed run (a node that exited 2 closes it, test_launcher_exits.py): its workers end by themselves
    assert nodes_present(handler({"a": 0}, {"a": 1.0}, closed=True)) is None
    assert nodes_present(SimpleNamespace()) is None  # e.g. the legacy etcd handler


def test_the_heartbeat_window_is_the_handlers_or_torchs_default():
    settings = SimpleNamespace(keep_alive_interval=timedelta(seconds=1), keep_alive_max_attempt=3)
    assert heartbeat_window_s(SimpleNamespace(_settings=settings)) == 3.0
    assert heartbeat_window_s(SimpleNamespace()) == 15.0


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
    # it acted on the kill only: no restart for a live node's late heartbeat before it
    assert survivor.log_text().count("[torchfleet] the rendezvous has") == 1
