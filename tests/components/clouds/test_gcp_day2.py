"""GCP's day-2 table (docs/day-2-gcp.md), one test per row: the offline plan of each change to the shipped
stack (torchfleet/preview/day2.py: both configs under mocks, each changed input judged by
force_new/gcp.yaml) and the refusals of components/clouds/gcp/day2.py.

What a mock cannot show is said where it matters: a preview of a real stack reads the store's location
from its state (gcp/filestore.py ignores the config's), test_gcp_store.py covers that path.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from components.clouds import day2 as refusal_rules
from components.clouds.gcp import day2 as gcp_day2
from components.spec import parse
from tests.harness import STACKS_DIR
from torchfleet.preview import day2, force_new_rules, plans
from torchfleet.preview.stack_file import load_stack_file

# Their plans synthesize the same old config again and again: synthesized once (tests/harness/synth_cache.py).
pytestmark = pytest.mark.usefixtures("memoized_synth")

POOL = "gcp:container/nodePool:NodePool"
CLUSTER = "gcp:container/cluster:Cluster"
STORE = "gcp:filestore/instance:Instance"
MEMBER = "gcp:projects/iAMMember:IAMMember"
CRB = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding"
PROVIDER = "pulumi:providers:kubernetes"
SHIPPED = load_stack_file(STACKS_DIR / "Pulumi.gcp-usc1.yaml")


def pool(zone_pool: str) -> str:
    return f"torchfleet-gcp-pools-{zone_pool}"


def plan(changes: dict[str, Any], base: dict[str, Any] | None = None) -> day2.Day2Plan:
    old = dict(base or SHIPPED)
    return day2.plan_configs("gcp-usc1", old, day2.apply_changes(dict(old), changes))


def acted(p: day2.Day2Plan) -> dict[str, str]:
    """{name: action} of every resource the change touches."""
    return {c.name: c.action for c in p.changes if c.action != "unchanged"}


def refused(p: day2.Day2Plan) -> list[str]:
    return [r.key for r in p.refusals]


# ---------------------------------------------------------------- zones


def test_zones_reordered_change_nothing():
    """The store is in storage.zone, the cluster sets no node_locations (M1), the manager's are sorted."""
    p = plan({"torchfleet:zones": ["us-central1-b", "us-central1-a"]})
    assert acted(p) == {} and p.refusals == []


def test_a_zone_added_updates_the_manager_pool_and_creates_the_zones_gpu_pools():
    p = plan({"torchfleet:zones": ["us-central1-a", "us-central1-b", "us-central1-c"]})
    assert acted(p) == {pool("manager"): "update", pool("cpu"): "update", pool("gpu-t4-us-central1-c"): "create"}
    assert p.get(POOL, pool("manager")).paths == ["nodeLocations[2]"]  # in place: UpdateNodePool locations
    assert p.get(POOL, pool("cpu")).paths == ["nodeLocations[2]"]  # the CPU pool spans every zone by default
    assert p.refusals == []


def test_the_first_zone_dropped_deletes_its_pools_and_keeps_the_store_where_it_is():
    """Regression (GCP review B1): the store followed zones[0] and was replaced by an empty one."""
    p = plan({"torchfleet:zones": ["us-central1-b"], "torchfleet:gpuPools[1].zones": ["us-central1-b"]})
    assert acted(p) == {
        pool("manager"): "update",
        pool("cpu"): "update",
        pool("gpu-t4-us-central1-a"): "delete",
        pool("gpu-l4-us-central1-a"): "delete",
        pool("gpu-l4-us-central1-b"): "create",
    }
    assert p.refusals == [] and STORE not in {c.type for c in p.changes if c.action != "unchanged"}


def test_reordering_zones_of_a_stack_without_storage_zone_is_refused_naming_it():
    base = day2.apply_changes(dict(SHIPPED), {"torchfleet:storage": {"protect": True, "tier": "BASIC_HDD",
                                                                     "sizeGb": 1024}})
    p = plan({"torchfleet:zones": ["us-central1-b", "us-central1-a"]}, base)
    (refusal,) = p.refusals
    assert refusal.key == "torchfleet:storage.zone"
    assert "set torchfleet:storage.zone: us-central1-a" in refusal.instead


