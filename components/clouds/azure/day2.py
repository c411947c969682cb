"""Azure day-2 refusals (components/clouds/day2.py): config changes AKS or ARM refuses, seen from two configs.

Everything else on docs/day-2-azure.md works in one `pulumi up`; these are the changes it cannot make.
Pure functions of the two specs.
"""

from __future__ import annotations

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


RULES = [minor_step, network_moved]
