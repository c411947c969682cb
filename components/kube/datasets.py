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
# On the pods of a job submitted with --dataset (torchfleet/jobs/datasets.py); the storage egress policy
# selects them only, so a job that mounts no dataset keeps the namespace's default deny (on GKE the policy
# opens private.googleapis.com, every Google API, and the metadata server).
LABEL_MOUNTS_DATASET = "torchfleet.io/datasets"
# What the sidecar a cloud injects into a pod mounting a dataset requests, per cloud: (CPU millicores,
# memory MiB). torchfleet/jobs/sizing.py subtracts it from the pod's share of the node.
# GKE injects the Cloud Storage FUSE sidecar only into pods that ask (gke-gcsfuse/volumes:
# https://cloud.google.com/kubernetes-engine/docs/how-to/cloud-storage-fuse-csi-driver-pv); its webhook's
# defaults (250m CPU request and limit, 256Mi memory, 5Gi ephemeral storage: gcs-fuse-csi-driver
# cmd/webhook/main.go, 2026-08-21) were counted by nothing, so a GPU pod sized to its whole share stayed
# Pending, and a 250m limit throttles the one process that serves every data-loader worker's reads.
# The annotations the webhook reads (pkg/webhook/mutatingwebhook.go) set them instead:
# - CPU: request 500m, limit "0" (none, which the webhook allows): CPU is compressible, so the sidecar
#   may use what the loaders leave idle, and is guaranteed half a core when they do not;
# - memory: request 1Gi, limit "0": an OOM-killed sidecar fails every read of the pod, and without a
#   file cache (none is configured here) gcsfuse's memory is its read buffers;
# - ephemeral storage: request 1Gi, not 5Gi: the mount is read-only and has no file cache, so gcsfuse
#   writes no temporary files (https://cloud.google.com/kubernetes-engine/docs/how-to/cloud-storage-fuse-csi-driver-sidecar).
SIDECAR_REQUESTS = {"gcp": (500, 1024)}
POD_ANNOTATIONS = {
    "gcp": {
        "gke-gcsfuse/volumes": "true",
        "gke-gcsfuse/cpu-request": f"{SIDECAR_REQUESTS['gcp'][0]}m",
        "gke-gcsfuse/cpu-limit": "0",
        "gke-gcsfuse/memory-request": f"{SIDECAR_REQUESTS['gcp'][1]}Mi",
        "gke-gcsfuse/memory-limit": "0",
        "gke-gcsfuse/ephemeral-storage-request": "1Gi",
    }
}


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
    """Training pods that mount a dataset may reach these (CIDR, TCP port) pairs only, each port to its own
    address (GKE: the Cloud Storage FUSE sidecar runs inside the pod, so the namespace's default-deny
    applies to it)."""
    if not rules:
        raise ValueError("storage_egress_policy needs at least one (CIDR, port) of the store's endpoints")
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "training-to-datasets", "namespace": namespace, "labels": dict(PART_OF)},
        "spec": {
            "podSelector": {"matchLabels": {**_training_pods()["matchLabels"], LABEL_MOUNTS_DATASET: "true"}},
            "policyTypes": ["Egress"],
            "egress": [
                {"to": [{"ipBlock": {"cidr": cidr}}], "ports": [{"protocol": "TCP", "port": port}]}
                for cidr, port in rules
            ],
        },
    }
