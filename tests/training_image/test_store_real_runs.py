"""The store's fallback in a real run: etcd, the launcher, torchrun, one CPU node (issue 11).

Regression: a committed checkpoint whose state.pt matches its meta.json but that
``torch.load(weights_only=True)`` refuses made every restarted worker exit 1 (a crash loop
through all of torchrun's restarts); the job must resume from the previous checkpoint.
"""

from __future__ import annotations

import hashlib
import json

import pytest
import torch
from elastic_trainer.checkpoint import CheckpointStore, FileDigest

pytestmark = pytest.mark.slow

TIMEOUT = 90


def test_a_checkpoint_torch_refuses_is_skipped_and_the_job_resumes_from_the_previous_one(make_job):
    args = ["--global-batch-size=16", "--checkpoint-every=10"]
    first = make_job("--total-steps=40", *args, nnodes="1:1")
    first.start_node()
    assert first.wait_for("done", TIMEOUT)["step"] == 40
    assert first.nodes[0].wait(TIMEOUT) == 0
    store = CheckpointStore(first.checkpoint_dir)
    newest = store.committed()[0]
    assert newest.step == 40
    # intact on disk, refused by the unpickler: a reference to a function is code, not data
    data = torch.load(newest.path / "state.pt", weights_only=True)
    torch.save({**data, "hook": print}, newest.path / "state.pt")
    written = (newest.path / "state.pt").read_bytes()
    digest = FileDigest(len(written), hashlib.sha256(written).hexdigest())
    meta = json.loads((newest.path / "meta.json").read_text())
    meta.update(digest.as_meta(), files={"state.pt": digest.as_meta()})
    (newest.path / "meta.json").write_text(json.dumps(meta))
    store.verify(newest)

    again = make_job("--total-steps=60", *args, nnodes="1:1", workdir=first.workdir)
    node = again.start_node("again")
    skipped = again.wait_for("ckpt_skipped", TIMEOUT)
    assert skipped["name"] == newest.path.name and "weights_only" in skipped["reason"]
    assert again.wait_for("resumed", TIMEOUT)["step"] == 30
    assert again.wait_for("done", TIMEOUT)["step"] == 60
    assert node.wait(TIMEOUT) == 0
    assert f"WARNING skipping checkpoint: {newest.path.name}" in node.log_text()
