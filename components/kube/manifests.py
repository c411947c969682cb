"""Manifests that depend on the stack: pure functions returning dicts (tested without mocks).

The static objects live in k8s/ (one per file); what is here cannot be static: the shared
PersistentVolume (its source is the cloud's store), the NFS egress policy (the store's
addresses), each job's own network policy (the CLI writes one per job), and the names and
endpoints derived from the namespace.
"""

from __future__ import annotations

from typing import Any

from components.spec import LABEL_JOB, LABEL_ROLE, ROLE_TRAINING

ETCD_NAME = "etcd"  # the StatefulSet and the client Service in k8s/base/etcd/
ETCD_PEERS = "etcd-peers"  # the headless Service that names the members
# The Service of the gate in front of etcd (k8s/base/etcd-gate/): the only way training pods reach it.
ETCD_GATE_NAME = "etcd-gate"
ETCD_CLIENT_PORT = 2379
ETCD_PEER_PORT = 2380
NFS_PORT = 2049
STATIC_CLAIM_NAME = "shared-data"  # metadata.name in k8s/base/storage/claim.yaml
PART_OF = {"app.kubernetes.io/part-of": "torchfleet"}
# Volume sources a PersistentVolume may carry mountOptions with; the API server rejects them on
# others (hostPath): https://kubernetes.io/docs/concepts/storage/persistent-volumes/#mount-options
MOUNT_OPTION_SOURCES = frozenset({"csi", "nfs", "azureFile", "cephfs", "glusterfs", "iscsi", "rbd", "vsphereVolume"})


# Pod Security Admission levels (kubernetes.io/docs/concepts/security/pod-security-admission/), pinned to
# the version k8s/base/namespace.yaml pins, so a newer API server does not tighten a namespace by itself.
POD_SECURITY_LEVELS = ("privileged", "baseline", "restricted")
POD_SECURITY_VERSION = "v1.30"


def platform_namespace(name: str, level: str) -> dict[str, Any]:
    """A namespace of the platform's own (node healer, store owner) enforcing one Pod Security level."""
    if level not in POD_SECURITY_LEVELS:
        raise ValueError(f"Pod Security level {level!r}: one of {', '.join(POD_SECURITY_LEVELS)}")
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": name,
            "labels": {
                **PART_OF,
                "pod-security.kubernetes.io/enforce": level,
                "pod-security.kubernetes.io/enforce-version": POD_SECURITY_VERSION,
            },
        },
    }


def etcd_initial_cluster(replicas: int) -> str:
    """etcd's --initial-cluster for the StatefulSet's members etcd-0..etcd-(n-1)."""
    if replicas < 1 or replicas % 2 == 0:
        raise ValueError(f"etcd needs an odd member count (1, 3, 5), got {replicas}")
    return ",".join(
        f"{ETCD_NAME}-{i}=http://{ETCD_NAME}-{i}.{ETCD_PEERS}:{ETCD_PEER_PORT}" for i in range(replicas)
    )


def etcd_endpoint(namespace: str) -> str:
    """host:port jobs pass as rdzvEndpoint / --rdzv_endpoint (the etcdEndpoint stack output): the etcd
    gate's Service, which serves etcd's v2 keys API on etcd's client port, each pod only its own run's
    keys (policies/etcd-ingress.yaml admits no training pod to etcd itself)."""
    return f"{ETCD_GATE_NAME}.{namespace}.svc:{ETCD_CLIENT_PORT}"


def shared_volume_name(namespace: str, claim: str) -> str:
    """PersistentVolumes are cluster-wide: the namespace keeps two installs apart."""
    return f"{namespace}-{claim}"


def persistent_volume(
    namespace: str,
    claim: str,
    volume_source: dict[str, Any],
    capacity: str,
    mount_options: tuple[str, ...] | list[str] = (),
) -> dict[str, Any]:
    """The shared store as a ReadWriteMany PersistentVolume that only our claim can bind.

    storageClassName "" and a claimRef: no other claim (and no dynamic provisioner) takes it.
    Retain: `pulumi destroy` of the cluster layer never deletes the data behind it.
    """
    if len(volume_source) != 1:
        raise ValueError(f"volume_source must hold exactly one volume type, got {sorted(volume_source)}")
    (source_type,) = volume_source
    if mount_options and source_type not in MOUNT_OPTION_SOURCES:
        raise ValueError(f"a {source_type} volume takes no mountOptions, got {list(mount_options)}")
    spec: dict[str, Any] = {
        "capacity": {"storage": capacity},
        "accessModes": ["ReadWriteMany"],
        "persistentVolumeReclaimPolicy": "Retain",
        "storageClassName": "",
        "claimRef": {"namespace": namespace, "name": claim},
        **volume_source,
    }
    if mount_options:
        spec["mountOptions"] = list(mount_options)
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": shared_volume_name(namespace, claim), "labels": dict(PART_OF)},
        "spec": spec,
    }


def _training_pods() -> dict[str, Any]:
    return {"matchLabels": {LABEL_ROLE: ROLE_TRAINING}}


def nfs_egress_policy(namespace: str, cidrs: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """Training pods may reach the store's NFS port (for clients inside the pod).

    The volume itself is mounted by the node, outside pod networking, so this policy is not
    what makes the claim work; it lets jobs use the store directly (e.g. an NFS client in the
    image) without opening anything else.
    """
    if not cidrs:
        raise ValueError("nfs_egress_policy needs at least one CIDR of the store")
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "training-to-store", "namespace": namespace, "labels": dict(PART_OF)},
        "spec": {
            "podSelector": _training_pods(),
            "policyTypes": ["Egress"],
            "egress": [
                {
                    "to": [{"ipBlock": {"cidr": cidr}} for cidr in cidrs],
                    "ports": [{"protocol": "TCP", "port": NFS_PORT}],
                }
            ],
        },
    }


def training_pod_labels(job: str) -> dict[str, str]:
    """The labels every pod of a training job carries (the namespace's policies select on them)."""
    return {LABEL_ROLE: ROLE_TRAINING, LABEL_JOB: job}


def job_network_policy(namespace: str, job: str) -> dict[str, Any]:
    """Pods of one job talk to each other on any port (c10d store, NCCL/Gloo pick ports at
    run time), and not to other jobs' pods. One per job: a policy cannot match "the same
    value of torchfleet.io/job" for all jobs at once."""
    same_job = {"podSelector": {"matchLabels": {LABEL_JOB: job}}}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": f"job-{job}",
            "namespace": namespace,
            "labels": {**PART_OF, LABEL_JOB: job},
        },
        "spec": {
            "podSelector": {"matchLabels": {LABEL_JOB: job}},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [same_job]}],
            "egress": [{"to": [same_job]}],
        },
    }
