"""Real runs of the asynchronous and the sharded checkpoints (issue 11): etcd, torchrun, gloo on CPU.

Asynchronous checkpoints are the default, so every run in test_real_runs.py exercises them too;
these two pin what only they can: a stop that lands while a write is in flight, and a sharded
checkpoint written by two ranks and resumed by one.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from elastic_trainer.hooks import FAULT_STALL_COMMIT
from elastic_trainer.store import sharded
from elastic_trainer.store.checkpoint import CheckpointStore

pytestmark = pytest.mark.slow

TIMEOUT = 90


def newest(job) -> tuple[dict, dict]:
    state, meta, _ = CheckpointStore(job.checkpoint_dir).load_latest()
    return state, meta


def test_a_stop_during_a_background_write_waits_for_it_then_commits_the_stop_step_and_resumes_exactly(make_job):
    args = ["--total-steps=90", "--global-batch-size=16", "--checkpoint-every=20", "--step-delay-s=0.03", "--seed=5"]
    baseline = make_job(*args, nnodes="1:1")
    baseline.start_node()
    assert baseline.wait_for("done", TIMEOUT)["step"] == 90
    assert baseline.nodes[0].wait(TIMEOUT) == 0

    # The write of step 20 stalls 4 s between its fsync and its commit (the fault hook runs in the
    # writer thread): training goes on meanwhile, and the SIGTERM lands while the write is in flight.
    job = make_job(*args, nnodes="1:1", extra_env={FAULT_STALL_COMMIT: "20:4"})
    node = job.start_node()
    writing = job.wait_for("ckpt_writing", TIMEOUT, step=20)
    job.events.wait_for(lambda e: e.kind == "step" and e["step"] >= 25 and e.t > writing.t, TIMEOUT)
    sent_at = node.sigterm()
    assert node.wait(TIMEOUT) == 143

    periodic = job.wait_for("ckpt", TIMEOUT, step=20)
    stop = job.wait_for("ckpt", TIMEOUT, reason="stop")
    assert writing.t < sent_at < periodic.t < stop.t  # the stop waited for the write in flight
    assert stop["step"] == max(e["step"] for e in job.steps()) > 25
    assert periodic["blocked_s"] < periodic["write_s"]  # the 4 s stall was not training's
    assert {"seconds", "blocked_s", "write_s", "path", "gen"} <= set(stop.data)
    assert [c.step for c in CheckpointStore(job.checkpoint_dir).committed()] == [stop["step"], 20]

    again = make_job(*args, nnodes="1:1", workdir=job.workdir)
    again.start_node("again")
    assert again.wait_for("resumed", TIMEOUT)["step"] == stop["step"]
    assert again.wait_for("done", TIMEOUT)["step"] == 90
    assert again.nodes[0].wait(TIMEOUT) == 0
    expected, got = newest(baseline)[0], newest(again)[0]
    for name, tensor in expected["model"].items():
        assert torch.equal(tensor, got["model"][name]), name
    assert expected["scheduler"] == got["scheduler"]


def test_a_sharded_checkpoint_of_two_nodes_resumes_on_one(make_job):
    job = make_job("--total-steps=150", "--global-batch-size=16", "--checkpoint-every=20", "--step-delay-s=0.03",
                   "--checkpoint-format=sharded", nnodes="1:2")
    survivor, noticed = job.start_node(), job.start_node()
    # One node may start alone (nnodes 1:2) and save a stop checkpoint of world 1 when the other
    # joins: wait for the generation of two, and read the checkpoint its event names (the store's
    # oldest can be that world-1 stop save; CI once failed on exactly that).
    together = job.wait_for("step", TIMEOUT, world=2)
    first = job.wait_for("ckpt", TIMEOUT, since=together.t, reason="periodic", gen=together["gen"])
    meta = json.loads((Path(first["path"]) / "meta.json").read_text())
    assert (first["reason"], meta["checkpoint_format"], meta["world_size"]) == ("periodic", "sharded", 2)
    shards = {name: f["size"] for name, f in meta["files"].items() if name.endswith(".distcp")}
    assert set(shards) == {"__0_0.distcp", "__1_0.distcp"} and all(shards.values())  # both ranks wrote

    job.events.wait_for(lambda e: e.kind == "step" and e["world"] == 2 and e["step"] >= first["step"] + 20, TIMEOUT)
    sent_at = noticed.sigterm()
    assert noticed.wait(TIMEOUT) == 143
    stop = job.wait_for("ckpt", TIMEOUT, since=sent_at, reason="stop")
    resumed = job.wait_for("resumed", TIMEOUT, since=sent_at, world=1)
    assert (resumed["step"], resumed["from_world"]) == (stop["step"], 2)
    assert job.wait_for("done", TIMEOUT)["step"] == 150
    assert survivor.wait(TIMEOUT) == 0

    store = CheckpointStore(job.checkpoint_dir)
    final = store.committed()[0]
    meta = store.verify(final)
    assert (meta["step"], meta["world_size"], meta["reason"]) == (150, 1, "final")
    state = sharded.read(final)
    assert state["step"] == 150 and set(state) >= {"model", "optimizer", "rng", "sampler", "scheduler"}


def test_a_checkpoint_write_that_never_ends_ends_the_worker_and_its_group_starts_again(make_job):
    # Issue 23: the restart-mode loop waited for the write in flight with no bound, so a store that
    # stopped answering held the GPUs and trained nothing. The commit of step 20 stalls far past
    # --checkpoint-write-timeout-s (the fault hook sleeps in the writer thread); the next save's wait
    # must give up at the bound, leave with exit 75, and the agent must start the group again.
    job = make_job("--total-steps=100000", "--global-batch-size=16", "--checkpoint-every=20", "--step-delay-s=0.03",
                   "--checkpoint-write-timeout-s=3", nnodes="1:1", extra_env={FAULT_STALL_COMMIT: "20:3600"})
    node = job.start_node()
    writing = job.wait_for("ckpt_writing", TIMEOUT, step=20)
    gave_up = job.wait_for("exit", TIMEOUT, since=writing.t, reason="stalled")
    assert (gave_up["code"], gave_up["waiting_for"], gave_up["limit_s"]) == (75, "the checkpoint write", 3.0)
    assert gave_up["step"] == 20  # the write it gave up on: training went on meanwhile
    again = job.wait_for("start", TIMEOUT, since=gave_up.t)  # the agent restarted the worker
    assert again.t > gave_up.t
    assert not any(e.kind == "ckpt" and e["step"] == 20 for e in job.events.snapshot())  # never committed
    assert "--checkpoint-write-timeout-s=3" in node.log_text() and "leaving with exit 75" in node.log_text()
    node.sigterm()
    node.wait(TIMEOUT)
