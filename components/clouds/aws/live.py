"""What the running cluster is, read at deploy time (preview included) by the program itself.

Some changes depend on the cluster as it is, which the stack config cannot say:
- EKS upgrades the control plane one minor at a time and refuses an upgrade while a node group is
  behind ("Nodegroups ... must be updated to match cluster version"), and never downgrades
  (https://docs.aws.amazon.com/eks/latest/userguide/update-cluster.html);
- the control plane's zones are fixed at creation ("All subnets that you add must be in the same
  set of AZs as originally provided when you created the cluster":
  https://docs.aws.amazon.com/eks/latest/userguide/network-reqs.html);
- a node group's desired size belongs to the cluster autoscaler, but UpdateNodegroupConfig sends
  min, max and desired together (terraform-provider-aws internal/service/eks/node_group.go,
  expandNodegroupScalingConfig), and EKS refuses a minimum above the desired size: the live size is
  sent only with a change of min or max (keeps_recorded_size).
Each is read with the provider's own data sources (DescribeCluster, ListNodegroups,
DescribeNodegroup, DescribeSubnets); a stack whose cluster does not exist yet reads nothing.
The pure functions below decide from what was read, and are tested without AWS.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# EKS appends 26 characters to a node group name prefix (nodegroups.py NAME_PREFIX_SUFFIX).
_SUFFIX = 26


@dataclass(frozen=True)
class LiveNodeGroup:
    name: str
    version: str
    min_size: int
    max_size: int
    desired_size: int


@dataclass(frozen=True)
class LiveCluster:
    version: str
    zones: tuple[str, ...]
    # Created with bootstrapClusterCreatorAdminPermissions true (before issue 29): EKS made the
    # creator's admin entry itself.
    bootstrap_creator_admin: bool
    node_groups: tuple[LiveNodeGroup, ...] = field(default=())


def _minor(version: str) -> int:
    return int(version.split(".")[1])


def version_problem(live: LiveCluster | None, wanted: str) -> str | None:
    """Why EKS would refuse taking the cluster to `wanted`, or None."""
    if live is None or live.version == wanted:
        return None
    have, want = _minor(live.version), _minor(wanted)
    if want < have:
        return (f"the cluster runs {live.version} and EKS cannot downgrade a cluster; keep {live.version} "
                "(or destroy and create the stack again)")
    behind = sorted(g.name for g in live.node_groups if g.version != live.version)
    if behind:
        return (f"node groups {', '.join(behind)} still run an older minor than the control plane "
                f"({live.version}), and EKS refuses the next upgrade until they match: run `pulumi up` with "
                f"{live.version} first (the node groups follow it), then {wanted}")
    if want > have + 1:
        return (f"the cluster runs {live.version} and EKS upgrades one minor at a time: set "
                f"\"1.{have + 1}\", run `pulumi up`, then the next minor, up to {wanted}")
    return None


def zone_problem(live: LiveCluster | None, zones: tuple[str, ...], cluster_zones: tuple[str, ...]) -> str | None:
    """Why the zones would move the control plane, or None. `cluster_zones`: network.clusterZones as given."""
    if live is None:
        return None
    missing = [z for z in live.zones if z not in zones]
    if missing:
        return (f"the control plane uses subnets in {', '.join(missing)} since it was created, and EKS cannot move "
                f"it to other zones: keep {', '.join(missing)} in torchfleet:zones (GPU pools may leave it)")
    if cluster_zones and set(cluster_zones) != set(live.zones):
        return (f"network.clusterZones is {list(cluster_zones)} but the cluster was created in {list(live.zones)}, "
                f"which EKS cannot change: set it to {list(live.zones)} or remove the key")
    return None


def cluster_zones(live: LiveCluster | None, zones: tuple[str, ...], configured: tuple[str, ...]) -> tuple[str, ...]:
    """The zones whose subnets the control plane gets: the configured ones, else the live cluster's, else all."""
    if configured:
        return configured
    if live is not None:
        return tuple(z for z in zones if z in live.zones)
    return zones


def desired_size(live: LiveCluster | None, pool_name: str, min_size: int, max_size: int) -> int:
    """The desired size to send with min and max: the group's current size, kept within [min, max].

    The autoscaler moves the desired size, so the program never resets it to a stale number
    (a busy group keeps its nodes), and a raised minimum is never below it (EKS refuses that).
    A group being replaced (its name prefix is the pool's) hands its size to the new one."""
    current = [g.desired_size for g in (live.node_groups if live else ())
               if g.name.startswith(f"{pool_name}-") and len(g.name) == len(pool_name) + 1 + _SUFFIX]
    return max(min_size, min(max_size, max(current))) if current else min_size


def keeps_recorded_size(live: LiveCluster | None, pool_name: str, min_size: int, max_size: int) -> bool:
    """Whether the group's desired size should stay what the provider's state recorded (ignoreChanges on
    scalingConfig.desiredSize), not the live size read now.

    The provider sends min, max and desired together whenever any of them differs from its state, and runs
    UpdateNodegroupVersion before UpdateNodegroupConfig (terraform-provider-aws internal/service/eks/
    node_group.go@012e0a32 resourceNodeGroupUpdate, expandNodegroupScalingConfig): a live size read when
    `up` starts and sent as a change would reach EKS after a long rolling upgrade, undoing what the
    autoscaler did meanwhile, and every preview would show it as a change. So the live size is sent only
    when it must be: min or max changes, or the size falls outside the range; otherwise nothing of the
    scaling differs from the state, and the provider sends none of it."""
    current = [g for g in (live.node_groups if live else ())
               if g.name.startswith(f"{pool_name}-") and len(g.name) == len(pool_name) + 1 + _SUFFIX]
    if len(current) != 1:
        return False  # a new group, or one being replaced: its size is sent
    g = current[0]
    return (g.min_size, g.max_size) == (min_size, max_size) and min_size <= g.desired_size <= max_size


def read(cluster_name: str) -> LiveCluster | None:
    """The live cluster of this stack, or None when it does not exist (the first `up`)."""
    import pulumi_aws as aws  # here, not at the top: the pure functions above are imported without pulumi

    if cluster_name not in aws.eks.get_clusters().names:
        return None
    cluster = aws.eks.get_cluster(name=cluster_name)
    zones = sorted({aws.ec2.get_subnet(id=s).availability_zone for s in cluster.vpc_config.subnet_ids})
    access = cluster.access_configs[0] if cluster.access_configs else None
    groups = []
    for name in aws.eks.get_node_groups(cluster_name=cluster_name).names:
        g = aws.eks.get_node_group(cluster_name=cluster_name, node_group_name=name)
        scaling = g.scaling_configs[0]
        groups.append(LiveNodeGroup(name, g.version, scaling.min_size, scaling.max_size, scaling.desired_size))
    return LiveCluster(
        version=cluster.version,
        zones=tuple(zones),
        bootstrap_creator_admin=bool(access and access.bootstrap_cluster_creator_admin_permissions),
        node_groups=tuple(groups),
    )
