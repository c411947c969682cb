"""--clip-grad-norm scales each update's gradient down to the given L2 norm (real run: etcd, torchrun, gloo)."""

from __future__ import annotations

import sys

import pytest
import torch
from elastic_trainer.local import SYNTHETIC_EXAMPLE
from elastic_trainer.store.checkpoint import CheckpointStore

pytestmark = pytest.mark.slow

TIMEOUT = 90


def _initial_model():
    sys.path.insert(0, str(SYNTHETIC_EXAMPLE.parent))
    try:
        from synthetic import SyntheticRegression
    finally:
        sys.path.remove(str(SYNTHETIC_EXAMPLE.parent))
    torch.manual_seed(0)  # what the trainer does before build_model (--seed=0)
    return SyntheticRegression(4096, 16, 0).build_model().state_dict()


def _largest_change(make_job, *flags: str) -> float:
    job = make_job("--total-steps=4", "--global-batch-size=16", *flags, nnodes="1:2")
    job.start_node(), job.start_node()
    assert job.wait_for("done", TIMEOUT)["step"] == 4
    final = CheckpointStore(job.checkpoint_dir).load_latest("cpu")[0]["model"]
    return max((final[name] - tensor).abs().max().item() for name, tensor in _initial_model().items())


def test_a_tiny_norm_all_but_freezes_the_weights_and_the_default_moves_them(make_job):
    # lr 0.05 and momentum 0.9: four steps of a gradient of norm 1e-9 move no weight by more than ~2e-10
    assert _largest_change(make_job, "--clip-grad-norm=1e-9") < 1e-8
    assert _largest_change(make_job) > 1e-3
