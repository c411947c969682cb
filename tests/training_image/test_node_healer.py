"""elastic_trainer/node_healer.py's decisions and patches, without an API server (the real one:
tests/controlplane/test_node_healer.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from elastic_trainer.node_healer import ANNOTATION, OUT_OF_SERVICE, _patch, decide

NOW = datetime(2026, 11, 28, 18, 0, 0, tzinfo=UTC)


def node(pool="gpu", ready="False", since_s=120, taints=(), ours=False):
    stamp = (NOW - timedelta(seconds=since_s)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "metadata": {
            "name": "n",
            "resourceVersion": "7",
            "labels": {"torchfleet.io/pool": pool} if pool else {},
            "annotations": {ANNOTATION: "node-healer"} if ours else {},
        },
        "spec": {"taints": list(taints)},
        "status": {"conditions": [{"type": "Ready", "status": ready, "lastTransitionTime": stamp}]},
    }


@pytest.mark.parametrize(
    ("n", "action"),
    [
        (node(ready="False", since_s=61), "taint"),
        (node(ready="Unknown", since_s=60), "taint"),
        (node(ready="Unknown", since_s=59), None),  # not yet: a short blip heals by itself
        (node(ready="True"), None),
        (node(ready="True", taints=[OUT_OF_SERVICE], ours=True), "untaint"),
        (node(ready="True", taints=[OUT_OF_SERVICE]), None),  # an administrator's taint is theirs
        (node(ready="Unknown", taints=[OUT_OF_SERVICE]), None),  # already out of service
        (node(pool="manager", ready="Unknown", since_s=3600), None),  # etcd's pool: never
        (node(pool=None, ready="Unknown", since_s=3600), None),
    ],
)
def test_decide(n, action):
    assert decide(n, NOW, 60) == action


def test_taint_and_untaint_patches_test_the_resource_version_and_keep_other_taints():
    other = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    ops = _patch(node(taints=[other]), "taint")
    assert ops[0] == {"op": "test", "path": "/metadata/resourceVersion", "value": "7"}
    taints = ops[1]["value"]
    assert taints[0] == other and {k: taints[1][k] for k in ("key", "value", "effect")} == OUT_OF_SERVICE
    assert ops[2] == {"op": "add", "path": "/metadata/annotations", "value": {ANNOTATION: "node-healer"}}
    back = _patch(node(ready="True", taints=[other, OUT_OF_SERVICE], ours=True), "untaint")
    assert back[1] == {"op": "add", "path": "/spec/taints", "value": [other]}
    assert back[2] == {"op": "remove", "path": "/metadata/annotations/torchfleet.io~1out-of-service-by"}
