"""An index on a node that stops reporting is replaced, on the real control plane (node_loss.py says how).

Regression (review of the Indexed Job's node loss): the pod of a silent node was evicted and then
stayed terminating for good while the Node object existed, so its index was never replaced, though
docs/jobs.md promised a replacement after 30 s. The first assertion pins that (no replacement while
the node is merely silent); the second, that the index is replaced once the node is out of service
(tainted node.kubernetes.io/out-of-service, what a node reaper does for a node whose instance is
gone) or deleted (what a cloud's node controller does for a terminated instance). No timing is
asserted: the figures are bench/node_loss.py's.
"""

from __future__ import annotations

import pytest

from tests.controlplane.node_loss import lose_a_node
from tests.controlplane.test_jobs import delete, submit


@pytest.mark.parametrize("remedy", ["out-of-service", "delete"])
def test_an_index_on_a_silent_node_is_replaced_once_the_node_is_out_of_service_or_gone(training_layer, capsys, remedy):
    name = submit(training_layer, capsys, "restart")
    try:
        timeline = lose_a_node(training_layer, name, remedy, quiet_s=30)
    finally:
        delete(training_layer, capsys, name)
    assert "replaced_before_remedy" not in timeline.steps, timeline  # the review's finding, as Kubernetes does it
    assert "replaced" in timeline.steps, timeline
