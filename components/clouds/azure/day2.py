"""Azure day-2 refusals (components/clouds/day2.py): config changes AKS or ARM refuses, seen from two configs.

Everything else on docs/day-2-azure.md works in one `pulumi up`; these are the changes it cannot make.
Pure functions of the two specs.
"""

from __future__ import annotations

from typing import Any

from components.clouds.day2 import ConfigChange, Refusal


def _minor(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def minor_step(change: ConfigChange) -> list[Refusal]:
    """"When you upgrade a supported AKS cluster, Kubernetes minor versions can't be skipped" and AKS never
    downgrades (aks-docs upgrade-aks-cluster.md, supported-kubernetes-versions.md)."""
    old, new = _minor(change.old.kubernetes_version), _minor(change.new.kubernetes_version)
    if new == old or (new[0] == old[0] and new[1] == old[1] + 1):
        return []
    if new < old:
        why = f"{change.old.kubernetes_version} -> {change.new.kubernetes_version} is a downgrade, which AKS refuses"
        instead = f"keep \"{change.old.kubernetes_version}\"; an older minor is a new cluster (a new stack)"
    else:
        why = (f"{change.old.kubernetes_version} -> {change.new.kubernetes_version} skips a minor: AKS upgrades "
               "one minor at a time")
        instead = (f"one `pulumi up` per minor: \"{old[0]}.{old[1] + 1}\" first (the control plane and the system "
                   "pool, then the manager and GPU pools in their own updates), then the next")
    return [Refusal("torchfleet:kubernetesVersion", why, instead)]


def network_moved(change: ConfigChange) -> list[Refusal]:
    """The node, endpoint and API server subnets are cut from network.cidr (azure/naming.py); Azure refuses
    changing the address prefix of a subnet that holds resources ("InUseSubnetCannotBeUpdated"), and every one
    of them does (the nodes, the store's private endpoint, the API server's load balancer)."""
    if change.old.network.cidr == change.new.network.cidr:
        return []
    return [Refusal("torchfleet:network.cidr",
                    f"{change.old.network.cidr} -> {change.new.network.cidr} re-cuts the node, store-endpoint and API "
                    "server subnets, which Azure does not change while they hold the nodes, the endpoint and the "
                    "API server's load balancer",
                    "keep the range; another range is a new stack (destroy with the store kept, then `pulumi up` "
                    "with the new range and storage.adopt: true)")]


def minor_with_spot_pools(change: ConfigChange) -> list[Refusal]:
    """One minor up while spot pools exist. The ManagedCluster PUT carries the control plane's kubernetesVersion
    and the inline system pool's orchestratorVersion together (cluster.py system_profile), and with spot pools
    AKS says: "You can't upgrade the control plane and node pools at the same time. You must upgrade them
    separately or remove the Spot node pool to upgrade the control plane and remaining node pools at the same
    time" (aks-docs spot-node-pool.md). The program cannot send them apart: `ignoreChanges` on the inline pool's
    orchestratorVersion would make every later ManagedCluster PUT resend the version recorded at creation, a
    downgrade once the pool is upgraded outside Pulumi, and an AgentPool resource for the inline pool's name
    is a second owner of one pool (a change to an inline entry puts every pool into Scaling:
    pulumi/pulumi-azure-native#4264; a pool unknown to the cluster's PUT is refused: #2719). So the control
    plane and the system pool are upgraded with `az` first, each on its own, and the `up` then sends the
    versions they already run (nothing to upgrade in the ManagedCluster PUT) and upgrades the manager and GPU
    pools one at a time in their own AgentPool PUTs."""
    old, new = _minor(change.old.kubernetes_version), _minor(change.new.kubernetes_version)
    spot = sorted({p.name for p in change.old.gpu_pools if p.spot})
    if not spot or not (new[0] == old[0] and new[1] == old[1] + 1):
        return []
    why, instead = spot_upgrade(change.old.kubernetes_version, change.new.kubernetes_version, spot)
    instead += (". This plan keeps refusing the change after steps 1 and 2: it compares configs, not the running "
                "cluster; `pulumi up` reads the cluster (live.py) and goes ahead once the control plane runs "
                f"{change.new.kubernetes_version} (docs/day-2-azure.md)")
    return [Refusal("torchfleet:kubernetesVersion", why, instead)]


def spot_upgrade(have: str, want: str, spot: list[str], resource_group: str = "<resource group>",
                 cluster: str = "<cluster>") -> tuple[str, str]:
    """Why a minor upgrade with spot pools is refused, and the three steps instead (the plan's rule above and
    the program's check of the running cluster, live.py, say the same)."""
    why = (f"{have} -> {want} with spot pools ({', '.join(spot)}): one `pulumi up` would send the control plane's "
           "version and the system pool's in one ManagedCluster PUT, and AKS does not upgrade the control plane "
           "and node pools at the same time while spot pools exist (aks-docs spot-node-pool.md)")
    instead = (f"1) `az aks upgrade -g {resource_group} -n {cluster} --control-plane-only "
               f"--kubernetes-version {want}`; "
               f"2) `az aks nodepool upgrade -g {resource_group} --cluster-name {cluster} -n system "
               f"--kubernetes-version {want}`; "
               f"3) set torchfleet:kubernetesVersion \"{want}\" and run `pulumi up` (the cluster's PUT then changes "
               "nothing AKS runs; the manager and GPU pools follow one by one)")
    return why, instead


RULES = [minor_step, minor_with_spot_pools, network_moved]

AGENT_POOL = "azure-native:containerservice:AgentPool"


def pool_replaced_delete_first(changes: list[Any], old_inputs: dict[str, dict[str, Any]]) -> list[Refusal]:
    """A GPU pool replaced in place (same name: a force-new input such as vmSize, osDiskSizeGB or
    enableEncryptionAtHost changed) is deleted before its successor exists (pools.py delete_before_replace),
    and "When you delete a node pool, AKS doesn't perform cordon and drain" (aks-docs create-node-pools.md):
    its running nodes and every training pod on them go at once. The offline plan cannot see the running
    nodes; it names the count the program sent last (the live count when the plan's mocks hold one)."""
    out = []
    for c in changes:
        if c.type != AGENT_POOL or c.action != "replace" or c.order != "delete-first":
            continue
        before = old_inputs.get(c.key, {})
        pool, count = before.get("agentPoolName", c.name), before.get("count")
        # Numbers cross the engine as floats (protobuf Struct).
        running = (f"{int(count)} node(s) ran when the plan read it"
                   if isinstance(count, int | float) and not isinstance(count, bool) and count > 0
                   else "the plan cannot see its running nodes offline")
        out.append(Refusal(
            f"{AGENT_POOL}::{c.name}",
            f"agent pool {pool} is deleted before its replacement is created ({'; '.join(c.replaced_by)}), without "
            f"cordon or drain: {running}, and their training pods are killed, not evicted",
            f"check `az aks nodepool show -g <resource group> --cluster-name <cluster> -n {pool} --query count`; "
            "apply when it is 0 (`torchfleet list` shows no job on it), or add the new setting as another pool "
            "first (another machineTypes entry is a pool of its own) and remove the old one after"))
    return out


CAUTIONS = [pool_replaced_delete_first]
