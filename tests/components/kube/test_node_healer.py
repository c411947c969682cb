"""node_healer.py without mocks: the node healer's objects, least privilege, and its spec keys."""

from __future__ import annotations

import pytest

from components.kube import node_healer
from components.spec import MANAGER_TOLERATIONS
from components.spec.model import NODE_HEALER_IMAGE
from tests.components.spec.configs import config, ok, only, problems
from tests.harness import synth_config, synth_stack
from tests.k8s.rendered import K8S_VERSIONS, problems_of
from torchfleet.jobs.image_ref import DEFAULT_IMAGE

MANAGER = {"torchfleet.io/pool": "manager"}


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_every_object_is_valid_kubernetes(version):
    for obj in node_healer.objects(NODE_HEALER_IMAGE, 60, MANAGER):
        assert problems_of(obj, version) == [], obj["kind"]


def test_the_cluster_role_is_get_list_watch_patch_nodes_only():
    assert node_healer.cluster_role()["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "patch"]}
    ]
    subjects = node_healer.cluster_role_binding()["subjects"]
    assert subjects == [{"kind": "ServiceAccount", "name": "node-healer", "namespace": node_healer.NAMESPACE}]


def test_one_restricted_replica_on_the_manager_pool_running_the_healer():
    deployment = node_healer.deployment("registry.example.com/t:1", 45, MANAGER)
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"] == {"type": "Recreate"}
    pod = deployment["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == MANAGER and pod["serviceAccountName"] == "node-healer"
    assert pod["tolerations"] == list(MANAGER_TOLERATIONS)  # the manager pool's taint, every cloud's (issue 30)
    (container,) = pod["containers"]
    assert container["image"] == "registry.example.com/t:1"
    assert container["command"] == ["python", "-m", "elastic_trainer.node_healer"]
    assert container["args"] == ["--threshold-s=45"]
    assert pod["securityContext"]["runAsNonRoot"] and container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    labels = node_healer.namespace()["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"


def test_egress_to_the_api_server_ports_only_and_no_ingress():
    spec = node_healer.network_policy()["spec"]
    assert spec["podSelector"] == {} and spec["policyTypes"] == ["Ingress", "Egress"]
    assert "ingress" not in spec
    assert spec["egress"] == [{"ports": [{"protocol": "TCP", "port": 443}, {"protocol": "TCP", "port": 6443}]}]


def test_the_default_image_is_the_one_the_cli_runs():
    assert NODE_HEALER_IMAGE == DEFAULT_IMAGE


def training(**node_healer_keys):
    return config("aws", training={"nodeHealer": node_healer_keys})


def test_defaults_and_overrides():
    default = ok(config("aws")).training.node_healer
    assert default.enabled and default.not_ready_seconds == 60 and default.image == NODE_HEALER_IMAGE
    healer = ok(training(enabled=False, image="registry.example.com/t@sha256:" + "a" * 64, notReadySeconds=0))
    assert healer.training.node_healer.enabled is False
    assert healer.training.node_healer.not_ready_seconds == 0


@pytest.mark.parametrize(
    ("keys", "key", "says"),
    [
        ({"notReadySeconds": -1}, "notReadySeconds", ">= 0"),
        ({"notReadySeconds": 3601}, "notReadySeconds", "3600"),
        ({"image": "ghcr.io/torchfleet/torchfleet-trainer"}, "image", "pinned to a tag"),
        ({"image": "ghcr.io/x/y:latest"}, "image", "not latest"),
        ({"image": "a b:1"}, "image", "pinned"),
        ({"enabled": "yes"}, "enabled", "true or false"),
    ],
)
def test_bad_keys_are_refused_naming_the_key(keys, key, says):
    assert says in only(training(**keys), f"torchfleet:training.nodeHealer.{key}")


def test_an_unknown_key_and_every_problem_at_once():
    found = problems(training(period=3, notReadySeconds=-1, image="x"))
    assert {"torchfleet:training.nodeHealer.notReadySeconds", "torchfleet:training.nodeHealer.image"} <= set(found)
    assert any("period" in k or any("period" in m for m in v) for k, v in found.items()), found


def test_the_layer_deploys_it_after_its_priority_class_and_only_when_enabled():
    layer = synth_stack("local")
    (deployment,) = [r for r in layer.of_type("kubernetes:apps/v1:Deployment") if r.name.endswith("-node-healer")]
    # The PriorityClass object itself (k8s/base/cluster/priorityclass-control.yaml), not its ConfigFile.
    wanted = "kubernetes:scheduling.k8s.io/v1:PriorityClass::torchfleet-training-torchfleet-control"
    assert any(d.endswith(wanted) for d in deployment.options["dependencies"]), deployment.options["dependencies"]
    off = synth_config("off", {"torchfleet:cloud": "local", "torchfleet:training": {"nodeHealer": {"enabled": False}}})
    assert not [o for o in off.kubernetes_objects() if o["metadata"].get("namespace") == node_healer.NAMESPACE]