# ---------------------------------------------------------------- the manager pool


def test_manager_machine_type_disk_and_count_update_the_pool_in_place():
    """nodeConfig.machineType and diskSizeGb are not ForceNew (node_config.go): GKE recreates the nodes
    with the pool's upgrade strategy; the pool (and its name) stays (GCP review m5)."""
    p = plan({"torchfleet:managerPool.machineType": "e2-standard-8", "torchfleet:managerPool.diskSizeGb": 200,
              "torchfleet:managerPool.maxNodes": 5, "torchfleet:managerPool.minNodes": 2})
    assert acted(p) == {pool("manager"): "update"}
    assert sorted(p.get(POOL, pool("manager")).paths) == [
        "autoscaling.totalMaxNodeCount", "autoscaling.totalMinNodeCount", "nodeConfig.diskSizeGb",
        "nodeConfig.machineType",
    ]


# ---------------------------------------------------------------- GPU pools


def test_a_gpu_pool_added_and_one_removed():
    added = plan({"torchfleet:gpuPools[1].zones": ["us-central1-a", "us-central1-b"]})
    assert acted(added) == {pool("gpu-l4-us-central1-b"): "create"}
    removed = plan({"torchfleet:gpuPools": SHIPPED["torchfleet:gpuPools"][:1]})
    assert acted(removed) == {pool("gpu-l4-us-central1-a"): "delete"}


def test_a_gpu_pool_retyped_with_the_same_gpu_count_is_updated_in_place():
    p = plan({"torchfleet:gpuPools[0].machineTypes": ["n1-standard-4"]})
    assert set(acted(p).values()) == {"update"}
    assert p.get(POOL, pool("gpu-t4-us-central1-a")).paths == ["nodeConfig.machineType"]


def test_a_gpu_pool_retyped_to_more_gpus_per_node_is_replaced_delete_first_without_collision():
    """guest_accelerator is ForceNew (schemaNodeConfig); the pool's fixed name makes it delete-first."""
    p = plan({"torchfleet:gpuPools[0].machineTypes": ["n1-standard-16"]})
    change = p.get(POOL, pool("gpu-t4-us-central1-a"))
    assert change.action == "replace" and change.order == "delete-first" and change.collides is None
    assert any(r.startswith("nodeConfig.guestAccelerators") for r in change.replaced_by)
    assert p.collisions == []


def test_a_gpu_pool_re_zoned_is_deleted_in_the_old_zone_and_created_in_the_new():
    p = plan({"torchfleet:gpuPools[1].zones": ["us-central1-b"]})
    assert acted(p) == {pool("gpu-l4-us-central1-a"): "delete", pool("gpu-l4-us-central1-b"): "create"}


@pytest.mark.parametrize("change", [
    {"torchfleet:gpuPools[1].minNodes": 1, "torchfleet:gpuPools[1].maxNodes": 8},  # raised
    {"torchfleet:gpuPools[1].maxNodes": 2},  # lowered while nodes run
])
def test_min_and_max_nodes_are_autoscaling_updates_never_a_new_pool(change):
    """initialNodeCount (ForceNew) follows minNodes at creation and is ignoreChanges afterwards: a lower
    maxNodes is GKE's autoscaler draining down to it, not a replacement."""
    p = plan(change)
    l4 = p.get(POOL, pool("gpu-l4-us-central1-a"))
    assert acted(p) == {pool("gpu-l4-us-central1-a"): "update"}
    assert all(path.startswith("autoscaling.") for path in set(l4.paths) - set(l4.ignored))


# ---------------------------------------------------------------- Kubernetes minor


def test_one_minor_up_is_a_control_plane_update_and_the_pools_follow_the_channel():
    p = plan({"torchfleet:kubernetesVersion": "1.36"})
    assert acted(p) == {"torchfleet-gcp-gke": "update"}
    assert p.get(CLUSTER, "torchfleet-gcp-gke").paths == ["minMasterVersion"]


