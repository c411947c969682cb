"""`torchfleet demo` when a node fails for real: it says why within seconds, from the node's log,
and leaves nothing running (issue 12: silent for 300 s, then a TimeoutError, while the cause sat
in a node log the demo then deleted)."""

from __future__ import annotations

import argparse
import os
import time
from unittest import mock

import pytest

from tests.harness.processes import TAG_VARIABLE, assert_none_left, new_tag
from torchfleet import demo

pytestmark = pytest.mark.slow


def test_a_failing_node_is_reported_with_the_cause_from_its_log(tmp_path, capsys):
    tag = new_tag()
    # --steps 0 gets past the CLI only with its checks bypassed: the trainer refuses it, torchrun
    # restarts the worker, and the demo must notice instead of waiting for a step.
    args = argparse.Namespace(steps=0, checkpoint_every=20, step_delay=0.05, workdir=tmp_path / "work",
                              recovery="restart")
    started = time.monotonic()
    with mock.patch.object(demo, "check_args", lambda args: None), \
         mock.patch.dict(os.environ, {TAG_VARIABLE: tag}):
        code = demo.run(args)
    took = time.monotonic() - started
    err = capsys.readouterr().err
    assert code == 1, err
    assert took < 150, f"{took:.0f} s: the demo waited instead of noticing"
    assert "restarted its worker 3 times without a step" in err or "exited with code" in err
    assert "argument --total-steps: must be >= 1, got 0" in err  # the cause, from the node's log
    assert "Traceback" not in err and "TimeoutError" not in err
    assert_none_left(tag)
