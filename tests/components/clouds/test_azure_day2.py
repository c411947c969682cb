"""The Azure day-2 table (docs/day-2-azure.md), one test per row: two configs of a stack planned offline by
the day-2 engine (torchfleet/preview/day2.py: both synthesized under mocks, each changed input judged by
torchfleet/preview/force_new/azure.yaml, the resource options and the refusal rules of
components/clouds/azure/day2.py). Node pools that run nodes stand in mock_azure.LIVE_AGENT_POOLS, what the
program reads at preview (live_count.py)."""

from __future__ import annotations

import itertools

import pytest

from components.clouds.azure import manager_pool
from components.spec import parse
from tests.harness import synth_config
from torchfleet.plan import render
from torchfleet.preview import day2, force_new_rules, mock_azure, plans

# Their plans synthesize the same old config again and again: synthesized once (tests/harness/synth_cache.py).
pytestmark = pytest.mark.usefixtures("memoized_synth")

POOL = "azure-native:containerservice:AgentPool"
CLUSTER = "azure-native:containerservice:ManagedCluster"
ROLE = "azure-native:authorization:RoleAssignment"
MANAGER = "torchfleet-azure-pools-manager"
DEPLOYER = "User:00000000-0000-0000-0000-0000000000b0"
BASE = {
    "azure-native:location": "eastus",
    "torchfleet:cloud": "azure",
    "torchfleet:zones": ["1", "2"],
    "torchfleet:kubernetesVersion": "1.34",
    "torchfleet:managerPool": {"machineType": "Standard_D4s_v5", "minNodes": 1, "maxNodes": 3},
    "torchfleet:gpuPools": [{"gpu": "t4", "maxNodes": 8}],
    "torchfleet:network": {"publicAccessCidrs": ["203.0.113.0/24"]},
    "torchfleet:admins": [DEPLOYER, "Group:00000000-0000-0000-0000-0000000000a1"],
    "torchfleet:storage": {"protect": True},
}


def _with(**changes) -> dict:
    return {**BASE, **{f"torchfleet:{k}": v for k, v in changes.items()}}


def plan(new: dict, old: dict = BASE, live: dict | None = None) -> day2.Day2Plan:
    mock_azure.LIVE_AGENT_POOLS.clear()
    mock_azure.LIVE_AGENT_POOLS.update(live or {})
    try:
        return day2.plan_configs("day2", old, new)
    finally:
        mock_azure.LIVE_AGENT_POOLS.clear()


def changed(p: day2.Day2Plan, package: str = "azure-native:") -> dict[str, tuple[str, str]]:
    """name -> (action, type) of every Azure resource that is not unchanged."""
    return {c.name: (c.action, c.type) for c in p.changes if c.action != "unchanged" and c.type.startswith(package)}


def _clean(p: day2.Day2Plan) -> None:
    assert p.refusals == [] and p.collisions == [], (p.refusals, [c.collides for c in p.collisions])


# ---- zones ------------------------------------------------------------------------------------------

def test_zone_added_creates_its_gpu_pool_and_moves_the_manager_pool_create_first():
    p = plan(_with(zones=["1", "2", "3"]))
    _clean(p)
    assert changed(p) == {
        # The system pool's zones are set once (ignoreChanges): no PUT AKS would refuse.
        "torchfleet-azure-cluster-aks": ("ignored", CLUSTER),
        MANAGER: ("replace", POOL),
        "torchfleet-azure-gpu-t4z3": ("create", POOL),
    }
    manager = p.get(POOL, MANAGER)
    assert manager.order == "create-first" and "agentPoolName" in manager.paths


def test_zone_removed_deletes_only_its_gpu_pool():
    p = plan(_with(zones=["1", "2"]), old=_with(zones=["1", "2", "3"]))
    _clean(p)
    assert changed(p) == {"torchfleet-azure-cluster-aks": ("ignored", CLUSTER), MANAGER: ("replace", POOL),
                          "torchfleet-azure-gpu-t4z3": ("delete", POOL)}


def test_zones_reordered_change_nothing():
    p = plan(_with(zones=["2", "1"]))
    _clean(p)
    assert [c.key for c in p.changes if c.action != "unchanged"] == []