def test_two_minors_at_once_are_refused_with_one_up_per_minor():
    old = parse({k: v for k, v in SHIPPED.items()}, stack="gcp-usc1")
    change = refusal_rules.ConfigChange(old, dataclasses.replace(old, kubernetes_version="1.37"), {}, {})
    (refusal,) = gcp_day2.kubernetes_minor_skipped(change)
    assert refusal.key == "torchfleet:kubernetesVersion"
    assert 'kubernetesVersion: "1.36", then kubernetesVersion: "1.37"' in refusal.instead
    back = refusal_rules.ConfigChange(old, dataclasses.replace(old, kubernetes_version="1.34"), {}, {})
    assert gcp_day2.kubernetes_minor_skipped(back) == []  # a lower floor changes nothing


def test_two_minors_at_once_are_refused_by_torchfleet_plan_once_gke_offers_the_target(monkeypatch):
    """Today the catalog's newest GKE minor is one above the shipped stack's, so validation refuses any two-minor
    target before the rule runs (the plan raises ConfigError). A catalog that lists 1.37 (as a refreshed one
    will) lets the change through validation, and the plan itself refuses it, naming the key and the steps."""
    from components.catalog import kubernetes
    from components.spec.model import ConfigError

    with pytest.raises(ConfigError, match="torchfleet:kubernetesVersion"):
        plan({"torchfleet:kubernetesVersion": "1.37"})
    real = kubernetes.load()
    gke = dataclasses.replace(real["gke"], versions={**real["gke"].versions, "1.37": None})
    monkeypatch.setattr(kubernetes, "load", lambda: {**real, "gke": gke})
    p = plan({"torchfleet:kubernetesVersion": "1.37"})
    assert refused(p) == ["torchfleet:kubernetesVersion"]
    (refusal,) = p.refusals
    assert 'kubernetesVersion: "1.36", then kubernetesVersion: "1.37"' in refusal.instead
    assert acted(plan({"torchfleet:kubernetesVersion": "1.36"})) == {"torchfleet-gcp-gke": "update"}  # one minor


# ---------------------------------------------------------------- admins


def test_admins_rotated_delete_the_old_grant_and_binding_and_create_the_new_by_identity():
    base = day2.apply_changes(dict(SHIPPED), {"torchfleet:admins": ["user:old@example.com"]})
    p = plan({"torchfleet:admins": ["user:old@example.com", "user:new@example.com"]}, base)
    assert sorted(acted(p).values()) == ["create", "create"]  # the kept admin is untouched
    rotated = plan({"torchfleet:admins": ["user:new@example.com"]}, base)
    by_action = {a: sorted(c.type for c in rotated.by_action(a)) for a in ("create", "delete")}
    assert by_action == {"create": [MEMBER, CRB], "delete": [MEMBER, CRB]}


# ---------------------------------------------------------------- the store


def test_store_tier_changed_is_refused_and_the_instance_is_never_replaced():
    p = plan({"torchfleet:storage.tier": "BASIC_SSD", "torchfleet:storage.sizeGb": 2560})
    assert refused(p) == ["torchfleet:storage.tier"]
    store = p.get(STORE, "torchfleet-gcp-filestore-instance")
    assert store.action != "replace" and "tier" in store.ignored


def test_store_zone_changed_is_refused():
    p = plan({"torchfleet:storage.zone": "us-central1-b"})
    assert refused(p) == ["torchfleet:storage.zone"]
    assert p.get(STORE, "torchfleet-gcp-filestore-instance").action == "ignored"


def test_store_grown_in_place_and_a_basic_store_shrunk_refused():
    grown = plan({"torchfleet:storage.sizeGb": 2048})
    assert grown.get(STORE, "torchfleet-gcp-filestore-instance").action == "update" and grown.refusals == []
    big = day2.apply_changes(dict(SHIPPED), {"torchfleet:storage.sizeGb": 2048})
    old, new = parse(big, stack="gcp-usc1"), parse(dict(SHIPPED), stack="gcp-usc1")
    (refusal,) = gcp_day2.basic_store_shrunk(refusal_rules.ConfigChange(old, new, big, dict(SHIPPED)))
    assert refusal.key == "torchfleet:storage.sizeGb" and "2048 -> 1024" in refusal.reason


