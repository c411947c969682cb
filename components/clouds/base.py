"""The contract every cloud module implements, and the handle it gives the Kubernetes layer.

A cloud module is a ComponentResource class `XCluster(name, spec, opts)` registered in
platform.CLOUDS. It must:
  - create the network, the Kubernetes cluster, the `manager` pool (on-demand) and one GPU
    pool per `spec.gpu_pools` entry (one GPU type, one zone, labelled and tainted as
    spec.GpuPoolSpec.labels / spec.GPU_TAINT say, able to scale from zero);
  - make the GPUs schedulable (device plugin where the cloud does not install one) and
    configure or deploy the cluster autoscaler;
  - create the shared NFS store, protected from `pulumi destroy` when spec.storage.protect;
  - expose `handle: ClusterHandle` and call register_outputs last.
Everything a cloud cannot do is declared in traits.py and rejected by spec.parse, never
branched on here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import pulumi
import pulumi_kubernetes as k8s

from components.clouds.dataset_access import DatasetAccess
from components.spec import GpuPoolSpec, PlatformSpec


@dataclass(frozen=True)
class SharedStore:
    """What the Kubernetes layer needs to make a ReadWriteMany PersistentVolume of the store."""

    kind: str  # "efs" | "filestore" | "azurefiles" | "hostpath": names the store in outputs/docs
    # The PersistentVolume spec's volume source, e.g. {"csi": {...}} or {"nfs": {...}}.
    volume_source: pulumi.Input[dict]
    mount_options: tuple[str, ...] = ()
    capacity: str = "1Ti"
    # Where the NFS traffic goes, for the namespace's egress policy (port 2049).
    nfs_cidrs: tuple[pulumi.Input[str], ...] = ()
    id: pulumi.Input[str] | None = None  # the store's cloud id, for outputs
    # True when the store itself makes every file the training user's (an EFS access point with
    # a POSIX user). Otherwise the store's root is root-owned 0755 and the Kubernetes layer runs
    # a one-shot job that hands it to spec.TRAINING_UID, or training pods could not write to it.
    owner_enforced: bool = False
    # The same store under a volumeHandle of its own, for the store-owner Job's PersistentVolume:
    # kubelet stages a CSI volume by its handle, so two PVs with one handle on one node share (and
    # unstage) one mount, and AKS asks for a handle unique in the cluster (Azure review 7). None
    # where the driver's handle has a fixed form (then both PVs carry volume_source).
    owner_volume_source: pulumi.Input[dict] | None = None


@dataclass
class ClusterHandle:
    """What a cloud hands to the cloud-agnostic Kubernetes layer (kube/training.py)."""

    name: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]  # always a secret
    provider: k8s.Provider
    zones: tuple[str, ...]
    gpu_pools: tuple[GpuPoolSpec, ...]
    store: SharedStore
    # nodeSelector that puts control pods (etcd, controllers) on the manager pool.
    manager_selector: dict[str, str] = field(default_factory=dict)
    # StorageClass for etcd's persistent volumes; None: the cluster's default class.
    storage_class: str | None = None
    # Resources the Kubernetes layer must wait for (node groups, CSI add-ons, ...).
    ready: list[pulumi.Resource] = field(default_factory=list)
    # Cloud-specific stack outputs (region, fileSystemId, ...).
    outputs: dict[str, pulumi.Input] = field(default_factory=dict)
    # The stack's datasets (torchfleet:datasets): the CSI driver, the read-only binding, each PV
    # source (clouds/dataset_access.py); None when the stack declares none.
    datasets: DatasetAccess | None = None


class CloudCluster(Protocol):
    """A cloud's ComponentResource: constructed as `Cls(name, spec, opts)`, exposes `handle`."""

    handle: ClusterHandle

    def __init__(self, name: str, spec: PlatformSpec, opts: pulumi.ResourceOptions | None = None) -> None: ...