# ---- the manager pool -------------------------------------------------------------------------------

@pytest.mark.parametrize("change", [{"machineType": "Standard_D8s_v5"}, {"diskSizeGb": 256},
                                    {"encryptionAtHost": False}], ids=["machine type", "disk", "encryption"])
def test_manager_setting_aks_cannot_change_in_place_is_a_new_pool_first(change):
    p = plan(_with(managerPool={"machineType": "Standard_D4s_v5", "minNodes": 1, "maxNodes": 3, **change}))
    _clean(p)
    expected = {MANAGER: ("replace", POOL)}
    if "encryptionAtHost" in change:  # the system pool's is set once too (ignoreChanges)
        expected["torchfleet-azure-cluster-aks"] = ("ignored", CLUSTER)
    assert changed(p) == expected
    assert p.get(POOL, MANAGER).order == "create-first"


def test_manager_count_is_an_update_of_its_bounds_and_count():
    p = plan(_with(managerPool={"machineType": "Standard_D4s_v5", "minNodes": 2, "maxNodes": 5}), live={})
    _clean(p)
    assert changed(p) == {MANAGER: ("update", POOL)}
    assert set(p.get(POOL, MANAGER).paths) == {"minCount", "maxCount", "count"}


# ---- GPU pools --------------------------------------------------------------------------------------

def test_gpu_pool_added_and_removed():
    a100 = {"gpu": "a100-80gb", "maxNodes": 1, "spot": False, "zones": ["1"]}
    added = plan(_with(gpuPools=[{"gpu": "t4", "maxNodes": 8}, a100],
                       guardrails={"allowOnDemandGpus": True}))
    _clean(added)
    assert changed(added) == {"torchfleet-azure-gpu-a10080gbz1": ("create", POOL)}
    # The autoscaler's priority list names the new pool: the ConfigMap is recreated (delete first).
    assert changed(added, "kubernetes:") == {
        "torchfleet-azure-gpu-priority-expander": ("replace", "kubernetes:core/v1:ConfigMap")}
    removed = plan(BASE, old=_with(gpuPools=[{"gpu": "t4", "maxNodes": 8}, a100],
                                   guardrails={"allowOnDemandGpus": True}))
    _clean(removed)
    assert changed(removed) == {"torchfleet-azure-gpu-a10080gbz1": ("delete", POOL)}


def test_gpu_pool_retyped_creates_the_new_type_pool_first_then_deletes_the_old():
    """A pool's name is its VM size's (naming.agent_pool_name): another type is another pool, created before the
    old one is deleted (Pulumi deletes last), never a delete-first replacement of the same name."""
    p = plan(_with(gpuPools=[{"gpu": "t4", "maxNodes": 8, "machineTypes": ["Standard_NC8as_T4_v3"]}]),
             live={"t4z1": 2, "t4z2": 0})
    _clean(p)
    assert changed(p) == {"torchfleet-azure-gpu-t4z1": ("delete", POOL), "torchfleet-azure-gpu-t4z2": ("delete", POOL),
                          "torchfleet-azure-gpu-t4z17634": ("create", POOL),
                          "torchfleet-azure-gpu-t4z28fae": ("create", POOL)}
    assert not [c for c in p.changes if c.action == "replace" and c.type == POOL]


def test_machine_types_reordered_or_first_removed_replaces_no_pool():
    """Review (day 2): the second type's pool was named by its index (t4z1m1), so reordering the list re-typed both
    names in place (vmSize is force-new: delete-first, running spot nodes killed)."""
    both = ["Standard_NC4as_T4_v3", "Standard_NC8as_T4_v3"]
    old = _with(gpuPools=[{"gpu": "t4", "maxNodes": 8, "machineTypes": both}])
    reordered = plan(_with(gpuPools=[{"gpu": "t4", "maxNodes": 8, "machineTypes": both[::-1]}]), old=old)
    _clean(reordered)
    assert [c.key for c in reordered.changes if c.action != "unchanged"] == []
    first_removed = plan(_with(gpuPools=[{"gpu": "t4", "maxNodes": 8, "machineTypes": both[1:]}]), old=old)
    _clean(first_removed)
    assert changed(first_removed) == {"torchfleet-azure-gpu-t4z1": ("delete", POOL),
                                      "torchfleet-azure-gpu-t4z2": ("delete", POOL)}


