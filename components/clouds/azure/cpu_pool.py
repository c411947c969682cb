"""torchfleet:cpuPool on AKS: one User AgentPool for the CLI's pods without a GPU, named by what AKS cannot change.

As the manager pool (manager_pool.py, which cites the docs): zones, VM size, OS disk size and encryption at host are
set when the VMs are made, and so is a spot pool's priority ("All three are immutable": pools.py), so the name hashes
them and a change is a new pool, created before the old one is deleted. Labelled and tainted torchfleet.io/pool=cpu
(spec/model.py CPU_TAINT); a spot pool also carries AKS's own spot taint, declared so there is no diff, which the
CLI's CPU pods tolerate (torchfleet/jobs/pod_template.py cpu_pool). Scales from minNodes, 0 by default.
"""

from __future__ import annotations

import pulumi
from pulumi_azure_native import containerservice

from components.clouds.azure import naming
from components.clouds.azure.live_count import node_count
from components.spec import AKS_SPOT_TAINT, CPU_POOL_NAME, CPU_TAINT, CpuPoolSpec, PlatformSpec

PREFIX = "cpu"


def immutable_settings(pool: CpuPoolSpec) -> dict:
    return {
        "vmSize": pool.machine_type,
        "availabilityZones": sorted(pool.zones),
        "osDiskSizeGB": pool.disk_size_gb,
        "enableEncryptionAtHost": pool.encryption_at_host,
        "spot": pool.spot,
    }


def cpu_pool_name(pool: CpuPoolSpec) -> str:
    """cpu + 8 hex digits of the immutable settings: 11 characters, inside AKS's 12 (naming.POOL_NAME_RE)."""
    return naming.hashed_pool_name(PREFIX, immutable_settings(pool))


def cpu_pool_args(spec: PlatformSpec, pool: CpuPoolSpec) -> dict:
    """Everything but the count and the cluster it joins, as plain data."""
    settings = immutable_settings(pool)
    args = {
        "agent_pool_name": cpu_pool_name(pool),
        "mode": "User",
        "vm_size": settings["vmSize"],
        "os_type": "Linux",
        "os_sku": "Ubuntu",
        "type": "VirtualMachineScaleSets",
        "enable_auto_scaling": True,
        "min_count": pool.min_nodes,
        "max_count": pool.max_nodes,
        "availability_zones": settings["availabilityZones"],
        "enable_node_public_ip": False,
        "enable_encryption_at_host": settings["enableEncryptionAtHost"],
        "os_disk_size_gb": settings["osDiskSizeGB"],
        "node_labels": dict(pool.labels),
        "node_taints": [naming.taint(CPU_TAINT), *([naming.taint(AKS_SPOT_TAINT)] if pool.spot else [])],
        "orchestrator_version": spec.kubernetes_version,
        "tags": naming.tags(spec.stack, **{naming.TAG_POOL_NAME: CPU_POOL_NAME}),
    }
    if pool.spot:
        # https://learn.microsoft.com/azure/aks/spot-node-pool (as the GPU pools: pools.py pool_args)
        args.update(scale_set_priority="Spot", scale_set_eviction_policy="Delete", spot_max_price=-1)
    return args


def create_cpu_pool(
    name: str,
    spec: PlatformSpec,
    cluster: containerservice.ManagedCluster,
    resource_group_name: pulumi.Input[str],
    subnet_id: pulumi.Input[str],
    parent: pulumi.Resource,
    after: pulumi.Resource,
) -> containerservice.AgentPool | None:
    """The pool, or None when the stack has no cpuPool. AFTER: AKS runs one agent pool operation at a time."""
    if spec.cpu_pool is None:
        return None
    args = cpu_pool_args(spec, spec.cpu_pool)
    return containerservice.AgentPool(
        f"{name}-cpu",
        resource_group_name=resource_group_name,
        resource_name_=cluster.name,
        vnet_subnet_id=subnet_id,
        count=node_count(resource_group_name, cluster.name, args["agent_pool_name"], args["min_count"],
                         args["max_count"], after=after),
        **args,
        opts=pulumi.ResourceOptions(
            parent=parent,
            depends_on=[cluster, after],
            custom_timeouts=pulumi.CustomTimeouts(create="30m", update="30m", delete="30m"),
        ),
    )


def is_hashed_name(name: str | None) -> bool:
    """Whether an agent pool name is one cpu_pool_name makes (torchfleet/preview/plans.py asks)."""
    return naming.is_hashed_pool_name(PREFIX, name)
