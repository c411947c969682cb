"""Datasets as Kubernetes objects: pure builders of each dataset's read-only PV/PVC pair and egress policy.

Static provisioning, as each driver documents it: storageClassName "" and a claimRef, so only our
claim binds the volume and no provisioner makes one (Mountpoint for S3, Cloud Storage FUSE and Blob
CSI all mount existing buckets this way). ReadOnlyMany, the PV's `csi.readOnly` and the pods'
readOnly mounts keep them read-only on top of the read-only permissions each cloud grants.
"""

from __future__ import annotations

from typing import Any

from components.kube.manifests import PART_OF, _training_pods

# The size is required by the API and ignored by every object-store driver.
CAPACITY = "1Ti"
LABEL_DATASET = "torchfleet.io/dataset"
# Annotations a pod mounting a dataset needs, per cloud. GKE injects the Cloud Storage FUSE sidecar
# only into pods that ask: https://cloud.google.com/kubernetes-engine/docs/how-to/cloud-storage-fuse-csi-driver-pv
POD_ANNOTATIONS = {"gcp": {"gke-gcsfuse/volumes": "true"}}


def claim_name(dataset: str) -> str:
    """The PVC in the training namespace; `torchfleet submit --dataset NAME` mounts it."""
    return f"dataset-{dataset}"


def volume_name(namespace: str, dataset: str) -> str:
    """PersistentVolumes are cluster-wide: the namespace keeps two installs apart."""
    return f"{namespace}-dataset-{dataset}"


def persistent_volume(
    namespace: str, dataset: str, csi: dict[str, Any], mount_options: tuple[str, ...] | list[str] = ()
) -> dict[str, Any]:
    if not csi.get("driver") or not csi.get("volumeHandle"):
        raise ValueError(f"dataset {dataset}: a CSI source needs a driver and a volumeHandle, got {sorted(csi)}")
    spec: dict[str, Any] = {
        "capacity": {"storage": CAPACITY},
        "accessModes": ["ReadOnlyMany"],
        # Retain: deleting the claim never asks a driver to touch the bucket.
        "persistentVolumeReclaimPolicy": "Retain",
        "storageClassName": "",
        "claimRef": {"namespace": namespace, "name": claim_name(dataset)},
        "csi": {**csi, "readOnly": True},
    }
    if mount_options:
        spec["mountOptions"] = list(mount_options)
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": volume_name(namespace, dataset), "labels": {**PART_OF, LABEL_DATASET: dataset}},
        "spec": spec,
    }


def persistent_volume_claim(namespace: str, dataset: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": claim_name(dataset),
            "namespace": namespace,
            "labels": {**PART_OF, LABEL_DATASET: dataset},
        },
        "spec": {
            "accessModes": ["ReadOnlyMany"],
            "storageClassName": "",
            "volumeName": volume_name(namespace, dataset),
            "resources": {"requests": {"storage": CAPACITY}},
        },
    }


def storage_egress_policy(namespace: str, rules: list[tuple[str, int]] | tuple[tuple[str, int], ...]) -> dict[str, Any]:
    """Training pods may reach these (CIDR, TCP port) pairs only, each port to its own address (GKE: the
    Cloud Storage FUSE sidecar runs inside the pod, so the namespace's default-deny applies to it)."""
    if not rules:
        raise ValueError("storage_egress_policy needs at least one (CIDR, port) of the store's endpoints")
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "training-to-datasets", "namespace": namespace, "labels": dict(PART_OF)},
        "spec": {
            "podSelector": _training_pods(),
            "policyTypes": ["Egress"],
            "egress": [
                {"to": [{"ipBlock": {"cidr": cidr}}], "ports": [{"protocol": "TCP", "port": port}]}
                for cidr, port in rules
            ],
        },
    }
