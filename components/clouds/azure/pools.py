"""GPU agent pools (one per GPU, zone and machine type) and the autoscaler's priority ConfigMap."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s
import yaml
from pulumi_azure_native import containerservice

from components.clouds.azure import naming
from components.clouds.azure.live_count import node_count
from components.spec import AKS_SPOT_TAINT, GPU_TAINT, GpuPoolSpec, PlatformSpec

# Priority expander: higher wins; a group that matches no regex is never chosen, hence ".*".
# https://github.com/kubernetes/autoscaler/blob/master/cluster-autoscaler/expander/priority/readme.md
SPOT_PRIORITY = 50
ON_DEMAND_PRIORITY = 10
FALLBACK_PRIORITY = 1
PRIORITY_CONFIGMAP = "cluster-autoscaler-priority-expander"


def pool_taints(pool: GpuPoolSpec) -> list[str]:
    taints = [naming.taint(GPU_TAINT)]
    if pool.spot:
        # AKS adds this taint to every spot pool itself; declaring it avoids a perpetual diff.
        # https://learn.microsoft.com/azure/aks/spot-node-pool#before-you-begin
        taints.append(naming.taint(AKS_SPOT_TAINT))
    return taints


def pool_args(pool: GpuPoolSpec, machine_index: int, spec: PlatformSpec) -> dict:
    """One AKS agent pool as plain data: one VM size, one zone, autoscaled from minNodes (0)."""
    machine = pool.machines[machine_index]
    args = {
        "agent_pool_name": naming.agent_pool_name(pool, machine_index),
        "mode": "User",
        "vm_size": machine.type,
        "os_type": "Linux",
        "os_sku": "Ubuntu",
        "type": "VirtualMachineScaleSets",
        "availability_zones": [pool.zone],
        "enable_auto_scaling": True,
        "min_count": pool.min_nodes,
        "max_count": pool.max_nodes,
        "enable_node_public_ip": False,
        # Encryption at host: temp disks, ephemeral OS disks (where the kubelet keeps emptyDirs and
        # container layers) and the disk caches are encrypted at rest on the VM host, not only
        # the managed disks. Needs the subscription feature Microsoft.Compute/EncryptionAtHost
        # registered (`torchfleet check` prints the command) and a size that supports it (spec/pools.py
        # refuses one the catalog records without it; gpuPools[].encryptionAtHost: false turns it off);
        # set when a pool is created. https://learn.microsoft.com/azure/aks/enable-host-encryption
        "enable_encryption_at_host": pool.encryption_at_host,
        "os_disk_size_gb": pool.disk_size_gb,
        "orchestrator_version": spec.kubernetes_version,
        # Exactly the contract labels, identical across zones (see naming.py on balancing).
        "node_labels": dict(pool.labels),
        "node_taints": pool_taints(pool),
        # AKS installs the NVIDIA driver only; the device plugin is ours (device_plugin.py).
        # https://learn.microsoft.com/azure/aks/use-nvidia-gpu
        "gpu_profile": {"driver": "Install"},
        "tags": naming.tags(spec.stack, **{naming.TAG_POOL_NAME: pool.name}),
    }
    if pool.spot:
        # All three are immutable: changing `spot` replaces the pool.
        # https://learn.microsoft.com/azure/aks/spot-node-pool
        args.update(scale_set_priority="Spot", scale_set_eviction_policy="Delete", spot_max_price=-1)
    else:
        # Upgrade in place, one node at a time: the default 10% surge adds a GPU VM (an A100 needs
        # its quota to be free), and jobs already survive losing a node (Azure review 13). Spot
        # pools get no surge nodes anyway (AKS spot-node-pool "Upgrade a Spot node pool").
        args["upgrade_settings"] = {"max_surge": "0", "max_unavailable": "1"}
    return args


def pool_options(parent: pulumi.Resource, depends_on: list[pulumi.Resource]) -> pulumi.ResourceOptions:
    return pulumi.ResourceOptions(
        parent=parent,
        depends_on=depends_on,
        # No ignore_changes on count: the count sent is the live one within the new bounds, read just before
        # this pool's own PUT (live_count.py), so raising minNodes works and the autoscaler's count is not
        # reverted.
        # The pool name is fixed (agent_pool_name), so a replacement must delete the old pool
        # first, or the create fails on the name.
        delete_before_replace=True,
        # Set when the VMs are made, refused in place by AKS: encryption at host (aks-docs
        # enable-host-encryption.md) and the OS disk size (resize-node-pool.md: a new pool, then cordon,
        # drain, delete); zones are fixed per pool by its name anyway (reliability-availability-zones-
        # configure.md). A GPU pool scales from zero, so a new pool is cheap and leaves no update half-applied.
        replace_on_changes=["enableEncryptionAtHost", "osDiskSizeGB", "availabilityZones"],
        custom_timeouts=pulumi.CustomTimeouts(create="30m", update="30m", delete="30m"),
    )


def agent_pools(spec: PlatformSpec) -> list[tuple[GpuPoolSpec, int]]:
    """(pool, machine index) for every AKS agent pool the stack needs, in a stable order: by pool name, so a
    reordered `machineTypes` neither renames a pool (naming.agent_pool_name hashes the VM size) nor moves it
    in the one-at-a-time chain of pool operations (AksGpuPools)."""
    out = sorted(((p, i) for p in spec.gpu_pools for i in range(len(p.machines))),
                 key=lambda pi: (spec.gpu_pools.index(pi[0]), naming.agent_pool_name(*pi)))
    names = [naming.agent_pool_name(p, i) for p, i in out]
    if len(set(names)) != len(names):  # a 4-hex-digit hash clash: never with today's catalog (test_azure_naming)
        raise ValueError(f"two AKS agent pools of the stack would share a name: {sorted(names)}")
    return out


def expander_priorities(spec: PlatformSpec) -> str:
    """The priority expander's `priorities` value: spot pools first, then on-demand ones.

    AKS names each pool's scale set `aks-<pool>-<digits>-vmss`, and that is the node group name
    the expander matches. Unanchored, so a resource-id form of the name matches too; the dashes
    around the pool name keep t4z1 from matching t4z17634.
    """
    tiers: dict[int, list[str]] = {}
    for pool, i in agent_pools(spec):
        prio = SPOT_PRIORITY if pool.spot else ON_DEMAND_PRIORITY
        tiers.setdefault(prio, []).append(f".*aks-{naming.agent_pool_name(pool, i)}-.*")
    # Sorted: the order of torchfleet:zones means nothing, and a reordered list must not recreate the
    # ConfigMap (issue 29, docs/day-2-azure.md "zones reordered").
    tiers = {prio: sorted(patterns) for prio, patterns in tiers.items()}
    tiers[FALLBACK_PRIORITY] = [".*"]
    return yaml.safe_dump(dict(sorted(tiers.items(), reverse=True)), sort_keys=False)


class AksGpuPools(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        spec: PlatformSpec,
        cluster: containerservice.ManagedCluster,
        resource_group_name: pulumi.Input[str],
        subnet_id: pulumi.Input[str],
        provider: k8s.Provider,
        opts: pulumi.ResourceOptions | None = None,
        after: pulumi.Resource | None = None,
    ):
        super().__init__("torchfleet:clouds:AksGpuPools", name, None, opts)
        self.pools: list[containerservice.AgentPool] = []
        previous: pulumi.Resource = after or cluster
        for pool, i in agent_pools(spec):
            short = naming.agent_pool_name(pool, i)
            args = pool_args(pool, i, spec)
            # One at a time: AKS refuses a pool operation while another runs on the same cluster
            # ("OperationNotAllowed: Another agentpool operation ... is in progress").
            # https://learn.microsoft.com/troubleshoot/azure/azure-kubernetes/create-upgrade-delete/error-code-operationnotallowed
            previous = containerservice.AgentPool(
                f"{name}-{short}",
                resource_group_name=resource_group_name,
                resource_name_=cluster.name,
                vnet_subnet_id=subnet_id,
                count=node_count(resource_group_name, cluster.name, short, args["min_count"], args["max_count"],
                                 after=previous),
                **args,
                opts=pool_options(self, depends_on=[cluster, previous]),
            )
            self.pools.append(previous)
        # AKS's managed autoscaler reads the priority ConfigMap from kube-system.
        # https://learn.microsoft.com/azure/aks/cluster-autoscaler#use-the-cluster-autoscaler-profile
        self.priorities = k8s.core.v1.ConfigMap(
            f"{name}-priority-expander",
            metadata={"name": PRIORITY_CONFIGMAP, "namespace": "kube-system"},
            data={"priorities": expander_priorities(spec)},
            opts=pulumi.ResourceOptions(parent=self, provider=provider),
        )
        self.register_outputs({"agentPools": [p.name for p in self.pools]})
