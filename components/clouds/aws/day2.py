"""AWS day-2 refusals (components/clouds/day2.py): config changes EKS refuses, seen offline from two configs.

The program refuses the same at preview from the running cluster (live.py); these rules let
`torchfleet plan` say so before anyone runs it. Pure functions of the two specs.
"""

from __future__ import annotations

from components.clouds.aws import live
from components.clouds.day2 import ConfigChange, Refusal


def minor_step(change: ConfigChange) -> list[Refusal]:
    """EKS upgrades the control plane one minor at a time and never downgrades
    (https://docs.aws.amazon.com/eks/latest/userguide/update-cluster.html)."""
    running = live.LiveCluster(change.old.kubernetes_version, (), False)
    why = live.version_problem(running, change.new.kubernetes_version)
    if why is None:
        return []
    have = int(change.old.kubernetes_version.split(".")[1])
    return [Refusal("torchfleet:kubernetesVersion", why,
                    f"one `pulumi up` per minor: \"1.{have + 1}\" first (control plane, then node groups, then "
                    "add-ons), then the next")]


def control_plane_zone_removed(change: ConfigChange) -> list[Refusal]:
    """The control plane's subnets stay in the zones it was created in ("All subnets that you add must be
    in the same set of AZs as originally provided": https://docs.aws.amazon.com/eks/latest/userguide/network-reqs.html).
    Offline the cluster's zones are network.clusterZones when the stack says them, else every zone of the
    old config (the first `up` took them all)."""
    old_cluster = change.old.network.cluster_zones or change.old.zones
    gone = [z for z in old_cluster if z not in change.new.zones]
    out = []
    if gone:
        out.append(Refusal(
            "torchfleet:zones",
            f"the control plane may use subnets in {', '.join(gone)} (EKS cannot move it to other zones; the "
            "subnet delete would fail while its network interfaces are there)",
            f"keep {', '.join(gone)} in torchfleet:zones and drop only its GPU pools (gpuPools[].zones); if the "
            "cluster was created in other zones, say them in network.clusterZones (`aws eks describe-cluster "
            "--query cluster.resourcesVpcConfig.subnetIds`)",
        ))
    new_cluster = change.new.network.cluster_zones
    if change.old.network.cluster_zones and new_cluster and set(new_cluster) != set(change.old.network.cluster_zones):
        out.append(Refusal(
            "torchfleet:network.clusterZones",
            "fixed when the cluster was created: EKS accepts no other set of zones for its subnets",
            f"keep {list(change.old.network.cluster_zones)}; a cluster in other zones is a new stack",
        ))
    return out


RULES = [minor_step, control_plane_zone_removed]
