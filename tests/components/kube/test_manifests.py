"""manifests.py: the stack-dependent manifests, as plain dicts."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.kube import manifests
from components.spec import LABEL_JOB, LABEL_ROLE, ROLE_TRAINING


@pytest.mark.parametrize(
    ("replicas", "expected"),
    [
        (1, "etcd-0=http://etcd-0.etcd-peers:2380"),
        (
            3,
            "etcd-0=http://etcd-0.etcd-peers:2380,etcd-1=http://etcd-1.etcd-peers:2380,"
            "etcd-2=http://etcd-2.etcd-peers:2380",
        ),
    ],
)
def test_initial_cluster_lists_each_member_once(replicas, expected):
    assert manifests.etcd_initial_cluster(replicas) == expected


@pytest.mark.parametrize("replicas", [0, 2, 4])
def test_initial_cluster_refuses_even_or_zero_members(replicas):
    with pytest.raises(ValueError, match="odd member count"):
        manifests.etcd_initial_cluster(replicas)


def test_etcd_endpoint_is_the_gates_service_in_the_namespace():
    # training pods reach etcd only through the gate (k8s/base/etcd-gate/, policies/etcd-ingress.yaml)
    assert manifests.etcd_endpoint("jobs") == "etcd-gate.jobs.svc:2379"


EFS = {"csi": {"driver": "efs.csi.aws.com", "volumeHandle": "fs-123"}}
HOSTPATH = {"hostPath": {"path": "/var/lib/torchfleet/shared", "type": "DirectoryOrCreate"}}


def test_persistent_volume_binds_only_to_our_claim():
    pv = manifests.persistent_volume("ns", "shared-data", EFS, "1Ti", ("tls",))
    spec = pv["spec"]
    assert pv["metadata"]["name"] == "ns-shared-data"
    assert spec["accessModes"] == ["ReadWriteMany"]
    assert spec["storageClassName"] == ""  # no dynamic provisioner takes the claim
    assert spec["claimRef"] == {"namespace": "ns", "name": "shared-data"}
    assert spec["persistentVolumeReclaimPolicy"] == "Retain"
    assert spec["csi"] == EFS["csi"]
    assert spec["mountOptions"] == ["tls"]
    assert spec["capacity"] == {"storage": "1Ti"}


def test_persistent_volume_without_mount_options_has_no_key():
    pv = manifests.persistent_volume("ns", "c", HOSTPATH, "20Gi")
    assert "mountOptions" not in pv["spec"]
    assert pv["spec"]["hostPath"] == HOSTPATH["hostPath"]


@pytest.mark.parametrize(
    ("source", "options", "message"),
    [
        (HOSTPATH, ("nfsvers=4.1",), "hostPath volume takes no mountOptions"),
        ({**EFS, **HOSTPATH}, (), "exactly one volume type"),
        ({}, (), "exactly one volume type"),
    ],
)
def test_persistent_volume_rejects_what_the_api_server_would(source, options, message):
    with pytest.raises(ValueError, match=message):
        manifests.persistent_volume("ns", "c", source, "1Gi", options)


def test_nfs_policy_lets_training_pods_reach_port_2049_of_the_store_only():
    policy = manifests.nfs_egress_policy("ns", ["10.0.1.0/24", "10.0.2.0/24"])
    spec = policy["spec"]
    assert policy["metadata"]["namespace"] == "ns"
    assert spec["podSelector"] == {"matchLabels": {LABEL_ROLE: ROLE_TRAINING}}
    assert spec["policyTypes"] == ["Egress"]
    (rule,) = spec["egress"]
    assert rule["to"] == [{"ipBlock": {"cidr": "10.0.1.0/24"}}, {"ipBlock": {"cidr": "10.0.2.0/24"}}]
    assert rule["ports"] == [{"protocol": "TCP", "port": 2049}]


def test_nfs_policy_needs_an_address():
    with pytest.raises(ValueError, match="at least one CIDR"):
        manifests.nfs_egress_policy("ns", [])


def test_job_policy_admits_only_the_same_job_both_ways():
    policy = manifests.job_network_policy("ns", "resnet")
    spec = policy["spec"]
    same = [{"podSelector": {"matchLabels": {LABEL_JOB: "resnet"}}}]
    assert policy["metadata"]["name"] == "job-resnet"
    assert spec["podSelector"] == {"matchLabels": {LABEL_JOB: "resnet"}}
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    assert spec["ingress"] == [{"from": same}]
    assert spec["egress"] == [{"to": same}]


def test_training_pod_labels_are_the_ones_policies_select():
    assert manifests.training_pod_labels("resnet") == {LABEL_ROLE: ROLE_TRAINING, LABEL_JOB: "resnet"}


def test_platform_namespace_pins_one_pod_security_level_at_the_base_namespace_s_version():
    """The node healer's and the store owner's namespaces differ only in their level (one helper since
    both built it by hand)."""
    import yaml

    from components.kube import node_healer, store_owner

    base = yaml.safe_load((Path(__file__).parents[3] / "k8s" / "base" / "namespace.yaml").read_text())
    assert base["metadata"]["labels"]["pod-security.kubernetes.io/enforce-version"] == manifests.POD_SECURITY_VERSION
    healer, owner = node_healer.namespace(), store_owner.namespace()
    assert healer["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert owner["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"
    assert healer == manifests.platform_namespace(node_healer.NAMESPACE, "restricted")
    assert owner == manifests.platform_namespace(store_owner.NAMESPACE, "baseline")
    with pytest.raises(ValueError, match=r"'strict'.*privileged, baseline, restricted"):
        manifests.platform_namespace("x", "strict")