def test_a_zonal_store_across_the_10_tib_band_or_a_new_network_cidr_is_refused_naming_its_key():
    zonal = day2.apply_changes(dict(SHIPPED), {"torchfleet:storage.tier": "ZONAL", "torchfleet:storage.sizeGb": 2048})
    old = parse(zonal, stack="gcp-usc1")
    cases = {
        "torchfleet:storage.sizeGb": {"torchfleet:storage.sizeGb": 10240},
        "torchfleet:network.cidr": {"torchfleet:network.cidr": "10.8.0.0/16"},
    }
    for key, changes in cases.items():
        raw = day2.apply_changes(dict(zonal), changes)
        change = refusal_rules.ConfigChange(old, parse(raw, stack="gcp-usc1"), zonal, raw)
        assert [r.key for r in gcp_day2.store_moved(change)] == [key]


def test_store_protect_off_changes_no_input_and_lets_destroy_delete_it():
    p = plan({"torchfleet:storage.protect": False})
    assert acted(p) == {} and p.refusals == []
    new = day2.apply_changes(dict(SHIPPED), {"torchfleet:storage.protect": False})
    from tests.harness import synth_config

    destroy = plans.destroy_plan(synth_config("gcp-usc1", new).resources)
    assert any(key.startswith(STORE) for key in destroy.deleted)


# ---------------------------------------------------------------- the endpoint


@pytest.mark.parametrize("change", [
    {"torchfleet:network.dnsEndpoint": False, "torchfleet:network.publicAccessCidrs": ["203.0.113.7/32"]},
    {"torchfleet:network.publicAccessCidrs": ["203.0.113.7/32"]},
])
def test_endpoint_switched_updates_the_cluster_in_place_and_replaces_no_kubernetes_object(change):
    """privateClusterConfig.enablePrivateEndpoint, the authorized networks and the DNS endpoint's
    allowExternalTraffic are not ForceNew; the Kubernetes provider's clusterIdentifier is the cluster id,
    so a new kubeconfig server updates the provider instead of replacing every object through it."""
    p = plan(change)
    assert p.get(CLUSTER, "torchfleet-gcp-gke").action == "update"
    assert p.get(PROVIDER, "torchfleet-gcp-k8s").action in ("update", "unchanged")
    assert p.by_action("replace") == [] and p.by_action("delete") == [] and p.refusals == []


# ---------------------------------------------------------------- destroy, then up again


def test_up_after_destroy_with_adopt_imports_the_kept_store_and_network_unchanged():
    p = plan({"torchfleet:storage.adopt": True})
    assert acted(p) == {} and p.refusals == []
    new = day2.apply_changes(dict(SHIPPED), {"torchfleet:storage.adopt": True})
    from tests.harness import synth_config

    result = synth_config("gcp-usc1", new)
    imported = {r.type: r.options.get("import") for r in result.resources if r.options.get("import")}
    assert imported[STORE] == "projects/my-ml-project/locations/us-central1-a/instances/" + \
        result.one(STORE).inputs["name"]
    assert "gcp:compute/network:Network" in imported


# ---------------------------------------------------------------- the CPU pool (issue 30)


def test_a_cpu_pool_added_creates_its_pool_and_touches_neither_cluster_nor_store():
    """torchfleet:cpuPool added to a running stack: one new NodePool, nothing replaced, no refusal."""
    without = {k: v for k, v in SHIPPED.items() if k != "torchfleet:cpuPool"}
    p = day2.plan_configs("gcp-usc1", without, dict(SHIPPED))
    assert acted(p) == {pool("cpu"): "create"}
    assert p.refusals == []


def test_the_manager_pools_taint_is_not_a_replacing_input():
    """The manager pool's taint (issue 30) reaches a running pool as a program change, not a config one: GKE
    updates a node pool's taints in place (UpdateNodePool, https://cloud.google.com/kubernetes-engine/docs/how-to/
    update-existing-nodepools), and force_new/gcp.yaml's NodePool row, from the provider's source, does not
    list nodeConfig.taints."""
    rule = force_new_rules.shipped().get(POOL)
    assert rule is not None and rule.force_new
    assert not [f for f in rule.force_new if force_new_rules.covers(f, "nodeConfig.taints[0].key")]
