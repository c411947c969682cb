"""GKE node pools: the on-demand manager pool, one spot GPU pool per (GPU, zone), and their identity.

Everything here is plain data built by small functions (`node_config`, `gpu_accelerators`,
`pool_options`, ...) so tests check the settings directly as well as through the mocks.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import pulumi
import pulumi_gcp as gcp

from components.spec import (
    CPU_POOL_NAME,
    CPU_TAINT,
    GPU_TAINT,
    LABEL_POOL,
    MANAGER_POOL_NAME,
    MANAGER_TAINTS,
    CpuPoolSpec,
    GpuPoolSpec,
    NodePoolSpec,
)

# GKE's least-privilege node service account (the Compute Engine default account has Editor):
# "At a minimum, these node service accounts must have the Kubernetes Engine Default Node Service
# Account (roles/container.defaultNodeServiceAccount) role" (logs, metrics, and what GKE adds to it
# later, e.g. the autoscaling metrics a hand-picked list missed: GCP review F12), plus pulling images.
# https://cloud.google.com/kubernetes-engine/docs/how-to/service-accounts#default-gke-service-agent
NODE_ROLES = (
    "roles/container.defaultNodeServiceAccount",
    "roles/artifactregistry.reader",
)
# Access is decided by the service account's IAM roles; Google recommends the cloud-platform
# scope with a least-privilege account rather than narrowing scopes.
OAUTH_SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
IMAGE_TYPE = "COS_CONTAINERD"
# pd-balanced: G2 and A3 machines do not take pd-standard boot disks.
DISK_TYPE = "pd-balanced"
# The driver version GKE pairs with the node version (tested together), not the newest one:
# https://cloud.google.com/kubernetes-engine/docs/how-to/gpus#installing_drivers
GPU_DRIVER_VERSION = "DEFAULT"
MANAGER_LABELS = {LABEL_POOL: MANAGER_POOL_NAME}
# components.gke.io/gke-managed-components=true:NoSchedule: GKE's own Deployments (kube-dns, metrics-server,
# konnectivity-agent) tolerate it and run on the manager pool, the platform's pods tolerate it
# (spec/model.py MANAGER_TAINTS), and a researcher's pod may not (issue 30). Changed in place on an existing
# pool: GKE's UpdateNodePool takes taints without re-creating the pool
# (https://cloud.google.com/kubernetes-engine/docs/how-to/update-existing-nodepools).
MANAGER_TAINT = MANAGER_TAINTS["gcp"]
# Kubernetes taint effects as GKE's API spells them.
_GKE_EFFECT = {"NoSchedule": "NO_SCHEDULE", "PreferNoSchedule": "PREFER_NO_SCHEDULE", "NoExecute": "NO_EXECUTE"}


def service_account_id(stack: str) -> str:
    """A valid, per-stack account id: 6-30 characters, [a-z][-a-z0-9]*[a-z0-9].

    Long stack names are cut and given a short hash of the full name, so two stacks that share
    a long prefix still get two accounts.
    """
    base = f"tfleet-{re.sub(r'[^a-z0-9-]+', '-', stack.lower()).strip('-')}".rstrip("-")
    if len(base) > 24:
        digest = hashlib.sha256(stack.encode()).hexdigest()[:6]
        base = f"{base[:17].rstrip('-')}-{digest}"
    return f"{base}-nodes"


def gke_taint(taint: dict[str, str]) -> dict[str, str]:
    return {"key": taint["key"], "value": taint["value"], "effect": _GKE_EFFECT[taint["effect"]]}


def gpu_accelerators(pool: GpuPoolSpec) -> list[dict[str, Any]]:
    """The pool's GPUs, with the driver installed by GKE (GKE also runs its own device plugin).

    Given for every machine family: N1 takes T4/V100 as attached accelerators, while G2, A2 and A3
    come with theirs, but GKE still needs the type and count to install the driver and to let the
    autoscaler scale the pool from zero for `nvidia.com/gpu` requests.
    """
    return [
        {
            "type": pool.accelerator,
            "count": pool.gpus_per_node,
            "gpu_driver_installation_config": {"gpu_driver_version": GPU_DRIVER_VERSION},
        }
    ]


def node_config(
    service_account: pulumi.Input[str],
    machine_type: str,
    disk_size_gb: int,
    labels: dict[str, str],
    resource_labels: dict[str, str],
    taints: list[dict[str, str]] | None = None,
    spot: bool = False,
    accelerators: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Settings every pool shares: private identity, shielded boot, metadata server protection."""
    config: dict[str, Any] = {
        "machine_type": machine_type,
        "disk_size_gb": disk_size_gb,
        "disk_type": DISK_TYPE,
        "image_type": IMAGE_TYPE,
        "service_account": service_account,
        "oauth_scopes": list(OAUTH_SCOPES),
        "labels": labels,
        "resource_labels": resource_labels,
        "taints": taints or [],
        "spot": spot,
        "shielded_instance_config": {"enable_secure_boot": True, "enable_integrity_monitoring": True},
        # Pods see the GKE metadata server (Workload Identity), never the node's credentials.
        "workload_metadata_config": {"mode": "GKE_METADATA"},
        "metadata": {"disable-legacy-endpoints": "true"},
    }
    if accelerators:
        config["guest_accelerators"] = accelerators
        # gVNIC: required by A3, and the faster NIC for every GPU family that supports it.
        config["gvnic"] = {"enabled": True}
    return config


