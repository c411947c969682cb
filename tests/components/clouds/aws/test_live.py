"""live.py's decisions from what DescribeCluster/DescribeNodegroup answer (pure functions, no AWS)."""

from __future__ import annotations

from components.clouds.aws.live import (
    LiveCluster,
    LiveNodeGroup,
    cluster_zones,
    desired_size,
    version_problem,
    zone_problem,
)

SUFFIX = "2" * 26  # EKS's 26-character suffix on a name prefix


def cluster(version="1.35", zones=("us-west-2a", "us-west-2b"), groups=()):
    return LiveCluster(version, zones, False, tuple(groups))


def group(pool, desired, version="1.35", lo=0, hi=8):
    return LiveNodeGroup(f"{pool}-{SUFFIX}", version, lo, hi, desired)


def test_no_cluster_yet_refuses_nothing_and_starts_at_min():
    assert version_problem(None, "1.36") is None
    assert zone_problem(None, ("us-west-2a",), ()) is None
    assert desired_size(None, "gpu-t4-us-west-2a", 2, 8) == 2
    assert cluster_zones(None, ("us-west-2a", "us-west-2b"), ()) == ("us-west-2a", "us-west-2b")


def test_one_minor_up_passes_two_or_a_downgrade_do_not():
    assert version_problem(cluster("1.35"), "1.36") is None
    assert "one minor at a time" in version_problem(cluster("1.34"), "1.36")
    assert "cannot downgrade" in version_problem(cluster("1.35"), "1.34")


def test_an_upgrade_while_node_groups_lag_is_refused_first():
    """A cluster made before issue 29: its node groups never followed the last upgrade."""
    lagging = cluster("1.35", groups=[group("gpu-t4-us-west-2a", 0, version="1.34")])
    why = version_problem(lagging, "1.36")
    assert "gpu-t4-us-west-2a" in why and "run `pulumi up` with 1.35 first" in why
    assert version_problem(lagging, "1.35") is None  # the catch-up `up` itself is fine


def test_desired_size_follows_the_live_group_within_the_new_bounds():
    live = cluster(groups=[group("gpu-t4-us-west-2a", 5), group("gpu-t4-us-west-2b", 0)])
    assert desired_size(live, "gpu-t4-us-west-2a", 1, 8) == 5   # a busy group keeps its nodes
    assert desired_size(live, "gpu-t4-us-west-2b", 1, 8) == 1   # a raised minimum is never above it
    assert desired_size(live, "gpu-t4-us-west-2a", 0, 3) == 3   # a lowered maximum bounds it
    # another pool whose name starts the same is not this one
    assert desired_size(cluster(groups=[group("gpu-t4-us-west-2a-x", 7)]), "gpu-t4-us-west-2a", 0, 8) == 0


def test_a_replacement_group_starts_at_the_size_of_the_one_it_replaces():
    replacement = LiveNodeGroup("manager-us-west-2a-" + "3" * 26, "1.35", 0, 3, 1)
    two = cluster(groups=[group("manager-us-west-2a", 2), replacement])
    assert desired_size(two, "manager-us-west-2a", 0, 3) == 2


def test_control_plane_zones_come_from_the_config_then_the_cluster_then_all():
    live = cluster(zones=("us-west-2a", "us-west-2b"))
    zones = ("us-west-2a", "us-west-2b", "us-west-2c")
    assert cluster_zones(live, zones, ()) == ("us-west-2a", "us-west-2b")
    assert cluster_zones(live, zones, ("us-west-2b", "us-west-2a")) == ("us-west-2b", "us-west-2a")
    assert zone_problem(live, zones, ()) is None
    assert "us-west-2a" in zone_problem(live, ("us-west-2b", "us-west-2c"), ())
    assert "network.clusterZones" in zone_problem(live, zones, ("us-west-2b", "us-west-2c"))


def test_the_recorded_size_is_kept_unless_min_or_max_changes_or_it_falls_outside():
    from components.clouds.aws.live import keeps_recorded_size

    one = cluster(groups=[group("gpu-t4-us-west-2a", 5)])
    g = one.node_groups[0]
    assert keeps_recorded_size(one, "gpu-t4-us-west-2a", g.min_size, g.max_size)  # a minor upgrade, say
    assert not keeps_recorded_size(one, "gpu-t4-us-west-2a", g.min_size + 1, g.max_size)
    assert not keeps_recorded_size(one, "gpu-t4-us-west-2a", g.min_size, g.max_size + 1)
    assert not keeps_recorded_size(None, "gpu-t4-us-west-2a", 0, 8)  # created: its size is sent
    assert not keeps_recorded_size(one, "gpu-a10g-us-west-2a", 0, 8)
