"""What a cloud hands the Kubernetes layer so jobs can mount the stack's datasets (torchfleet:datasets).

Each cloud module (clouds/<cloud>/datasets.py) installs its managed CSI driver, gives the training
pods' service account read-only access to each bucket (nothing else gets it), and describes each
dataset's PersistentVolume source here; kube/dataset_volumes.py makes the PV/PVC pairs from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi

# k8s/base/jobs/serviceaccount.yaml: the identity every training pod runs as, and the only one
# granted the datasets (torchfleet/jobs/pod_template.py SERVICE_ACCOUNT names it too).
TRAINING_SERVICE_ACCOUNT = "training-job"


@dataclass(frozen=True)
class DatasetVolume:
    """One dataset's PersistentVolume source: the `csi` block and the driver's mount options."""

    name: str
    csi: pulumi.Input[dict]
    mount_options: tuple[str, ...] = ()


@dataclass
class DatasetAccess:
    volumes: tuple[DatasetVolume, ...]
    # The driver add-on and the identity bindings: a pod must not mount before they exist.
    ready: list[pulumi.Resource] = field(default_factory=list)
    # (CIDR, TCP port) training pods themselves must reach: what a FUSE sidecar inside the pod (GKE)
    # talks to. Empty where the driver mounts from the node.
    egress: tuple[tuple[str, int], ...] = ()
    # Annotations a pod mounting a dataset needs (GKE's sidecar injection), for the CLI's manifests.
    pod_annotations: dict[str, str] = field(default_factory=dict)