def gpu_autoscaling(pool: GpuPoolSpec) -> dict[str, Any]:
    # One zone per pool, so GKE's per-zone min/max are the pool's. ANY: take spot capacity
    # wherever the pool's locations have it (GKE's advice for spot pools).
    return {"min_node_count": pool.min_nodes, "max_node_count": pool.max_nodes, "location_policy": "ANY"}


def cpu_autoscaling(pool: CpuPoolSpec) -> dict[str, Any]:
    # Totals over the pool's zones, from zero; ANY for spot as the GPU pools (take capacity where it is),
    # BALANCED on demand as the manager pool.
    return {
        "total_min_node_count": pool.min_nodes,
        "total_max_node_count": pool.max_nodes,
        "location_policy": "ANY" if pool.spot else "BALANCED",
    }


def manager_autoscaling(pool: NodePoolSpec) -> dict[str, Any]:
    # total_*: the config counts nodes for the whole pool, while min/max_node_count are per zone.
    return {
        "total_min_node_count": pool.min_nodes,
        "total_max_node_count": pool.max_nodes,
        "location_policy": "BALANCED",
    }


# Auto-upgrade is required on a release channel; auto-repair replaces broken nodes.
MANAGEMENT = {"auto_repair": True, "auto_upgrade": True}
# GPU pools upgrade in place, one node at a time: a surge node would need a spare GPU (often not
# there for spot, and billed while it exists), and training jobs already survive losing a node.
# https://cloud.google.com/kubernetes-engine/docs/concepts/node-pool-upgrade-strategies#surge
GPU_UPGRADE_SETTINGS = {"strategy": "SURGE", "max_surge": 0, "max_unavailable": 1}


def pool_options(parent: pulumi.Resource, depends_on: list[pulumi.Resource]) -> pulumi.ResourceOptions:
    """Node pools wait for the node account's roles (nodes log from their first boot).

    initialNodeCount forces a replacement when changed and GKE's autoscaler owns the size after
    creation, so later differences are ignored (the provider docs advise exactly this).
    Pools carry fixed names (`gpu-<gpu>-<zone>`, the names jobs and the CLI use), so a change
    that replaces a pool (machine type, GPU, spot) must delete the old one first: two pools
    cannot share a name.
    """
    return pulumi.ResourceOptions(
        parent=parent,
        depends_on=depends_on,
        ignore_changes=["initialNodeCount"],
        delete_before_replace=True,
        # GPU pools with many nodes take long to drain and surge-upgrade.
        custom_timeouts=pulumi.CustomTimeouts(create="30m", update="60m", delete="30m"),
    )


class GcpNodeIdentity(pulumi.ComponentResource):
    """The nodes' own service account, holding NODE_ROLES and nothing else."""

    def __init__(self, name: str, project: str, stack: str, opts: pulumi.ResourceOptions | None = None):
        super().__init__("torchfleet:clouds:GcpNodeIdentity", name, None, opts)
        self.account = gcp.serviceaccount.Account(
            f"{name}-account",
            account_id=service_account_id(stack),
            display_name=f"Torchfleet GKE nodes ({stack})",
            # A fixed id: a replacement must delete the old account first (issue 20, day 2).
            opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True),
        )
        self.email = self.account.email
        member = self.account.email.apply(lambda email: f"serviceAccount:{email}")
        self.roles = [
            gcp.projects.IAMMember(
                f"{name}-{role.split('/')[1].replace('.', '-').lower()}",
                project=project,
                role=role,
                member=member,
                opts=pulumi.ResourceOptions(parent=self),
            )
            for role in NODE_ROLES
        ]
        self.register_outputs({"email": self.email})