def test_gpu_pool_rezoned_deletes_one_zone_and_creates_the_other():
    p = plan(_with(gpuPools=[{"gpu": "t4", "maxNodes": 8, "zones": ["2"]}]),
             old=_with(gpuPools=[{"gpu": "t4", "maxNodes": 8, "zones": ["1"]}]))
    _clean(p)
    assert changed(p) == {"torchfleet-azure-gpu-t4z1": ("delete", POOL), "torchfleet-azure-gpu-t4z2": ("create", POOL)}


def test_gpu_pool_disk_change_is_a_replacement_not_a_refused_update():
    p = plan(_with(gpuPools=[{"gpu": "t4", "maxNodes": 8, "diskSizeGb": 300}]))
    _clean(p)
    change = p.get(POOL, "torchfleet-azure-gpu-t4z1")
    assert change.action == "replace" and change.order == "delete-first"


def test_a_delete_first_pool_replacement_is_flagged_with_its_running_nodes():
    """Review (day 2): AKS deletes a pool without cordon and drain; the plan says so for every pool replaced
    delete-first, with the count it read, and an ordinary update raises no caution."""
    p = plan(_with(gpuPools=[{"gpu": "t4", "maxNodes": 8, "diskSizeGb": 300}]), live={"t4z1": 3, "t4z2": 0})
    _clean(p)
    cautions = {c.key.rsplit("::", 1)[1]: c for c in p.cautions}
    assert set(cautions) == {"torchfleet-azure-gpu-t4z1", "torchfleet-azure-gpu-t4z2"}
    assert "3 node(s) ran" in cautions["torchfleet-azure-gpu-t4z1"].reason
    assert "cannot see" in cautions["torchfleet-azure-gpu-t4z2"].reason
    assert "az aks nodepool show" in cautions["torchfleet-azure-gpu-t4z1"].instead
    assert p.to_json()["cautions"] and "CAUTION" in render(p)
    assert plan(_with(gpuPools=[{"gpu": "t4", "maxNodes": 12}]), live={"t4z1": 3}).cautions == []


def test_each_pool_reads_its_count_after_the_operation_before_its_own():
    """Review (day 2): every count was read when the program started and sent minutes later, after the pools
    before it; now each pool's count waits for the previous pool (the manager pool's for the cluster)."""
    new = synth_config("day2", BASE)
    chain = [new.one(CLUSTER), *new.of_type(POOL)]
    for before, pool in itertools.pairwise(chain):
        assert before.urn in pool.options["propertyDependencies"]["count"], (pool.name, before.name)


# ---- minNodes / maxNodes while nodes run ------------------------------------------------------------

def test_min_nodes_raised_above_the_running_count_sends_the_new_minimum():
    """Regression (issue 29): ignoreChanges sent the stored count 0 with minCount 1, which AKS refuses."""
    p = plan(_with(gpuPools=[{"gpu": "t4", "minNodes": 2, "maxNodes": 8}]), live={"t4z1": 0, "t4z2": 1})
    _clean(p)
    change = p.get(POOL, "torchfleet-azure-gpu-t4z1")
    assert change.action == "update" and {"minCount", "count"} <= set(change.paths) and not change.ignored
    new = synth_new(_with(gpuPools=[{"gpu": "t4", "minNodes": 2, "maxNodes": 8}]), {"t4z1": 0, "t4z2": 1})
    assert {r.inputs["agentPoolName"]: r.inputs["count"] for r in new.of_type(POOL)
            if r.name != MANAGER} == {"t4z1": 2, "t4z2": 2}


def test_min_nodes_raised_below_the_running_count_keeps_the_running_nodes():
    new = synth_new(_with(gpuPools=[{"gpu": "t4", "minNodes": 2, "maxNodes": 8}]), {"t4z1": 5, "t4z2": 0})
    assert {r.inputs["agentPoolName"]: (r.inputs["minCount"], r.inputs["count"]) for r in new.of_type(POOL)
            if r.name != MANAGER} == {"t4z1": (2, 5), "t4z2": (2, 2)}


