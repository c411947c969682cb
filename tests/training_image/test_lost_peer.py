"""Restart mode: a node lost before its peers' process group formed (issue 23: a survivor took no step for
over 180 s after a kill). training-image/elastic_trainer/launch/lost_peer.py restarts the survivor's workers once
the rendezvous drops the node, instead of letting them wait for it until the process-group timeout.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from elastic_trainer.launch import lost_peer
from elastic_trainer.launch.lost_peer import dropped_self, heartbeat_window_s, nodes_present
from elastic_trainer.local import IMAGE_DIR, LocalJob, worker_pids

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
    job = LocalJob(
        etcd_endpoint=etcd.endpoint,
        run_id=f"lost-{uuid.uuid4().hex[:8]}",
        workdir=tmp_path / "job",
        script_args=["--total-steps=100000", "--global-batch-size=16", "--checkpoint-every=20", "--step-delay-s=0.02"],
        extra_env={
            "PYTHONPATH": f"{hooks}:{IMAGE_DIR}",
            "TORCHFLEET_PRELOAD": "0",
            "TORCHFLEET_PG_TIMEOUT_S": str(PG_TIMEOUT_S),
        },
    )
    with job:
        survivor, victim = job.start_node("node0"), job.start_node("node1")
        deadline = time.monotonic() + HANG
        while not (worker_pids(victim.pid) and worker_pids(survivor.pid)):  # a round of both has formed
            assert time.monotonic() < deadline, "no round of both nodes formed"
            time.sleep(0.05)
        killed_at = victim.kill()
        went_on = job.events.wait_for(
            lambda e: e.kind == "step" and e.t > killed_at and e["world"] == 1,
            HANG,
            describe="the survivor's step alone",
        )
    assert went_on.node == "node0"
    assert "[torchfleet] the rendezvous has 1 of this round's 2 nodes" in survivor.log_text()
    # it acted on the kill only: no restart for a live node's late heartbeat before it
    assert survivor.log_text().count("[torchfleet] the rendezvous has") == 1


def test_a_node_knows_when_the_rendezvous_dropped_it():
    def handler(participants, heartbeats, closed=False, node="a") -> SimpleNamespace:
        state = SimpleNamespace(participants=participants, last_heartbeats=heartbeats, closed=closed, round=3)
        return SimpleNamespace(_state_holder=SimpleNamespace(state=state), _this_node=node)

    assert not dropped_self(handler({"a": 0, "b": 1}, {"a": 1.0, "b": 1.0}))
    assert not dropped_self(handler({"a": 0}, {"a": 1.0}))  # alone in its round
    # issue 23's split: a's heartbeats starved, b moved the run to a round of its own; a keeps no heartbeat
    assert dropped_self(handler({"b": 0}, {"b": 1.0}))
    assert dropped_self(handler({}, {}))  # dropped, and no round formed yet
    assert not dropped_self(handler({"b": 0}, {"b": 1.0}, closed=True))  # the run has ended
    assert not dropped_self(SimpleNamespace())  # e.g. the legacy etcd handler


@pytest.mark.slow
def test_a_node_dropped_while_its_agent_stalled_rejoins_instead_of_splitting_the_run(etcd, tmp_path):
    """Issue 23: with --nnodes=1:2, a node whose agent's heartbeats stalled past the heartbeat window while a
    second node joined was dropped; the joiner formed a newer round alone, and both world-1 groups of one run id
    trained apart and waited for each other forever. SIGSTOP on the first agent makes the stall certain. No
    periodic checkpoint in the run: a commit from the superseded round is fenced (fence.py), its worker exits and
    that too rejoins; a job between checkpoints (or a script without the store) has only the agent to notice."""
    job = LocalJob(
        etcd_endpoint=etcd.endpoint,
        run_id=f"split-{uuid.uuid4().hex[:8]}",
        workdir=tmp_path / "job",
        script_args=[
            "--total-steps=100000",
            "--global-batch-size=16",
            "--checkpoint-every=1000000",
            "--step-delay-s=0.02",
        ],
    )
    with job:
        first = job.start_node("node0")
        job.wait_for("step", HANG, world=1)
        os.kill(first.pid, signal.SIGSTOP)  # the agent only: its heartbeats stop, its worker trains on
        try:
            job.start_node("node1")
            alone = job.events.wait_for(
                lambda e: e.kind == "step" and e.node == "node1",
                HANG,
                describe="the joiner's step in a round of its own",
            )
        finally:
            os.kill(first.pid, signal.SIGCONT)
        assert alone["world"] == 1  # the split is set up: node0's round was superseded while it was stopped
        # both nodes end in one round, a world of 2 (before the fix: two world-1 groups until the hang limit);
        # only rank 0 reports steps, and it can be either node
        job.events.wait_for(
            lambda e: e.kind == "step" and e["world"] == 2,
            HANG,
            since=alone.t,
            describe="a step in a round of both nodes",
        )
    assert "[torchfleet] the rendezvous dropped this node" in first.log_text()


class _MemoryBackend:
    """A rendezvous backend in memory (torch's RendezvousBackend contract: get_state, set_state with a token)."""

    name = "memory"

    def __init__(self, state_bits: bytes) -> None:
        self.bits, self.token = state_bits, 1

    def get_state(self):
        return self.bits, self.token

    def set_state(self, state_bits: bytes, token=None):
        if token != self.token:
            return self.bits, self.token, False
        self.bits, self.token = state_bits, self.token + 1
        return self.bits, self.token, True


def test_a_node_does_not_declare_itself_dead_but_still_drops_a_silent_peer(monkeypatch):
    """Issue 23 leftover (the rejoin added a restart at a starved node's start): torch's sanitizer, run by a node's
    own sync, dropped the node itself when its agent had starved past the heartbeat window; alone, it emptied its
    round and restarted its workers to rejoin. Now its own expired heartbeat survives its own sync (to be refreshed
    by its keep-alive), while a peer's expired one is dropped as before."""
    import pickle

    import torch.distributed as dist
    from torch.distributed.elastic.rendezvous import dynamic_rendezvous as dr

    for cls, name in ((dr._BackendRendezvousStateHolder, "_sanitize"), (dr.DynamicRendezvousHandler, "__init__")):
        monkeypatch.setattr(cls, name, getattr(cls, name))  # torch's own again after the test
    lost_peer._keep_own_heartbeat()

    handler = dr.DynamicRendezvousHandler.from_backend(
        "own-heartbeat", dist.HashStore(), _MemoryBackend(b""), 1, 2, keep_alive_interval=1, keep_alive_max_attempt=3
    )
    me, peer = handler._this_node, dr._NodeDesc("10.0.0.2", 1, 0)
    state = dr._RendezvousState()
    state.round, state.complete, state.participants = 4, True, {me: 0, peer: 1}
    expired = datetime.now(UTC) - timedelta(seconds=10)  # both silent for over 3 x 1 s
    state.last_heartbeats = {me: expired, peer: expired}
    handler._state_holder._backend = _MemoryBackend(pickle.dumps(state))

    handler._state_holder.sync()
    seen = handler._state_holder.state
    assert set(seen.participants) == {me} and seen.round == 4  # before: empty, round 5, and dropped_self
    assert not dropped_self(handler) and nodes_present(handler) == 1  # so the peer's loss is still acted on
    assert dr._should_keep_alive(dr._RendezvousContext(me, seen, handler._settings))  # refreshed at once


def _rendezvous_state(etcd, run_id: str):
    """The run's rendezvous state as etcd holds it (torch's own etcd-v2 backend reads it)."""
    import pickle

    from torch.distributed.elastic.rendezvous import RendezvousParameters
    from torch.distributed.elastic.rendezvous.etcd_rendezvous_backend import create_backend

    params = RendezvousParameters("etcd-v2", etcd.endpoint, run_id, min_nodes=1, max_nodes=2)
    backend, _store = create_backend(params)
    return pickle.loads(backend.get_state()[0])  # noqa: S301 - the state torch itself pickled into the test's own etcd


@pytest.mark.slow
def test_a_lone_node_starved_after_its_round_formed_keeps_its_round_and_its_workers(etcd, tmp_path):
    """Issue 23 leftover, as it happened: the first node of ``torchfleet run --local`` starting its worker at a
    load average of 8-11 went silent past the heartbeat window, dropped itself at its next sync and restarted its
    workers for nothing (2 of 2 runs). SIGSTOP of its agent makes the starvation certain. Alone, nothing else can
    restart its workers (no node waits, none is lost, none fails), and the wait is for the agent's first heartbeat
    after SIGCONT, however long the load makes it: so this holds at any load, and fails on the previous code."""
    run_id = f"starved-{uuid.uuid4().hex[:8]}"
    job = LocalJob(
        etcd_endpoint=etcd.endpoint,
        run_id=run_id,
        workdir=tmp_path / "job",
        script_args=["--total-steps=100000", "--global-batch-size=16", "--checkpoint-every=20", "--step-delay-s=0.02"],
    )
    with job:
        node = job.start_node("node0")
        job.wait_for("step", HANG, world=1)
        before, workers = _rendezvous_state(etcd, run_id), worker_pids(node.pid)
        os.kill(node.pid, signal.SIGSTOP)  # the agent only: its heartbeats stop, its worker trains on
        time.sleep(2 * 3)  # twice the launcher's window for 2 nodes (keep_alive 1 s x 3)
        continued = datetime.now(UTC)
        os.kill(node.pid, signal.SIGCONT)
        deadline = time.monotonic() + HANG
        while True:  # the agent's first heartbeat since SIGCONT: its own syncs came before it
            state = _rendezvous_state(etcd, run_id)
            if any(beat > continued for beat in state.last_heartbeats.values()):
                break
            assert time.monotonic() < deadline, "no heartbeat from the agent after SIGCONT"
            time.sleep(0.2)
        text, after = node.log_text(), worker_pids(node.pid)
    assert "[torchfleet] the rendezvous dropped this node" not in text, text[-3000:]
    # before the fix: dropped, a new round, and new workers
    assert (state.round, list(state.participants)) == (before.round, list(before.participants))
    assert after == workers and workers