class GcpNodePools(pulumi.ComponentResource):
    """The manager pool and every GPU pool, running as the node identity."""

    def __init__(
        self,
        name: str,
        cluster: gcp.container.Cluster,
        identity: GcpNodeIdentity,
        manager: NodePoolSpec,
        gpu_pools: tuple[GpuPoolSpec, ...],
        zones: tuple[str, ...],
        resource_labels: dict[str, str],
        cpu_pool: CpuPoolSpec | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("torchfleet:clouds:GcpNodePools", name, None, opts)
        self._cluster = cluster
        self._identity = identity
        self._labels = resource_labels
        self.manager = self._create_manager(name, manager, zones)
        self.cpu = self._create_cpu_pool(name, cpu_pool) if cpu_pool else None
        self.gpu = [self._create_gpu_pool(name, pool) for pool in gpu_pools]
        self.register_outputs({"pools": [p.name for p in self.all]})

    @property
    def all(self) -> list[gcp.container.NodePool]:
        return [self.manager, *([self.cpu] if self.cpu else []), *self.gpu]

    def _create_cpu_pool(self, name: str, pool: CpuPoolSpec) -> gcp.container.NodePool:
        """torchfleet:cpuPool: labelled and tainted torchfleet.io/pool=cpu (only the CLI's CPU pods land there;
        GKE's own Deployments tolerate neither, so they never hold a CPU node up), from zero."""
        return gcp.container.NodePool(
            f"{name}-{CPU_POOL_NAME}",
            name=CPU_POOL_NAME,
            cluster=self._cluster.id,
            location=self._cluster.location,
            node_locations=sorted(pool.zones),  # a set to the provider, as the manager pool's
            initial_node_count=0,
            autoscaling=cpu_autoscaling(pool),
            management=MANAGEMENT,
            node_config=node_config(
                self._identity.email,
                pool.machine_type,
                pool.disk_size_gb,
                pool.labels,
                {**self._labels, "torchfleet-pool": CPU_POOL_NAME},
                taints=[gke_taint(CPU_TAINT)],
                spot=pool.spot,
            ),
            opts=pool_options(self, self._identity.roles),
        )

    def _create_manager(self, name: str, pool: NodePoolSpec, zones: tuple[str, ...]) -> gcp.container.NodePool:
        return gcp.container.NodePool(
            f"{name}-{MANAGER_POOL_NAME}",
            name=MANAGER_POOL_NAME,
            cluster=self._cluster.id,
            location=self._cluster.location,
            # Sorted: the provider keeps node_locations as a set (terraform-provider-google-beta
            # resource_container_node_pool.go, TypeSet), so reordering torchfleet:zones changes nothing,
            # and the program's input says the same (the day-2 plan compares lists by position).
            node_locations=sorted(zones),
            initial_node_count=1,  # per zone; the autoscaler settles on total_min_node_count
            autoscaling=manager_autoscaling(pool),
            management=MANAGEMENT,
            node_config=node_config(
                self._identity.email,
                pool.machine_type,
                pool.disk_size_gb,
                MANAGER_LABELS,
                {**self._labels, "torchfleet-pool": MANAGER_POOL_NAME},
                taints=[gke_taint(MANAGER_TAINT)],
            ),
            opts=pool_options(self, self._identity.roles),
        )

    def _create_gpu_pool(self, name: str, pool: GpuPoolSpec) -> gcp.container.NodePool:
        return gcp.container.NodePool(
            f"{name}-{pool.name}",
            name=pool.name,
            cluster=self._cluster.id,
            location=self._cluster.location,
            node_locations=[pool.zone],
            initial_node_count=pool.min_nodes,
            autoscaling=gpu_autoscaling(pool),
            management=MANAGEMENT,
            upgrade_settings=GPU_UPGRADE_SETTINGS,
            node_config=node_config(
                self._identity.email,
                pool.machine_types[0],  # spec.parse allows one machine type per GKE pool
                pool.disk_size_gb,
                pool.labels,
                {**self._labels, "torchfleet-pool": pool.name},
                # GKE puts nvidia.com/gpu=present:NoSchedule on GPU pools itself; declaring the
                # same taint keeps the pool free of diffs and matches README.md's "Names, labels, taints".
                taints=[gke_taint(GPU_TAINT)],
                spot=pool.spot,
                accelerators=gpu_accelerators(pool),
            ),
            opts=pool_options(self, self._identity.roles),
        )