def test_max_nodes_lowered_below_the_running_count_sends_the_new_maximum_and_raised_keeps_it():
    lowered = synth_new(_with(gpuPools=[{"gpu": "t4", "maxNodes": 4}]), {"t4z1": 6, "t4z2": 3})
    assert {r.inputs["agentPoolName"]: r.inputs["count"] for r in lowered.of_type(POOL) if r.name != MANAGER} == {
        "t4z1": 4, "t4z2": 3}
    raised = plan(_with(gpuPools=[{"gpu": "t4", "maxNodes": 12}]), live={"t4z1": 6, "t4z2": 3})
    _clean(raised)
    assert set(raised.get(POOL, "torchfleet-azure-gpu-t4z1").paths) == {"maxCount"}  # count stays the live 6


def synth_new(config: dict, live: dict):
    mock_azure.LIVE_AGENT_POOLS.clear()
    mock_azure.LIVE_AGENT_POOLS.update(live)
    try:
        return synth_config("day2", config)
    finally:
        mock_azure.LIVE_AGENT_POOLS.clear()


# ---- Kubernetes minor upgrades ----------------------------------------------------------------------

ON_DEMAND = {"gpuPools": [{"gpu": "t4", "maxNodes": 8, "spot": False}], "guardrails": {"allowOnDemandGpus": True}}


def test_minor_upgraded_twice_control_plane_first_then_the_pools():
    """Without spot pools: the control plane with the system pool in one PUT (as `az aks upgrade`), then each pool."""
    first = plan(_with(kubernetesVersion="1.35", **ON_DEMAND), old=_with(**ON_DEMAND))
    second = plan(_with(kubernetesVersion="1.36", **ON_DEMAND), old=_with(kubernetesVersion="1.35", **ON_DEMAND))
    for p in (first, second):
        _clean(p)
        cluster = p.get(CLUSTER, "torchfleet-azure-cluster-aks")
        assert cluster.action == "update"
        assert set(cluster.paths) == {"kubernetesVersion", "agentPoolProfiles[0].orchestratorVersion"}
        pools = [c for c in p.changes if c.type == POOL]
        assert pools and all(c.action == "update" and c.paths == ["orchestratorVersion"] for c in pools)
    # The pools' updates wait for the cluster's (a separate AKS operation each, after the control plane).
    new = synth_config("day2", _with(kubernetesVersion="1.35"))
    cluster = new.one(CLUSTER)
    for pool in new.of_type(POOL):
        assert cluster.key in new.depends_on(pool), pool.name


def test_minor_upgrade_with_spot_pools_is_refused_with_the_separate_steps():
    """Review (day 2): with spot pools AKS does not upgrade the control plane and node pools together
    (aks-docs spot-node-pool.md), and the ManagedCluster PUT carried both the control plane's and the system
    pool's version."""
    p = plan(_with(kubernetesVersion="1.35"))
    assert [r.key for r in p.refusals] == ["torchfleet:kubernetesVersion"]
    refusal = p.refusals[0]
    assert "gpu-t4-1" in refusal.reason and "spot" in refusal.reason
    steps = refusal.instead
    assert steps.index("--control-plane-only --kubernetes-version 1.35") < steps.index(
        "-n system --kubernetes-version 1.35") < steps.index("pulumi up")


@pytest.mark.parametrize("old,new", [("1.34", "1.36"), ("1.35", "1.34")], ids=["skips a minor", "downgrade"])
def test_minor_skipped_or_downgraded_is_refused_naming_the_key(old, new):
    p = plan(_with(kubernetesVersion=new), old=_with(kubernetesVersion=old))
    assert [r.key for r in p.refusals] == ["torchfleet:kubernetesVersion"]
    assert "pulumi up" in p.refusals[0].instead or "new stack" in p.refusals[0].instead


# ---- admins, store, endpoint, network -------------------------------------------------------------

