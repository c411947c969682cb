"""Azure: AKS with spot GPU pools per zone, the built-in autoscaler, and Azure Files NFS.

    network.py        resource group, virtual network, node and private-endpoint subnets
    cluster.py        the AKS cluster, its fixed system pool, identity, admins, kubeconfig, provider
    manager_pool.py   the manager pool, an AgentPool named by its immutable settings
    live_count.py     the node count a pool update sends (the live one within minNodes..maxNodes)
    live.py           the running cluster's version and spot pools, read at preview and `up`
    audit.py          the control plane's audit logs to a Log Analytics workspace
    pools.py          one GPU agent pool per GPU, zone and machine type; the priority ConfigMap
    device_plugin.py  the NVIDIA device plugin chart (AKS installs the driver only)
    files.py          the Premium FileStorage account, its NFS share and private endpoint
    naming.py         pool names, account names and address ranges (pure functions)

Azure zones are "1", "2", "3"; AKS labels nodes `topology.kubernetes.io/zone=<region>-<zone>`
(e.g. eastus-1), which the `topologyZones` output lists.
"""

from __future__ import annotations

import pulumi
from pulumi_azure_native import authorization

from components.clouds.azure import live, naming
from components.clouds.azure.audit import create_audit_logs
from components.clouds.azure.cluster import MANAGER_SELECTOR, AksCluster
from components.clouds.azure.cpu_pool import create_cpu_pool
from components.clouds.azure.datasets import BlobDatasets
from components.clouds.azure.device_plugin import create_device_plugin
from components.clouds.azure.files import AzureFilesStore
from components.clouds.azure.manager_pool import create_manager_pool
from components.clouds.azure.network import AzureNetwork
from components.clouds.azure.pools import AksGpuPools, agent_pools
from components.clouds.base import ClusterHandle
from components.spec import ConfigError, PlatformSpec


def topology_zones(spec: PlatformSpec) -> list[str]:
    """The zone label values AKS gives nodes of the stack's zones."""
    return [f"{spec.region}-{z}" for z in spec.zones]


def agent_pool_map(spec: PlatformSpec) -> dict[str, list[str]]:
    """Contract pool name (gpu-<gpu>-<zone>) -> the AKS agent pools that implement it."""
    out: dict[str, list[str]] = {}
    for pool, i in agent_pools(spec):
        out.setdefault(pool.name, []).append(naming.agent_pool_name(pool, i))
    return out


class AzureCluster(pulumi.ComponentResource):
    def __init__(self, name: str, spec: PlatformSpec, opts: pulumi.ResourceOptions | None = None):
        super().__init__("torchfleet:clouds:AzureCluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        # The running cluster, if any (live.py): a minor upgrade AKS would refuse is refused here, in the preview
        # and before `up` changes anything.
        running = live.read(tuple(naming.agent_pool_name(p, i) for p, i in agent_pools(spec) if p.spot))
        why = live.spot_upgrade_problem(running, spec.kubernetes_version)
        if why:
            raise ConfigError([f"torchfleet:kubernetesVersion: {why}"])
        # Who runs `pulumi up`: tenant for Entra ID, subscription for role ids, object id for RBAC.
        client = authorization.get_client_config_output(opts=pulumi.InvokeOutputOptions(parent=self))
        net = AzureNetwork(f"{name}-net", spec, child)
        aks = AksCluster(f"{name}-cluster", spec, net, client, child)
        create_audit_logs(f"{name}-cluster", spec, net.resource_group.name, aks.cluster.id, self)
        # AKS runs one agent pool operation at a time: the manager pool first, the CPU pool, then the GPU pools.
        manager = create_manager_pool(
            f"{name}-pools", spec, aks.cluster, net.resource_group.name, net.node_subnet.id, self
        )
        cpu = create_cpu_pool(
            f"{name}-pools", spec, aks.cluster, net.resource_group.name, net.node_subnet.id, self, after=manager
        )
        pools = AksGpuPools(
            f"{name}-gpu", spec, aks.cluster, net.resource_group.name, net.node_subnet.id, aks.provider, child,
            after=cpu or manager,
        )
        plugin = create_device_plugin(name, self, aks.provider, depends_on=[aks.cluster])
        store = AzureFilesStore(f"{name}-files", spec, net, client, child)
        issuer = aks.cluster.oidc_issuer_profile.apply(lambda p: p.issuer_url if p else None)
        datasets = (
            BlobDatasets(f"{name}-datasets", spec, net.resource_group.name, issuer, client, child)
            if spec.datasets else None
        )
        self.handle = ClusterHandle(
            name=aks.cluster.name,
            kubeconfig=aks.kubeconfig,
            provider=aks.provider,
            zones=spec.zones,
            gpu_pools=spec.gpu_pools,
            store=store.shared_store(spec, net.endpoint_cidr),
            manager_selector=dict(MANAGER_SELECTOR),
            # The share must be reachable (endpoint + DNS) before a pod mounts it, and the pools
            # and device plugin must exist before jobs ask for GPUs.
            ready=[
                aks.cluster, aks.rbac_effective, manager, *([cpu] if cpu else []), *pools.pools, plugin,
                store.share, store.endpoint, store.dns_link, store.dns_records,
            ],
            outputs={
                "region": spec.region,
                "resourceGroup": net.resource_group.name,
                "storageAccount": store.account.name,
                "shareName": store.share.name,
                "storageResourceGroup": store.resource_group.name,
                "oidcIssuerUrl": issuer,
                "topologyZones": topology_zones(spec),
                "agentPools": agent_pool_map(spec),
            },
            datasets=datasets.access if datasets else None,
        )
        self.register_outputs({"clusterName": self.handle.name, **self.handle.outputs})
