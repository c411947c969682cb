"""Real in-place runs (issue 14): the real torchft Lighthouse, replica groups as local process trees, gloo on CPU.

A node is the launcher with ``TORCHFLEET_RECOVERY=inplace`` (inplacerun.py): one worker, one
replica group. "Killing a node" SIGKILLs its tree, "a spot notice" SIGTERMs its launcher.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from elastic_trainer.hooks import FAULT_STALL_COMMIT
from elastic_trainer.local.inplacerun import InplaceJob, lighthouse_binary
from elastic_trainer.store.checkpoint import CheckpointStore

pytestmark = pytest.mark.slow

TIMEOUT = 45  # per wait; a step of these runs takes tens of milliseconds
# Long enough never to finish within a test: each test ends the job itself.
ARGS = ["--total-steps=100000", "--global-batch-size=48", "--checkpoint-every=10", "--step-delay-s=0.02",
        "--keep-checkpoints=1000"]  # the stop checkpoint of one group outlives the others' prunes


@pytest.fixture
def make_job(tmp_path, request) -> Iterator:
    if lighthouse_binary() is None:
        pytest.fail("torchft_lighthouse is not installed (pip install -e .[dev] installs torchft)")
    jobs: list[InplaceJob] = []

    def factory(groups: int, **env: str) -> InplaceJob:
        job = InplaceJob(tmp_path / f"job{len(jobs)}", ARGS, groups=groups, extra_env=env)
        jobs.append(job.__enter__())
        return job

    yield factory
    for job in jobs:
        job.stop()
    if getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed:
        for job in jobs:
            for node in job.nodes:
                print(f"----- {node.name} -----\n{node.log_text()[-5000:]}")


def first_step(job: InplaceJob, since: float, world: int, node: str | None = None):
    return job.events.wait_for(
        lambda e: e.kind == "step" and e["world"] == world and (node is None or e.node == node), TIMEOUT, since,
        describe=f"step at {world} groups{' on ' + node if node else ''}")


def test_a_killed_group_leaves_the_survivors_running_and_a_replacement_heals_from_a_peer(make_job):
    job = make_job(3)
    nodes = [job.start_group(group) for group in range(3)]
    job.events.wait_for(lambda e: e.kind == "step" and e["world"] == 3 and e["step"] >= 20, TIMEOUT,
                        describe="20 steps at 3 groups")
    survivors = nodes[:2]
    workers = {node.name: job.workers(node) for node in survivors}
    assert all(len(pids) == 1 for pids in workers.values()), workers

    killed_at = nodes[2].kill()
    resumed = first_step(job, killed_at, world=2)
    assert resumed.t - killed_at <= 2.0, f"survivors' next step came {resumed.t - killed_at:.2f} s after the kill"
    assert {node.name: job.workers(node) for node in survivors} == workers  # nobody restarted

    replacement = job.start_group(2, name="replacement")
    joined = first_step(job, replacement.started_at, world=3, node="replacement")
    mine = [e for e in job.events.snapshot() if e.node == "replacement"]
    healed = [e for e in mine if e.kind == "healed"]
    assert healed and healed[0]["step"] > 0, [e.data for e in mine]
    # live state from a peer, not the shared store: the only way to a store read emits "resumed"
    assert not [e for e in mine if e.kind in ("resumed", "start")], [e.data for e in mine]
    assert {node.name: job.workers(node) for node in survivors} == workers  # the join restarted nobody either

    # the same step on every group: the same global loss and the same weights
    check = joined["step"] + 5
    job.events.wait_for(lambda e: e.kind == "step" and e.node == "replacement" and e["step"] == check, TIMEOUT)
    time.sleep(0.5)  # the other groups' events of that step
    at_check = {e.node: (e["loss"], e["digest"]) for e in job.steps() if e["step"] == check}
    assert set(at_check) == {"group0-0", "group1-1", "replacement"}, at_check
    assert len(set(at_check.values())) == 1, at_check


def test_lost_lighthouse_falls_back_to_the_last_checkpoint_and_resumes_when_it_is_back(make_job):
    job = make_job(2, TORCHFLEET_INPLACE_QUORUM_TIMEOUT_S="3")
    job.start_group(0), job.start_group(1)
    job.events.wait_for(lambda e: e.kind == "step" and e["world"] == 2 and e["step"] >= 25, TIMEOUT)
    lost_at = job.lighthouse.stop()
    last = max(e["step"] for e in job.steps())
    job.events.wait_for(lambda e: e.kind == "lighthouse_wait", TIMEOUT, lost_at, describe="a worker waiting")
    back_at = time.monotonic()
    job.lighthouse.start()
    resumed = job.events.wait_for(lambda e: e.kind == "resumed", TIMEOUT, back_at, describe="resumed from the store")
    committed = max(c.step for c in CheckpointStore(job.checkpoint_dir).committed())
    assert resumed["source"] == "store"
    assert committed - 10 <= resumed["step"] <= last  # the newest checkpoint before the loss
    first_step(job, resumed.t, world=2)  # both groups train together again


def test_sigterm_checkpoints_and_exits_143_while_the_others_go_on(make_job):
    job = make_job(2)
    nodes = [job.start_group(0), job.start_group(1)]
    job.events.wait_for(lambda e: e.kind == "step" and e["world"] == 2 and e["step"] >= 15, TIMEOUT)
    survivor_workers = job.workers(nodes[0])
    sent_at = nodes[1].sigterm()
    stop = job.events.wait_for(lambda e: e.kind in ("ckpt", "fenced") and e["reason"] == "stop", TIMEOUT, sent_at)
    assert stop.t - sent_at <= 15  # GKE's notice
    assert nodes[1].wait(TIMEOUT) == 143
    if stop.kind == "fenced":
        # The notice fell on a periodic step: the writer group (replica rank 0) claimed a newer
        # generation for its checkpoint of that same step, so the stop save rightly did not commit
        # over it (a CI run saw this). The step is in the store all the same.
        job.events.wait_for(lambda e: e.kind == "ckpt" and e.node == nodes[0].name and e["step"] >= stop["step"],
                            TIMEOUT, sent_at)
    saved = [c for c in CheckpointStore(job.checkpoint_dir).committed() if c.step >= stop["step"]]
    assert saved, "the stop step is committed"
    after = first_step(job, stop.t, world=1, node=nodes[0].name)
    assert after["step"] > stop["step"] - 1
    assert job.workers(nodes[0]) == survivor_workers


def test_no_group_exits_0_before_the_final_checkpoint_is_committed(tmp_path):
    # The Kubernetes Job succeeds at its first index that exits 0 and stops the others
    # (inplace_job.py successPolicy): a group that does not write the final checkpoint must wait for
    # it. The writer's final save is held back 3 s here; both groups train every step (min 2).
    args = ["--total-steps=30", "--global-batch-size=32", "--checkpoint-every=10", "--step-delay-s=0.02"]
    with InplaceJob(tmp_path / "job", args, groups=2, min_groups=2,
                     extra_env={FAULT_STALL_COMMIT: "30:3"}) as job:
        nodes = [job.start_group(0), job.start_group(1)]
        assert [node.wait(TIMEOUT) for node in nodes] == [0, 0]
        events = job.events.snapshot()
    final = [e for e in events if e.kind == "ckpt" and e["reason"] == "final"]
    seen = [e for e in events if e.kind == "final_seen"]
    assert len(final) == 1 and final[0]["step"] == 30
    assert len(seen) == 1 and seen[0]["group"] != final[0]["group"]
    # it waited out the writer's 3 s (the two processes' lines may reach the test in either order)
    assert seen[0]["waited_s"] >= 2.0 and seen[0]["wall"] >= final[0]["wall"] - 0.1


def test_hold_for_world_keeps_a_lone_group_from_training_past_the_step_until_a_peer_joins(tmp_path):
    # Issue 23: the in-place demo's survivor finished the job before its replacement joined (2 of 4
    # runs on a loaded machine); the demo now holds it as the restart demo holds node0.
    args = ["--total-steps=40", "--global-batch-size=32", "--checkpoint-every=10", "--step-delay-s=0.02"]
    with InplaceJob(tmp_path / "job", args, groups=2, extra_env={"TORCHFLEET_HOLD_FOR_WORLD": "20:2"}) as job:
        alone = job.start_group(0)
        held = job.events.wait_for(lambda e: e.kind == "hold", TIMEOUT, describe="the lone group holding")
        assert held["step"] == 20 and held["until_world"] == 2
        time.sleep(1.0)  # it keeps holding, however long it waits
        assert max(e["step"] for e in job.steps()) == 19
        peer = job.start_group(1)
        assert [alone.wait(TIMEOUT * 2), peer.wait(TIMEOUT * 2)] == [0, 0]
        steps = job.steps()
    assert {e["world"] for e in steps if e["step"] >= 20} == {2}  # every step from the held one on had both