def test_admins_rotated_with_the_deployer_deletes_and_creates_one_assignment_each():
    new_admin = "ServicePrincipal:00000000-0000-0000-0000-0000000000c9"
    p = plan(_with(admins=["Group:00000000-0000-0000-0000-0000000000a1", new_admin]))
    _clean(p)
    roles = {n: a for n, (a, t) in changed(p).items() if t == ROLE}
    assert roles == {"torchfleet-azure-cluster-admin-00000000-0000-0000-0000-0000000000b0": "delete",
                     "torchfleet-azure-cluster-admin-00000000-0000-0000-0000-0000000000c9": "create"}
    # The Kubernetes provider waits again for the new grant to take effect.
    wait = p.get("pulumi-python:dynamic:Resource", "torchfleet-azure-cluster-rbac-propagation")
    assert wait.action == "replace"


def test_store_protect_changed_changes_no_resource_only_what_destroy_keeps():
    p = plan(_with(storage={"protect": False}))
    _clean(p)
    assert changed(p) == {}
    kept = lambda cfg: plans.destroy_plan(synth_config("day2", cfg).resources).kept  # noqa: E731
    assert kept(BASE) and kept(_with(storage={"protect": False})) == []


@pytest.mark.parametrize("old,new", [({"publicAccessCidrs": ["203.0.113.0/24"]}, {"privateOnly": True}),
                                     ({"privateOnly": True}, {"publicAccessCidrs": ["203.0.113.0/24"]})],
                         ids=["public to private", "private to public"])
def test_public_private_switch_is_an_update_of_the_cluster(old, new):
    """API Server VNet Integration makes AKS accept it (aks-docs api-server-vnet-integration.md)."""
    p = plan(_with(network=new), old=_with(network=old))
    _clean(p)
    assert changed(p) == {"torchfleet-azure-cluster-aks": ("update", CLUSTER)}
    paths = p.get(CLUSTER, "torchfleet-azure-cluster-aks").paths
    assert paths and all(path.startswith("apiServerAccessProfile.") for path in paths)


def test_network_range_change_is_refused():
    p = plan(_with(network={"cidr": "10.20.0.0/16", "publicAccessCidrs": ["203.0.113.0/24"]}))
    assert [r.key for r in p.refusals] == ["torchfleet:network.cidr"]


def test_destroy_then_up_with_adopt_imports_exactly_what_destroy_kept():
    kept = plans.destroy_plan(synth_config("day2", BASE).resources).kept
    adopted = synth_config("day2", _with(storage={"protect": True, "adopt": True}))
    imported = sorted(f"{r.type}::{r.name}" for r in adopted.resources if r.options.get("import"))
    assert imported == sorted(kept) and len(kept) == 3
    p = plan(_with(storage={"protect": True, "adopt": True}))
    assert not [c for c in p.changes if c.action in ("replace", "delete")] and p.refusals == []


# ---- the CPU pool and the manager pool's taint (issue 30) ---------------------------------------------------------


def test_a_cpu_pool_added_creates_its_agent_pool_and_touches_neither_cluster_nor_store():
    p = plan(_with(cpuPool={"machineType": "Standard_D4s_v5", "maxNodes": 2}))
    _clean(p)
    acted = changed(p)
    created = [name for name, (action, type_) in acted.items() if action == "create" and type_ == POOL]
    assert created == ["torchfleet-azure-pools-cpu"], acted
    assert not [name for name, (action, type_) in acted.items() if action in ("replace", "delete")], acted
    assert CLUSTER not in {type_ for _, type_ in acted.values()}


def test_the_manager_pools_taint_is_not_a_replacing_input():
    """The manager pool's taint (issue 30) reaches a running pool as a program change: nodeTaints is updated in
    place (`az aks nodepool update --node-taints`, aks-docs use-node-taints.md), outside the hashed name's
    settings (manager_pool.immutable_settings), and force_new/azure.yaml's AgentPool row, from azure-native's
    forceNewMap, does not list it."""
    rule = force_new_rules.shipped().get(POOL)
    assert rule is not None and rule.force_new
    assert not [f for f in rule.force_new if force_new_rules.covers(f, "nodeTaints[0]")]
    assert "nodeTaints" not in manager_pool.immutable_settings(parse(dict(BASE), stack="day2"))
