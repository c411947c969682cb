"""Real in-place runs that end: the time limit (TORCHFLEET_STOP_AT) and the final model's export.

Both were done by the restart mode (trainer.py) only: an in-place job ran past its limit (so submit
refused the limit with --recovery inplace) and left no model in TORCHFLEET_OUTPUT_DIR.
"""

from __future__ import annotations

import time

import pytest
import torch
from elastic_trainer.deadline import ENV_STOP_AT
from elastic_trainer.local.inplacerun import InplaceJob, lighthouse_binary
from elastic_trainer.outputs import MODEL_DIR, MODEL_FILE, exported_step
from elastic_trainer.store.checkpoint import CheckpointStore
from elastic_trainer.train_config import ENV_OUTPUT_DIR

pytestmark = pytest.mark.slow

TIMEOUT = 90  # per wait: starting two workers on a loaded machine takes tens of seconds


@pytest.fixture(autouse=True)
def _lighthouse():
    if lighthouse_binary() is None:
        pytest.fail("torchft_lighthouse is not installed (pip install -e .[dev] installs torchft)")


def test_a_time_limit_stops_every_group_after_the_same_step_with_the_stop_checkpoint_and_exit_0(tmp_path):
    # Regression: the in-place trainer read no TORCHFLEET_STOP_AT, so the job ran (and billed) past it.
    # Only group 1's limit is near (its clock may run ahead): group 0 stops on group 1's vote.
    args = ["--total-steps=100000", "--global-batch-size=32", "--checkpoint-every=1000", "--step-delay-s=0.02"]
    with InplaceJob(tmp_path / "job", args, groups=2, min_groups=2,  # no step commits without both
                    extra_env={ENV_STOP_AT: str(int(time.time()) + 3600)}) as job:
        nodes = [job.start_group(0)]
        job.extra_env = {ENV_STOP_AT: str(int(time.time()) + 12)}
        nodes.append(job.start_group(1))
        assert [node.wait(TIMEOUT) for node in nodes] == [0, 0]
        events = job.events.snapshot()
    exits = [e for e in events if e.kind == "exit"]
    assert {e["group"] for e in exits} == {0, 1} and {e["reason"] for e in exits} == {"time_limit"}, exits
    stopped_at = {e["step"] for e in exits}
    assert len(stopped_at) == 1, exits  # the same step on both groups
    step = stopped_at.pop()
    assert max(e["step"] for e in events if e.kind == "step") <= step
    saves = [e for e in events if e.kind == "ckpt"]
    assert [(e["reason"], e["step"]) for e in saves] == [("stop", step)], saves
    assert [e["group"] for e in events if e.kind == "stop_seen"] == [1 - saves[0]["group"]]
    assert CheckpointStore(job.checkpoint_dir).committed()[-1].step == step  # a resubmit resumes there


def test_the_writer_group_exports_the_final_model_after_the_final_checkpoint(tmp_path):
    out = tmp_path / "out"
    args = ["--total-steps=30", "--global-batch-size=32", "--checkpoint-every=10", "--step-delay-s=0.02"]
    with InplaceJob(tmp_path / "job", args, groups=2, min_groups=2, extra_env={ENV_OUTPUT_DIR: str(out)}) as job:
        nodes = [job.start_group(0), job.start_group(1)]
        assert [node.wait(TIMEOUT) for node in nodes] == [0, 0]
        events = job.events.snapshot()
        state, _, _ = CheckpointStore(job.checkpoint_dir).load_latest("cpu")
    final = [e for e in events if e.kind == "ckpt" and e["reason"] == "final"]
    models = [e for e in events if e.kind == "model"]
    assert len(final) == 1 and len(models) == 1 and models[0]["step"] == 30, (final, models)
    assert models[0].node == final[0].node and models[0]["wall"] >= final[0]["wall"]
    assert exported_step(out) == 30
    exported = torch.load(out / MODEL_DIR / MODEL_FILE, weights_only=True)
    assert exported.keys() == state["model"].keys()
    assert all(torch.equal(exported[k], state["model"][k]) for k in exported)
