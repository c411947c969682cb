"""The node healer heals node loss on the real control plane, with no one else acting (issue 30 item 3).

Before it (test_node_loss.py's first assertion) the index of a silent node stayed unreplaced while
the Node object existed. Here the healer (training-image/elastic_trainer/node_healer.py) runs as a
process with its ServiceAccount's token and RBAC (tests/controlplane/healer.py), a GPU node and a
manager node go silent, and: the GPU node gets the out-of-service taint and its index a new pod;
the manager node is never tainted; once the GPU node reports again the healer removes its taint.
Hang detectors only: the figures are bench/node_loss.py's.
"""

from __future__ import annotations

from elastic_trainer.node_healer import ANNOTATION

from tests.controlplane.healer import healer_token, out_of_service, running_healer
from tests.controlplane.layer import get, kubectl, wait_for
from tests.controlplane.node_loss import OUT_OF_SERVICE, STEP_TIMEOUT_S, lose_a_node, node_ready, revive, silence
from tests.controlplane.test_jobs import delete, submit


def manager_node(layer) -> str:
    return get(layer.cp, "nodes", "-l", "torchfleet.io/pool=manager")["items"][0]["metadata"]["name"]


def test_a_silent_gpu_node_is_tainted_out_of_service_its_index_replaced_and_untainted_when_back(
    training_layer, capsys, tmp_path
):
    manager = manager_node(training_layer)
    name = submit(training_layer, capsys, "restart")
    gpu_node = ""
    try:
        with running_healer(training_layer, tmp_path, threshold_s=5) as log:
            silence(training_layer, manager)
            timeline = lose_a_node(training_layer, name, "healer", untaint=False)  # revives the GPU node, taint kept
            gpu_node = timeline.node
            assert "replaced" in timeline.steps, timeline
            assert "tainted" in timeline.steps, timeline  # by the healer: nothing else taints out-of-service
            wait_for(f"{manager} not ready", lambda: node_ready(training_layer, manager) != "True", STEP_TIMEOUT_S)
            # The GPU node is back; the healer removes the taint it added (and its annotation).
            wait_for(f"{gpu_node} untainted by the healer", lambda: not out_of_service(training_layer, gpu_node),
                     STEP_TIMEOUT_S)  # fmt: skip
            annotations = get(training_layer.cp, "node", gpu_node)["metadata"].get("annotations") or {}
            assert ANNOTATION not in annotations
            # The manager node has been not ready through several of the healer's passes (every 2 s,
            # threshold 5 s): never tainted.
            assert not out_of_service(training_layer, manager), get(training_layer.cp, "node", manager)["spec"]
            text = log.read_text()
        assert f"taint {gpu_node}" in text and f"untaint {gpu_node}" in text, text
        assert manager not in text, text
    finally:
        revive(training_layer, manager)
        if gpu_node:
            kubectl(training_layer.cp, "taint", "node", gpu_node, f"{OUT_OF_SERVICE}-", check=False)
        delete(training_layer, capsys, name)


def answer(out: str) -> str:
    """kubectl auth can-i's first line (a warning such as "nodes is not namespace scoped" may follow)."""
    return out.strip().splitlines()[0]


def test_the_healers_service_account_may_patch_nodes_and_nothing_else(training_layer):
    healer_token(training_layer)  # applies the ServiceAccount and its binding
    who = "--as=system:serviceaccount:torchfleet-node-healer:node-healer"
    for verb in ("get", "list", "watch", "patch"):
        assert answer(kubectl(training_layer.cp, "auth", "can-i", verb, "nodes", who)) == "yes"
    # A subresource is its own flag: "nodes/status" would name a node called status.
    refused = (("delete", "nodes"), ("update", "nodes"), ("get", "pods"), ("get", "secrets"),
               ("patch", "nodes", "--subresource=status"), ("create", "pods", "--subresource=eviction"))  # fmt: skip
    for verb, *resource in refused:
        assert answer(kubectl(training_layer.cp, "auth", "can-i", verb, *resource, who, check=False)) == "no", resource
