"""The launcher's exit codes that decide what the Indexed Job does (torchfleet/jobs/indexed_job.py), on real
torchrun agents and a real etcd.

Regression (issue 19): a script that exits 2 on its arguments was restarted by every agent until
``--max_restarts`` ran out (101 attempts, 2,021 log lines, then exit 1): exit 2 now ends each node at once
with 2, which the job's pod failure policy turns into a failed job.
"""

from __future__ import annotations

import time

import pytest
from elastic_trainer.launcher import EXIT_BAD_INPUT


@pytest.mark.slow
def test_a_bad_argument_ends_every_node_with_2_at_once(make_job):
    job = make_job("--total-steps=0", "--global-batch-size=8", nnodes="2:2")  # argparse: must be >= 1
    started = time.monotonic()
    nodes = [job.start_node(), job.start_node()]
    codes = [node.wait(120) for node in nodes]
    texts = [node.log_text() for node in nodes]
    assert codes == [EXIT_BAD_INPUT, EXIT_BAD_INPUT], "\n\n".join(t[-3000:] for t in texts)
    for text in texts:
        assert "--total-steps: must be >= 1" in text, text[-3000:]
        assert text.count("--total-steps: must be >= 1") == 1, text[-3000:]  # one attempt, no restart
        assert "will restart worker group" not in text, text[-3000:]
    # one start per node: seconds, not the hundred restarts before (bounded loosely: a loaded CI machine)
    assert time.monotonic() - started < 120
