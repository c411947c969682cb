"""The AWS day-2 table (docs/day-2-aws.md), one test per row: two configs of a stack synthesized offline,
the second against the cluster the first would leave running (mock_aws.LIVE_CLUSTERS, what live.py reads),
and each resource's plan from the provider's ForceNew rules (torchfleet/preview/force_new/aws.yaml).

Each resource's action comes from the day-2 engine itself (torchfleet/preview/day2.py classify); what this
file adds is the running cluster between the two synths."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from components.clouds import day2 as refusal_rules
from components.clouds.aws import day2 as aws_day2
from components.clouds.day2 import ConfigChange
from components.spec import ConfigError
from tests.components.spec.configs import config, ok
from tests.harness import synth_config
from torchfleet.preview import day2, force_new_rules, mock_aws
from torchfleet.preview.mock_aws import NAME_SUFFIX

# Their plans synthesize the same old config again and again: synthesized once (tests/harness/synth_cache.py).
pytestmark = pytest.mark.usefixtures("memoized_synth")

RULES = yaml.safe_load((Path(__file__).resolve().parents[4] / "torchfleet/preview/force_new/aws.yaml").read_text())
DEPLOYER = f"arn:aws:iam::{mock_aws.ACCOUNT}:user/deployer"
BASE = {
    "aws:region": "us-west-2",
    "torchfleet:cloud": "aws",
    "torchfleet:zones": ["us-west-2a", "us-west-2b"],
    "torchfleet:kubernetesVersion": "1.34",
    "torchfleet:managerPool": {"machineType": "m6i.large", "minNodes": 1, "maxNodes": 3},
    "torchfleet:gpuPools": [{"gpu": "t4", "maxNodes": 8}],
    "torchfleet:network": {"publicAccessCidrs": ["203.0.113.0/24"]},
    "torchfleet:storage": {"protect": True},
}


def live_from(result, desired=None):
    """The cluster `result` describes, as DescribeCluster/DescribeNodegroup would answer after its `up`."""
    cluster = result.one("aws:eks/cluster:Cluster")
    zones = [s.inputs["availabilityZone"] for s in result.of_type("aws:ec2/subnet:Subnet")
             if f"{s.name}-id" in cluster.inputs["vpcConfig"]["subnetIds"]]
    groups = {}
    for g in result.of_type("aws:eks/nodeGroup:NodeGroup"):
        name = g.inputs["nodeGroupNamePrefix"] + NAME_SUFFIX
        pool = g.inputs["nodeGroupNamePrefix"].rstrip("-")
        s = g.inputs["scalingConfig"]
        groups[name] = {"version": g.inputs["version"], "min": int(s["minSize"]), "max": int(s["maxSize"]),
                        "desired": (desired or {}).get(pool, int(s["desiredSize"]))}
    bootstrap = cluster.inputs["accessConfig"]["bootstrapClusterCreatorAdminPermissions"]
    return {cluster.inputs["name"]: {"version": cluster.inputs["version"], "zones": zones,
                                     "bootstrap": bootstrap,
                                     "nodeGroups": groups}}


def plan(old_config, new_config, desired=None):
    """{(type, name): (action, changed paths)} for every custom AWS resource, from the day-2 engine's
    classification (torchfleet/preview/day2.py classify, with force_new/*.yaml), and the two results.
    The new config runs against the cluster the old one leaves running (what live.py would read)."""
    mock_aws.LIVE_CLUSTERS.clear()
    old = synth_config("day2", old_config)
    mock_aws.LIVE_CLUSTERS.update(live_from(old, desired))
    try:
        new = synth_config("day2", new_config)
    finally:
        mock_aws.LIVE_CLUSTERS.clear()
    out = {}
    for c in day2.classify(old.resources, new.resources, force_new_rules.shipped()):
        if c.type.startswith("aws:"):
            assert c.action != "unknown", f"no ForceNew row for {c.type}: {c.note}"
            assert not c.collides, f"{c.key} would collide: {c.collides}"
            out[(c.type, c.name)] = (c.action, sorted(c.paths))
    return out, old, new


def changed(p, action):
    return sorted((t.split(":")[-1], n) for (t, n), (a, _) in p.items() if a == action)


def with_(**keys):
    raw = copy.deepcopy(BASE)
    raw.update({f"torchfleet:{k}": v for k, v in keys.items()})
    return raw


# ---------------------------------------------------------------- zones


def test_zone_added_keeps_the_control_plane_on_its_subnets_and_adds_the_zone():
    p, _, _ = plan(BASE, with_(zones=["us-west-2a", "us-west-2b", "us-west-2c"]))
    assert changed(p, "replace") == [] and changed(p, "delete") == []
    assert p[("aws:eks/cluster:Cluster", "torchfleet-aws-control-eks")][0] == "unchanged"
    created = changed(p, "create")
    assert ("Subnet", "torchfleet-aws-network-private-us-west-2c") in created
    assert ("NodeGroup", "torchfleet-aws-nodes-gpu-t4-us-west-2c") in created
    assert ("MountTarget", "torchfleet-aws-efs-mt-us-west-2c") in created


def test_zone_added_under_two_running_managers_cautions_that_one_is_terminated():
    """maxNodes 3 over two zones is 2 + 1; over three, 1 + 1 + 1: manager-us-west-2a's maxSize drops to 1, and
    with two nodes running there EKS terminates one (its etcd member's EBS volume stays in the zone). The
    plan's caution says so; with one node running nothing is terminated and nothing is said."""
    three = with_(zones=["us-west-2a", "us-west-2b", "us-west-2c"])
    for running, expected in ((2, 1), (1, 0)):
        mock_aws.LIVE_CLUSTERS.clear()
        old = synth_config("day2", BASE)
        # the size the last `up` sent and the group runs (torchfleet plan reads the running size from there)
        old.one("aws:eks/nodeGroup:NodeGroup", "torchfleet-aws-nodes-manager-us-west-2a").inputs[
            "scalingConfig"]["desiredSize"] = running
        mock_aws.LIVE_CLUSTERS.update(live_from(old))
        try:
            new = synth_config("day2", three)
        finally:
            mock_aws.LIVE_CLUSTERS.clear()
        old_inputs = {f"{r.type}::{r.name}": dict(r.inputs) for r in old.resources if r.custom}
        key = "aws:eks/nodeGroup:NodeGroup::torchfleet-aws-nodes-manager-us-west-2a"
        cautions = aws_day2.max_below_running_size(
            day2.classify(old.resources, new.resources, force_new_rules.shipped()), old_inputs)
        assert len(cautions) == expected, cautions
        if expected:
            assert cautions[0].key == key and "etcd member" in cautions[0].reason
            assert "manager-us-west-2a's maxSize drops below the 2 node(s)" in cautions[0].reason
    assert aws_day2.max_below_running_size in aws_day2.CAUTIONS


def test_zones_reordered_change_nothing():
    p, _, _ = plan(BASE, with_(zones=["us-west-2b", "us-west-2a"]))
    assert {a for a, _ in p.values()} == {"unchanged"}


def test_removing_a_zone_the_control_plane_uses_is_refused_at_preview_and_offline():
    three = with_(zones=["us-west-2a", "us-west-2b", "us-west-2c"])
    with pytest.raises(ConfigError, match=r"torchfleet:zones: the control plane uses subnets in us-west-2a"):
        plan(three, with_(zones=["us-west-2b", "us-west-2c"]))
    refused = aws_day2.control_plane_zone_removed(
        ConfigChange(ok(three), ok(with_(zones=["us-west-2b", "us-west-2c"])), three, {}))
    assert [r.key for r in refused] == ["torchfleet:zones"]


def test_removing_a_zone_the_control_plane_does_not_use_deletes_only_that_zone():
    old = with_(zones=["us-west-2a", "us-west-2b", "us-west-2c"],
                network={"publicAccessCidrs": ["203.0.113.0/24"], "clusterZones": ["us-west-2a", "us-west-2b"]})
    new = with_(zones=["us-west-2a", "us-west-2b"],
                network={"publicAccessCidrs": ["203.0.113.0/24"], "clusterZones": ["us-west-2a", "us-west-2b"]})
    p, _, _ = plan(old, new)
    assert changed(p, "replace") == [] and changed(p, "create") == []
    assert all(n.endswith("us-west-2c") or "-us-west-2c-" in n for _, n in changed(p, "delete"))
    assert not aws_day2.control_plane_zone_removed(ConfigChange(ok(old), ok(new), old, new))


# ---------------------------------------------------------------- manager pool


def test_manager_machine_type_replaces_its_groups_create_first_under_a_new_name():
    p, _, new = plan(BASE, with_(managerPool={"machineType": "m6i.xlarge", "minNodes": 1, "maxNodes": 3}))
    replaced = changed(p, "replace")
    assert [r for r in replaced if r[0] == "NodeGroup"] == [("NodeGroup", "torchfleet-aws-nodes-manager-us-west-2a"),
                                                            ("NodeGroup", "torchfleet-aws-nodes-manager-us-west-2b")]
    # the autoscaler's template tags follow the new Auto Scaling group (their group name is ForceNew)
    assert {t for t, _ in replaced} == {"NodeGroup", "Tag"}
    assert all("manager" in n for _, n in replaced)
    group = new.one("aws:eks/nodeGroup:NodeGroup", "torchfleet-aws-nodes-manager-us-west-2a")
    assert "nodeGroupName" not in group.inputs  # name-prefixed: the replacement does not collide


def test_manager_disk_is_a_new_launch_template_version_not_a_new_group():
    p, _, _ = plan(BASE, with_(managerPool={"machineType": "m6i.large", "minNodes": 1, "maxNodes": 3,
                                            "diskSizeGb": 200}))
    assert changed(p, "replace") == []
    assert ("LaunchTemplate", "torchfleet-aws-nodes-manager-us-west-2a-lt") in changed(p, "update")


def test_manager_count_updates_the_groups_in_place():
    p, _, _ = plan(BASE, with_(managerPool={"machineType": "m6i.large", "minNodes": 2, "maxNodes": 4}))
    assert changed(p, "replace") == []
    assert ("NodeGroup", "torchfleet-aws-nodes-manager-us-west-2b") in changed(p, "update")


# ---------------------------------------------------------------- GPU pools


def test_gpu_pool_added_and_removed():
    p, _, _ = plan(BASE, with_(gpuPools=[{"gpu": "t4", "maxNodes": 8}, {"gpu": "a10g", "maxNodes": 2,
                                                                         "zones": ["us-west-2a"]}]))
    assert ("NodeGroup", "torchfleet-aws-nodes-gpu-a10g-us-west-2a") in changed(p, "create")
    assert changed(p, "replace") == [] and changed(p, "delete") == []
    p, _, _ = plan(BASE, with_(gpuPools=[{"gpu": "t4", "maxNodes": 8, "zones": ["us-west-2a"]}]))
    assert ("NodeGroup", "torchfleet-aws-nodes-gpu-t4-us-west-2b") in changed(p, "delete")
    assert changed(p, "replace") == []


def test_gpu_pool_retyped_replaces_the_group():
    p, _, _ = plan(BASE, with_(gpuPools=[{"gpu": "t4", "maxNodes": 8, "machineTypes": ["g4dn.2xlarge"]}]))
    replaced = changed(p, "replace")
    assert {n for t, n in replaced if t == "NodeGroup"} == {"torchfleet-aws-nodes-gpu-t4-us-west-2a",
                                                            "torchfleet-aws-nodes-gpu-t4-us-west-2b"}
    assert {t for t, _ in replaced} == {"NodeGroup", "Tag"} and all("gpu-t4" in n for _, n in replaced)


# ---------------------------------------------------------------- minNodes / maxNodes while nodes run


def _scaling(new, pool):
    return {k: int(v) for k, v in new.one("aws:eks/nodeGroup:NodeGroup", f"torchfleet-aws-nodes-{pool}")
            .inputs["scalingConfig"].items()}


def test_min_raised_above_the_running_size_sends_desired_at_the_new_minimum():
    """Before: desiredSize ignored, the state's 0 sent with min 1: EKS refused it."""
    p, _, new = plan(BASE, with_(gpuPools=[{"gpu": "t4", "minNodes": 1, "maxNodes": 8}]))
    assert _scaling(new, "gpu-t4-us-west-2a") == {"minSize": 1, "maxSize": 8, "desiredSize": 1}
    assert changed(p, "replace") == []


def test_min_raised_below_the_running_size_keeps_the_nodes_that_run():
    _, _, new = plan(BASE, with_(gpuPools=[{"gpu": "t4", "minNodes": 1, "maxNodes": 8}]),
                     desired={"gpu-t4-us-west-2a": 5})
    assert _scaling(new, "gpu-t4-us-west-2a") == {"minSize": 1, "maxSize": 8, "desiredSize": 5}


def test_max_lowered_below_the_running_size_clamps_desired():
    _, _, new = plan(BASE, with_(gpuPools=[{"gpu": "t4", "maxNodes": 4}]), desired={"gpu-t4-us-west-2a": 6})
    assert _scaling(new, "gpu-t4-us-west-2a") == {"minSize": 0, "maxSize": 4, "desiredSize": 4}


def test_max_raised_leaves_a_busy_group_at_its_size():
    _, _, new = plan(BASE, with_(gpuPools=[{"gpu": "t4", "maxNodes": 16}]), desired={"gpu-t4-us-west-2b": 3})
    assert _scaling(new, "gpu-t4-us-west-2b")["desiredSize"] == 3


def test_a_size_the_autoscaler_moved_is_no_change_and_an_upgrade_sends_only_the_version():
    """The provider sends min, max and desired together, after UpdateNodegroupVersion (terraform-provider-aws
    internal/service/eks/node_group.go@012e0a32): the live size read when `up` started, sent as a change,
    reached EKS after the rolling upgrade and undid the autoscaler, and every preview showed it. With min and
    max unchanged the state's desired size is repeated (ignoreChanges): no scaling change is planned."""
    moved = {"gpu-t4-us-west-2a": 5, "manager-us-west-2a": 1}
    p, _, new = plan(BASE, BASE, desired=moved)
    # "ignored": only the ignored desired size differs from the recorded inputs; nothing is sent
    assert {a for (t, _), (a, _) in p.items() if t == "aws:eks/nodeGroup:NodeGroup"} == {"unchanged", "ignored"}
    group = new.one("aws:eks/nodeGroup:NodeGroup", "torchfleet-aws-nodes-gpu-t4-us-west-2a")
    assert "scalingConfig.desiredSize" in group.options["ignoreChanges"]
    p, _, new = plan(BASE, with_(kubernetesVersion="1.35"), desired=moved)
    for (t, n), (action, paths) in p.items():
        if t == "aws:eks/nodeGroup:NodeGroup":
            ignored = new.one(t, n).options.get("ignoreChanges") or []
            assert (action, [x for x in paths if x not in ignored]) == ("update", ["version"]), n
    # min or max changed: the live size is sent, the state's is not repeated
    _, _, new = plan(BASE, with_(gpuPools=[{"gpu": "t4", "maxNodes": 4}]), desired={"gpu-t4-us-west-2a": 6})
    group = new.one("aws:eks/nodeGroup:NodeGroup", "torchfleet-aws-nodes-gpu-t4-us-west-2a")
    assert "scalingConfig.desiredSize" not in (group.options.get("ignoreChanges") or [])


# ---------------------------------------------------------------- Kubernetes minor, twice


def test_minor_upgraded_moves_control_plane_node_groups_and_addons_in_place_in_eks_order():
    p, _, new = plan(BASE, with_(kubernetesVersion="1.35"))
    assert changed(p, "replace") == []
    updated = changed(p, "update")
    assert ("Cluster", "torchfleet-aws-control-eks") in updated
    groups = new.of_type("aws:eks/nodeGroup:NodeGroup")
    assert all(g.inputs["version"] == "1.35" for g in groups)
    assert all((t, g.name) in [(t, n) for t, n in updated] for g in groups for t in ["NodeGroup"])
    cluster = new.one("aws:eks/cluster:Cluster")
    kube_proxy = next(r for r in new.of_type("aws:eks/addon:Addon") if r.inputs["addonName"] == "kube-proxy")
    deps = new.depends_on(kube_proxy)
    assert cluster.key in deps and all(g.key in deps for g in groups)  # control plane, nodes, then add-ons
    # the second minor in a row, from the cluster the first left running
    p2, _, _ = plan(with_(kubernetesVersion="1.35"), with_(kubernetesVersion="1.36"))
    assert ("Cluster", "torchfleet-aws-control-eks") in changed(p2, "update")


def test_a_minor_upgrade_plans_every_addon_at_the_new_minors_version():
    """EKS names each add-on's default version per minor (addons.py); the mock answered one version for every
    minor, so `torchfleet plan` of 1.35 -> 1.36 showed no add-on update. Fails on that mock."""
    result = day2.plan_configs("day2", with_(kubernetesVersion="1.35"), with_(kubernetesVersion="1.36"))
    addons = [c for c in result.changes if c.type == "aws:eks/addon:Addon"]
    assert len(addons) == 6
    for c in addons:
        assert c.action == "update" and "addonVersion" in c.paths, (c.name, c.action, c.paths)


def test_two_minors_in_one_change_are_refused_at_preview_and_offline():
    with pytest.raises(ConfigError, match=r"torchfleet:kubernetesVersion: .*one minor at a time: set \"1.35\""):
        plan(BASE, with_(kubernetesVersion="1.36"))
    refused = aws_day2.minor_step(ConfigChange(ok(BASE), ok(with_(kubernetesVersion="1.36")), BASE, {}))
    assert [r.key for r in refused] == ["torchfleet:kubernetesVersion"]
    # registered with the day-2 engine's refusal hook, so `torchfleet plan` says it
    change = ConfigChange(ok(BASE), ok(with_(kubernetesVersion="1.36")), BASE, with_(kubernetesVersion="1.36"))
    assert "torchfleet:kubernetesVersion" in [r.key for r in refusal_rules.refusals(change)]
    assert aws_day2.minor_step(ConfigChange(ok(BASE), ok(with_(kubernetesVersion="1.35")), BASE, {})) == []


# ---------------------------------------------------------------- admins, endpoint, store


def test_admins_rotated_with_the_deployer_listed_keep_one_entry_per_principal():
    """Before: EKS's creator entry plus an explicit one for the same deployer: 409 ResourceInUseException."""
    alice, bob = "arn:aws:iam::123456789012:role/alice", "arn:aws:iam::123456789012:role/bob"
    p, old, new = plan(with_(admins=[DEPLOYER, alice]), with_(admins=[DEPLOYER, bob]))
    for result in (old, new):
        arns = [e.inputs["principalArn"] for e in result.of_type("aws:eks/accessEntry:AccessEntry")]
        assert len(arns) == len(set(arns)) and DEPLOYER in arns
        assert result.one("aws:eks/cluster:Cluster").inputs["accessConfig"][
            "bootstrapClusterCreatorAdminPermissions"] is False
    kinds = {(a, p_[0]) for (t, n), p_ in p.items() if t == "aws:eks/accessEntry:AccessEntry" for a in [n]}
    assert {k for _, k in kinds} == {"unchanged", "create", "delete"}  # the deployer's stays, bob in, alice out
    entry = new.one("aws:eks/accessEntry:AccessEntry", next(n for (t, n), (a, _) in p.items()
                                                             if t.endswith("AccessEntry") and a == "create"))
    assert entry.options["deleteBeforeReplace"]


def test_admins_rotated_without_the_deployer_delete_its_entry_and_no_preview_adds_the_caller():
    """Review: the program added an entry for whoever ran it, so the CI role's preview planned an admin entry
    for itself and the deletion of the last deployer's. torchfleet:admins is the one source now: the caller
    (the mock's, DEPLOYER) gets nothing implicit, and rotating the deployer out deletes exactly its entry."""
    alice, bob = "arn:aws:iam::123456789012:role/alice", "arn:aws:iam::123456789012:role/bob"
    assert synth_config("day2", BASE).of_type("aws:eks/accessEntry:AccessEntry") == []
    p, old, new = plan(with_(admins=[DEPLOYER, alice]), with_(admins=[alice, bob]))
    arns = [sorted(e.inputs["principalArn"] for e in r.of_type("aws:eks/accessEntry:AccessEntry")) for r in (old, new)]
    assert arns == [[alice, DEPLOYER], [alice, bob]]
    entries = {a for (t, _), (a, _) in p.items() if t == "aws:eks/accessEntry:AccessEntry"}
    assert entries == {"unchanged", "create", "delete"}
    assert changed(p, "replace") == []


def test_up_by_an_identity_not_in_admins_is_refused_before_anything_and_preview_is_not(monkeypatch):
    """At `pulumi up` (never at preview, the CI role's) the caller's role must be in torchfleet:admins, or the
    up would create the cluster and be refused on every Kubernetes resource after it."""
    from components.clouds.aws import admins as aws_admins

    assert aws_admins.running_up() is False  # the offline synth stands in for a preview
    alice = "arn:aws:iam::123456789012:role/alice"
    synth_config("day2", with_(admins=[alice]))  # preview: no refusal
    monkeypatch.setattr(aws_admins, "running_up", lambda: True)
    with pytest.raises(ConfigError, match=r"torchfleet:admins: does not list arn:aws:iam::123456789012:user/deployer"
                                          r".*pulumi config set --path 'torchfleet:admins\[1\]'"):
        synth_config("day2", with_(admins=[alice]))
    result = synth_config("day2", with_(admins=[alice, DEPLOYER]))
    assert len(result.of_type("aws:eks/accessEntry:AccessEntry")) == 2


def test_a_cluster_made_with_the_creator_entry_is_not_replaced_and_gets_no_second_one():
    force_new = RULES["types"]["aws:eks/cluster:Cluster"]["forceNew"]
    assert "accessConfig.bootstrapClusterCreatorAdminPermissions" in force_new
    mock_aws.LIVE_CLUSTERS.clear()
    old = synth_config("day2", BASE)
    live = live_from(old)
    next(iter(live.values()))["bootstrap"] = True
    mock_aws.LIVE_CLUSTERS.update(live)
    try:
        new = synth_config("day2", BASE)
    finally:
        mock_aws.LIVE_CLUSTERS.clear()
    cluster = new.one("aws:eks/cluster:Cluster")
    assert "accessConfig.bootstrapClusterCreatorAdminPermissions" in cluster.options["ignoreChanges"]
    assert new.of_type("aws:eks/accessEntry:AccessEntry") == []  # EKS's own entry is the creator's


def test_public_to_private_endpoint_is_an_update_plus_the_private_path_rule():
    private = with_(network={"privateOnly": True, "privateAccessCidrs": ["10.8.0.0/16"]})
    p, _, new = plan(BASE, private)
    assert p[("aws:eks/cluster:Cluster", "torchfleet-aws-control-eks")] == (
        "update", ["vpcConfig.endpointPublicAccess", "vpcConfig.publicAccessCidrs"])
    [rule] = new.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
    assert (rule.inputs["cidrIpv4"], rule.inputs["fromPort"], rule.inputs["toPort"]) == ("10.8.0.0/16", 443, 443)


def test_store_protect_changed_only_changes_what_destroy_keeps():
    p, old, new = plan(BASE, with_(storage={"protect": False}))
    assert changed(p, "replace") == [] and changed(p, "delete") == [] and changed(p, "create") == []
    for t in ("aws:efs/fileSystem:FileSystem", "aws:efs/backupPolicy:BackupPolicy",
              "aws:efs/fileSystemPolicy:FileSystemPolicy"):
        assert old.one(t).options["retainOnDelete"] is True and not new.one(t).options.get("retainOnDelete")


def test_up_again_after_destroy_with_adopt_imports_the_store_and_its_policies():
    mock_aws.LIVE_CLUSTERS.clear()  # destroyed: no cluster
    again = synth_config("day2", with_(storage={"protect": True, "adopt": True}))
    imported = {r.type: r.options["import"] for r in again.resources if r.options.get("import")}
    assert imported["aws:efs/fileSystem:FileSystem"] == imported["aws:efs/backupPolicy:BackupPolicy"] == \
        imported["aws:efs/fileSystemPolicy:FileSystemPolicy"] == "fs-0adopted"


def test_every_aws_type_the_stack_registers_has_a_force_new_row():
    result = synth_config("day2", with_(admins=[DEPLOYER], network={"privateOnly": True,
                                                                   "privateAccessCidrs": ["10.8.0.0/16"]}))
    types = {r.type for r in result.resources if r.custom and r.type.startswith("aws:")}
    assert types - set(RULES["types"]) == set()


def test_spec_refuses_one_zone_and_a_missing_endpoint_choice():
    from tests.components.spec.configs import problems

    found = problems(config("aws", zones=["us-west-2a"], network={}))
    assert "at least 2 zones on aws" in found["torchfleet:zones"][0]
    assert "required on aws" in found["torchfleet:network.publicAccessCidrs"][0]
    found = problems(config("aws", network={"privateOnly": True}))
    assert "required with torchfleet:network.privateOnly" in found["torchfleet:network.privateAccessCidrs"][0]
    found = problems(config("aws", network={**BASE["torchfleet:network"], "clusterZones": ["us-west-2c"]}))
    assert "torchfleet:network.clusterZones[0]" in found


def test_torchfleet_plan_runs_the_change_against_the_cluster_the_stack_leaves_running():
    """`torchfleet plan` (day2.plan_configs) answers live.py's reads from the old program's resources:
    adding a zone leaves the control plane alone, removing one it uses is refused naming the key."""
    three = with_(zones=["us-west-2a", "us-west-2b", "us-west-2c"])
    result = day2.plan_configs("day2", BASE, three)
    assert result.get("aws:eks/cluster:Cluster", "torchfleet-aws-control-eks").action == "unchanged"
    assert not result.by_action("replace") and not result.collisions
    with pytest.raises(ConfigError, match="torchfleet:zones: the control plane uses subnets in us-west-2a"):
        day2.plan_configs("day2", three, with_(zones=["us-west-2b", "us-west-2c"]))
    assert mock_aws.LIVE_CLUSTERS == {}  # left as it was


def test_extended_support_is_a_choice_and_an_eks_only_key():
    from tests.components.spec.configs import problems

    assert ok(BASE).kubernetes_support == "STANDARD"
    assert ok(with_(kubernetesSupport="EXTENDED")).kubernetes_support == "EXTENDED"
    assert "must be one of STANDARD, EXTENDED" in problems(with_(kubernetesSupport="forever"))[
        "torchfleet:kubernetesSupport"][0]
    assert "an EKS setting" in problems(config("gcp", kubernetesSupport="EXTENDED"))["torchfleet:kubernetesSupport"][0]
    result = synth_config("day2", with_(kubernetesSupport="EXTENDED"))
    assert result.one("aws:eks/cluster:Cluster").inputs["upgradePolicy"] == {"supportType": "EXTENDED"}


# ---- the CPU pool and the manager pool's taint (issue 30) ----------------------------------------------------------


def test_a_cpu_pool_added_creates_its_groups_and_replaces_nothing():
    """torchfleet:cpuPool added to a running stack: a node group, a launch template and the template tags per
    zone; the autoscaler's policy is updated to scale them; the cluster, the store and every other group stay."""
    changes, _, _ = plan(BASE, {**BASE, "torchfleet:cpuPool": {"machineType": "m6i.large", "maxNodes": 2}})
    acted = {key: action for key, (action, _) in changes.items() if action != "unchanged"}
    assert {action for action in acted.values()} <= {"create", "update"}, acted
    created = {name for (type_, name), action in acted.items() if action == "create"}
    assert {n for n in created if "nodeGroup" in n or n.endswith(("cpu-us-west-2a", "cpu-us-west-2b"))} == {
        "torchfleet-aws-nodes-cpu-us-west-2a", "torchfleet-aws-nodes-cpu-us-west-2b"}
    updated = {type_ for (type_, _), action in acted.items() if action == "update"}
    assert updated <= {"aws:iam/rolePolicy:RolePolicy"}, updated  # the autoscaler may scale the new groups
    assert not any(t.startswith(("aws:eks/cluster", "aws:efs/")) for t, _ in acted), acted


def test_the_manager_groups_taint_is_an_in_place_update():
    """The manager groups' taint (issue 30) reaches a running group as a program change: EKS takes taints in
    UpdateNodegroupConfig (nodegroups.py), and force_new/aws.yaml's NodeGroup row, from node_group.go, does not list
    taints (a set there: its order means nothing)."""
    rule = force_new_rules.shipped().get("aws:eks/nodeGroup:NodeGroup")
    assert rule is not None and rule.force_new and "taints" in rule.sets
    assert not [f for f in rule.force_new if force_new_rules.covers(f, "taints[0].key")]
