"""AWS day-2 refusals (components/clouds/day2.py): config changes EKS refuses, seen offline from two configs.

The program refuses the same at preview from the running cluster (live.py); these rules let
`torchfleet plan` say so before anyone runs it. Pure functions of the two specs.
"""

from __future__ import annotations

from typing import Any

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

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
DESIRED, MIN, MAX = "scalingConfig.desiredSize", "scalingConfig.minSize", "scalingConfig.maxSize"


def max_below_running_size(changes: list[Any], old_inputs: dict[str, dict[str, Any]]) -> list[Refusal]:
    """A node group whose new maxSize is below the nodes it runs: EKS terminates the extra ones. A zone added
    re-splits managerPool's totals (nodegroups.py manager_zone_sizes): with maxNodes 3 over two zones,
    manager-us-west-2a goes from maxSize 2 to 1, a running manager node is terminated, and an etcd member on
    it restarts elsewhere while its EBS volume stays in its zone (Pending until a node runs there).
    The program sends the live size clamped to the new max (live.py desired_size), so a desired size that
    changes with maxSize while minSize does not is the new max cutting below the running size; the running
    size is the one the plan read (the old program's, offline)."""
    out = []
    for c in changes:
        if c.type != NODE_GROUP or c.action != "update":
            continue
        effective = set(c.paths) - set(c.ignored)
        if not {DESIRED, MAX} <= effective or MIN in effective:
            continue
        before = old_inputs.get(c.key, {})
        group = str(before.get("nodeGroupNamePrefix", c.name)).rstrip("-")
        running = int((before.get("scalingConfig") or {}).get("desiredSize", 0))
        etcd = (" it is a manager group: an etcd member on the terminated node restarts elsewhere and its EBS "
                "volume stays in this zone, so the member stays Pending until a manager node runs here again;"
                if group.startswith("manager-") else "")
        out.append(Refusal(
            f"{NODE_GROUP}::{c.name}",
            f"{group}'s maxSize drops below the {running} node(s) it ran when the plan read it, and EKS terminates "
            f"the extra ones;{etcd} the managerPool totals are split over the zones in letter order, so adding a "
            "zone lowers the first zones' share",
            "raise managerPool.maxNodes (and minNodes) with the new zone so no zone's share drops below its "
            "running nodes (one more node per zone added), or apply between jobs"))
    return out


CAUTIONS = [max_below_running_size]
