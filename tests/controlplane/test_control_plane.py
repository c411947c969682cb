"""The tier itself: the training layer applies to a real API server, Pod Security Admission refuses
what `restricted` refuses, and the scheduler places GPU pods by the pools' labels and taints."""

from __future__ import annotations

import json

from components.spec import GPU_RESOURCE, LABEL_ZONE
from tests.controlplane.layer import get, kubectl, wait_for

RESTRICTED_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "spec": {
        "securityContext": {"runAsNonRoot": True, "runAsUser": 10001, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [
            {
                "name": "main",
                "image": "registry.example.com/probe:1",
                "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
            }
        ],
    },
}


def pod(name: str, **spec) -> dict:
    out = json.loads(json.dumps(RESTRICTED_POD))
    out["metadata"] = {"name": name}
    out["spec"].update(spec)
    return out


def phase(cp, namespace: str, name: str) -> str | None:
    return get(cp, "pod", name, "-n", namespace)["status"].get("phase")


def test_the_layer_is_up_with_its_namespace_enforcing_restricted(training_layer):
    namespace = get(training_layer.cp, "namespace", training_layer.namespace)
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    etcd = wait_for(
        "etcd's StatefulSet ready",
        lambda: get(training_layer.cp, "statefulset", "etcd", "-n", training_layer.namespace)["status"].get(
            "readyReplicas"
        ),
    )
    assert etcd >= 1


def test_pod_security_admission_refuses_a_pod_without_a_seccomp_profile(training_layer):
    """What the 2020 ElasticJob controller's pods look like (k8s.io/api v0.15 drops seccompProfile)."""
    bare = pod("no-seccomp")
    del bare["spec"]["securityContext"]["seccompProfile"]
    out = kubectl(
        training_layer.cp, "apply", "-n", training_layer.namespace, "-f", "-", input=json.dumps(bare), check=False
    )
    assert 'violates PodSecurity "restricted' in out
    assert "seccompProfile" in out


def test_a_gpu_pod_lands_on_a_gpu_node_only_when_it_tolerates_the_taint(training_layer):
    cp, ns = training_layer.cp, training_layer.namespace
    gpu = {"resources": {"limits": {GPU_RESOURCE: "1"}}}
    untolerated = pod("gpu-untolerated")
    untolerated["spec"]["containers"][0].update(gpu)
    tolerated = pod("gpu-tolerated", tolerations=[{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}])
    tolerated["spec"]["containers"][0].update(gpu)
    try:
        kubectl(cp, "apply", "-n", ns, "-f", "-", input=json.dumps({"kind": "List", "apiVersion": "v1",
                                                                       "items": [untolerated, tolerated]}))  # fmt: skip
        wait_for("the tolerating GPU pod running", lambda: phase(cp, ns, "gpu-tolerated") == "Running")
        node_name = get(cp, "pod", "gpu-tolerated", "-n", ns)["spec"]["nodeName"]
        assert node_name in {n["metadata"]["name"] for n in training_layer.gpu_nodes}
        refused = wait_for(
            "the scheduler's verdict on the untolerating pod",
            lambda: [
                c
                for c in get(cp, "pod", "gpu-untolerated", "-n", ns)["status"].get("conditions", [])
                if c["type"] == "PodScheduled" and c["status"] == "False"
            ],
        )
        # GPU nodes refuse it by their taint, and so do the manager and CPU pool nodes, tainted too since issue 30
        # (so no "Insufficient nvidia.com/gpu" from the manager nodes any more: the scheduler's message counts each
        # node once, by the first filter that refuses it).
        assert "had untolerated taint" in refused[0]["message"], refused[0]["message"]
    finally:
        kubectl(cp, "delete", "-n", ns, "pod", "gpu-untolerated", "gpu-tolerated", "--wait=false", check=False)


def test_the_gpu_nodes_are_the_stacks_pools_in_their_zones(training_layer):
    listed = get(training_layer.cp, "nodes", "-l", "torchfleet.io/pool=gpu")["items"]
    shapes = {(n["metadata"]["labels"]["torchfleet.io/gpu"], n["metadata"]["labels"][LABEL_ZONE]) for n in listed}
    assert shapes == {
        (n["metadata"]["labels"]["torchfleet.io/gpu"], n["metadata"]["labels"][LABEL_ZONE])
        for n in training_layer.gpu_nodes
    }
    assert all(n["status"]["allocatable"][GPU_RESOURCE] != "0" for n in listed)


def test_no_pod_in_any_namespace_mounts_an_nfs_server_itself(training_layer):
    """Regression (issue 20, GCP review F11, Azure review 8): the store is exported to the nodes
    without root squashing, and an inline nfs volume is mounted from the node's address, so a pod in
    `default` could mount it as root. The layer's admission policy refuses such a pod in every
    namespace, before Pod Security is even asked; a pod without one is admitted there."""
    cp = training_layer.cp
    nfs = pod("inline-nfs", volumes=[{"name": "store", "nfs": {"server": "10.0.32.2", "path": "/share"}}])
    # `default` enforces no Pod Security level: only the policy stands between the pod and the share.
    out = kubectl(cp, "apply", "--dry-run=server", "-n", "default", "-f", "-", input=json.dumps(nfs), check=False)
    assert "torchfleet-no-inline-nfs" in out and "inline nfs volumes are refused" in out, out
    plain = pod("no-nfs", volumes=[{"name": "scratch", "emptyDir": {}}])
    out = kubectl(cp, "apply", "--dry-run=server", "-n", "default", "-f", "-", input=json.dumps(plain), check=False)
    assert "created (server dry run)" in out, out
