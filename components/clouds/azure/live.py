"""What the running AKS cluster is, read at preview and `up` by the program itself (issue 29).

With spot pools AKS refuses to upgrade the control plane and node pools at the same time ("You can't upgrade
the control plane and node pools at the same time. You must upgrade them separately or remove the Spot node
pool": aks-docs spot-node-pool.md), and the ManagedCluster PUT always carries both: the control plane's
kubernetesVersion and the inline system pool's orchestratorVersion (cluster.py system_profile), so a minor
upgrade moves a pool whenever it moves the control plane. `torchfleet plan` refuses the change from two
configs (day2.py minor_with_spot_pools); this is the same rule in `pulumi preview` and `pulumi up`, from the
cluster as it runs, before anything is registered (as aws/live.py does for EKS). Because it reads the
running control plane, it lets step 3 of the documented sequence through once steps 1 and 2 are done, which
the offline plan cannot see.

How the cluster is found: the ManagedCluster and its resource group are auto-named (Pulumi adds a random
suffix kept in the state), so the program reads its own stack's last outputs, `clusterName` and
`resourceGroup` (the engine's builtin invoke pulumi:pulumi:readStackOutputs, the one StackReference uses:
pulumi/pulumi pkg/resource/deploy/builtins.go at v3.274.0, readStackReference), then the cluster with
azure-native's getManagedCluster (API 2025-09-01; Reader allows it): currentKubernetesVersion is what the
control plane runs, agentPoolProfiles lists every pool of the cluster with its scaleSetPriority. A stack
with no outputs yet (the first `up`), a cluster that is gone (404), or a read that fails for any other
reason (no backend, no Azure credentials) reads nothing: nothing is refused, and the last says so in a
warning. The decision below is a pure function, tested without Azure.
"""

from __future__ import annotations

from dataclasses import dataclass

from components.clouds.azure.day2 import spot_upgrade

SPOT = "Spot"  # scaleSetPriority of a spot pool


@dataclass(frozen=True)
class LiveCluster:
    resource_group: str
    name: str
    version: str  # currentKubernetesVersion: what the control plane runs ("1.34.5")
    spot_pools: tuple[str, ...]  # the AKS names of its pools with scaleSetPriority Spot


def _minor(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def spot_upgrade_problem(live: LiveCluster | None, wanted: str) -> str | None:
    """Why AKS would refuse this run's ManagedCluster PUT (the control plane's minor moves while spot pools
    exist, and the system pool's with it), with the three steps instead; None when nothing is refused."""
    if live is None or not live.spot_pools or _minor(wanted) <= _minor(live.version):
        return None
    why, instead = spot_upgrade(live.version, wanted, sorted(live.spot_pools), live.resource_group, live.name)
    return (f"the control plane runs {live.version}; {why}. Instead: {instead}. Once the control plane runs "
            f"{wanted}, `pulumi up` goes ahead (docs/day-2-azure.md)")


def stack_name() -> str:
    import pulumi

    return f"{pulumi.get_organization()}/{pulumi.get_project()}/{pulumi.get_stack()}"


def _plain(value: object) -> object:
    """A value the engine may hand back wrapped as a secret ({..., "value": v})."""
    return value.get("value") if isinstance(value, dict) else value


def recorded_names() -> tuple[str, str] | None:
    """(resource group, cluster) from this stack's last outputs, or None before the first `up`."""
    import pulumi

    result = pulumi.runtime.invoke("pulumi:pulumi:readStackOutputs", {"name": stack_name()})
    outputs = (result.value or {}).get("outputs") or {}
    group, cluster = _plain(outputs.get("resourceGroup")), _plain(outputs.get("clusterName"))
    if isinstance(group, str) and isinstance(cluster, str) and group and cluster:
        return group, cluster
    return None


def read(config_spot: tuple[str, ...] = ()) -> LiveCluster | None:
    """The running cluster of this stack, or None (not created yet, gone, or not readable: see above).
    `config_spot`: the config's spot pools, used only when the cluster's answer lists no pools at all."""
    import pulumi
    from pulumi_azure_native import containerservice

    from components.clouds.azure.live_count import not_found

    try:
        names = recorded_names()
        if names is None:
            return None
        group, cluster = names
        found = containerservice.get_managed_cluster(resource_group_name=group, resource_name=cluster)
    except Exception as error:  # an invoke failure arrives as a plain Exception
        if not_found(error):
            return None
        pulumi.log.warn(
            "torchfleet: could not read the running AKS cluster, so a Kubernetes minor upgrade with spot pools "
            f"is not checked before the cluster's update (AKS refuses it then; docs/day-2-azure.md): {error}"
        )
        return None
    profiles = found.agent_pool_profiles
    spot = (tuple(sorted(p.name for p in profiles if p.scale_set_priority == SPOT)) if profiles is not None
            else tuple(config_spot))
    return LiveCluster(group, cluster, found.current_kubernetes_version, spot)
