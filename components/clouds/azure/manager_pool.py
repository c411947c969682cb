"""The manager pool (etcd, the training controllers) as its own AgentPool, named by what AKS cannot change.

AKS refuses in place a node pool's zones ("You can't change the number of availability zones after you
create a node pool": aks-docs reliability-availability-zones-configure.md), its VM size ("You can't change
the virtual machine (VM) size of a node pool after you create it": create-node-pools.md), and sets disk
size and encryption at host when the VMs are made (enable-host-encryption.md). azure-native 3.29.0 marks
none of these force-new on an inline agentPoolProfiles entry (provider/pkg/gen/replacement.go forceNewMap
lists only AgentPool vmSize/gpuInstanceProfile/nodePublicIPTags), so the old inline manager pool sent them
as an in-place ManagedCluster update, which AKS answered with 400 (issue 29).

The pool's name hashes those settings (zones as a set: their order means nothing), so a change is a new
name: agentPoolName is a path parameter, hence force-new, and Pulumi creates the new pool first and deletes
the old one after (no delete-before-replace: the names differ). AKS deletes the old pool without cordon
and drain (aks-docs create-node-pools.md), so etcd and the controllers restart on the new pool at once
(etcd's zone-redundant disks reattach): docs/day-2-azure.md says to change it between jobs. It is a
User pool: the cluster's one System pool is the fixed inline `system` pool (cluster.py), so deleting
the old manager pool never leaves AKS without one.
"""

from __future__ import annotations

import pulumi
from pulumi_azure_native import containerservice

from components.clouds.azure import naming
from components.clouds.azure.live_count import node_count
from components.spec import LABEL_POOL, MANAGER_POOL_NAME, MANAGER_TAINTS, PlatformSpec

PREFIX = "mgr"
# torchfleet.io/pool=manager:NoSchedule (spec/model.py MANAGER_TAINTS): AKS's add-ons live on the System pool,
# so only the platform's pods tolerate it (issue 30). Not one of the immutable settings: nodeTaints is updated
# in place (`az aks nodepool update --node-taints`, aks-docs use-node-taints.md; azure-native 3.29.0 forces a
# new AgentPool only on vmSize, gpuInstanceProfile and nodePublicIPTags), so adding it keeps the pool's name.
MANAGER_TAINT = MANAGER_TAINTS["azure"]


def immutable_settings(spec: PlatformSpec) -> dict:
    m = spec.manager_pool
    return {
        "vmSize": m.machine_type,
        "availabilityZones": sorted(spec.zones),
        "osDiskSizeGB": m.disk_size_gb,
        "enableEncryptionAtHost": m.encryption_at_host,
    }


def manager_pool_name(spec: PlatformSpec) -> str:
    """mgr + 8 hex digits of the immutable settings: 11 characters, inside AKS's 12 (naming.POOL_NAME_RE)."""
    return naming.hashed_pool_name(PREFIX, immutable_settings(spec))


def is_hashed_name(name: str | None) -> bool:
    """Whether an agent pool name is one manager_pool_name makes (torchfleet/preview/plans.py asks)."""
    return naming.is_hashed_pool_name(PREFIX, name)


def manager_pool_args(spec: PlatformSpec) -> dict:
    """Everything but the count and the cluster it joins, as plain data."""
    m = spec.manager_pool
    settings = immutable_settings(spec)
    return {
        "agent_pool_name": manager_pool_name(spec),
        "mode": "User",
        "vm_size": settings["vmSize"],
        "os_type": "Linux",
        "os_sku": "Ubuntu",
        "type": "VirtualMachineScaleSets",
        "enable_auto_scaling": True,
        # etcd and the controllers need a node: never scaled to zero.
        "min_count": max(1, m.min_nodes),
        "max_count": max(1, m.max_nodes),
        "availability_zones": settings["availabilityZones"],
        "enable_node_public_ip": False,
        # Temp disks, caches and OS/data disk flows encrypted on the VM host (pools.py says why).
        "enable_encryption_at_host": settings["enableEncryptionAtHost"],
        "os_disk_size_gb": settings["osDiskSizeGB"],
        "node_labels": {LABEL_POOL: MANAGER_POOL_NAME},
        "node_taints": [naming.taint(MANAGER_TAINT)],
        "orchestrator_version": spec.kubernetes_version,
        "tags": naming.tags(spec.stack, **{naming.TAG_POOL_NAME: MANAGER_POOL_NAME}),
    }


def create_manager_pool(
    name: str,
    spec: PlatformSpec,
    cluster: containerservice.ManagedCluster,
    resource_group_name: pulumi.Input[str],
    subnet_id: pulumi.Input[str],
    parent: pulumi.Resource,
) -> containerservice.AgentPool:
    args = manager_pool_args(spec)
    return containerservice.AgentPool(
        f"{name}-manager",
        resource_group_name=resource_group_name,
        resource_name_=cluster.name,
        vnet_subnet_id=subnet_id,
        count=node_count(resource_group_name, cluster.name, args["agent_pool_name"], args["min_count"],
                         args["max_count"], after=cluster),
        **args,
        opts=pulumi.ResourceOptions(
            parent=parent,
            depends_on=[cluster],
            custom_timeouts=pulumi.CustomTimeouts(create="30m", update="60m", delete="30m"),
        ),
    )
