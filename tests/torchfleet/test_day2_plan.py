"""`torchfleet plan` (torchfleet/preview/day2.py): the offline plan of a config change.

Pure tests on recorded resources built by hand (the diff, ignoreChanges, replacement order, collisions,
cascades through a replaced provider and through property dependencies), then the mock synth of real
stacks (the local stack with the shipped Kubernetes rules; the Azure stack with a rules folder of the
test's own, so a rule that forces a replacement is known), then the command's exit codes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s
import pytest
import yaml

from components.clouds import day2 as refusal_rules
from tests.harness import STACKS_DIR
from torchfleet.cli import main
from torchfleet.preview import day2, force_new_rules
from torchfleet.preview.force_new_rules import FOLDER
from torchfleet.preview.mocks import TorchfleetMocks
from torchfleet.preview.monitor import Recorded, RecordingMonitor
from torchfleet.preview.stack_file import StackFileError

# Their plans synthesize the same old config again and again: synthesized once (tests/harness/synth_cache.py).
pytestmark = pytest.mark.usefixtures("memoized_synth")

CLUSTER = "azure-native:containerservice:ManagedCluster"
POOL = "azure-native:containerservice:AgentPool"


def rules_folder(tmp_path: Path, azure_types: dict) -> force_new_rules.Rules:
    """The shipped kubernetes.yaml and an azure.yaml of the test's own rows."""
    folder = tmp_path / "force_new"
    folder.mkdir()
    (folder / "kubernetes.yaml").write_text((FOLDER / "kubernetes.yaml").read_text())
    (folder / "azure.yaml").write_text(yaml.safe_dump({
        "source": {"provider": "pulumi-azure-native", "version": "0.0.0", "file": "a test's rows"},
        "date": "2026-11-28",
        "types": {t: {"forceNew": paths, "source": "the test"} for t, paths in azure_types.items()},
    }))
    return force_new_rules.load(folder)


def rec(type_: str, name: str, inputs: dict, urn: str | None = None, **options) -> Recorded:
    opts = {"ignoreChanges": [], "replaceOnChanges": [], "dependencies": [], "propertyDependencies": {},
            "provider": "", **options}
    return Recorded(type_, name, None, True, inputs, inputs, opts, urn or f"urn:{type_}::{name}")


# ---- pure -----------------------------------------------------------------------------------------

def test_changed_paths_go_as_deep_as_both_sides():
    old = {"a": {"b": 1, "c": [1, 2]}, "tags": {"k8s.io/x": "1"}, "gone": True, "__provider": "x"}
    new = {"a": {"b": 2, "c": [1, 3, 4]}, "tags": {"k8s.io/x": "2"}, "added": {"x": 1}, "__provider": "y"}
    assert day2.changed_paths(old, new) == ["a.b", "a.c[1]", "a.c[2]", 'tags["k8s.io/x"]', "gone", "added"]
    assert day2.changed_paths({"n": 3.0, "f": False}, {"n": 3, "f": False}) == []
    assert day2.changed_paths({"f": 0}, {"f": False}) == ["f"]  # a bool is not a number


@pytest.mark.parametrize(("rule", "changed", "covered"), [
    ("vpcConfig.subnetIds", "vpcConfig.subnetIds[1]", True),
    ("spec.containers[].image", "spec.containers[0].image", True),
    ("spec.containers.image", "spec.containers[2].image", True),  # lists are transparent
    ("spec.selector", 'spec.selector.matchLabels["app"]', True),
    ("spec.selector", "spec.selectorX", False),
    ("metadata.name", "metadata.namespace", False),
    ("networks.reservedIpRange", "networks", True),  # the whole list changed: what is under it too
])
def test_covers(rule, changed, covered):
    assert force_new_rules.covers(rule, changed) is covered


@pytest.mark.parametrize(("path", "ignore", "ignored"), [
    ("count", "count", True),
    ("scalingConfig.desiredSize", "scalingConfig", True),
    ("agentPoolProfiles[0].count", "agentPoolProfiles[*].count", True),
    ("agentPoolProfiles[1].count", "agentPoolProfiles[0].count", False),  # that item only
    ('tags["k8s.io/x"]', "tags", True),
    ("countX", "count", False),
])
def test_ignore_changes_paths(path, ignore, ignored):
    assert day2._ignored(path, [ignore]) is ignored


def test_a_forcenew_input_replaces_create_first_and_collides_on_the_fixed_name(tmp_path):
    rules = rules_folder(tmp_path, {CLUSTER: ["location"]})
    old = [rec(CLUSTER, "c", {"resourceName": "aks-1", "location": "eastus", "tier": "Free"})]
    new = [rec(CLUSTER, "c", {"resourceName": "aks-1", "location": "westus", "tier": "Free"})]
    [change] = day2.classify(old, new, rules)
    assert (change.action, change.order, change.collides) == ("replace", "create-first", "aks-1")
    assert change.replaced_by == ["location (forceNew location, the test)"]


def test_delete_before_replace_and_a_new_name_never_collide(tmp_path):
    rules = rules_folder(tmp_path, {CLUSTER: ["location"]})
    old = [rec(CLUSTER, "c", {"resourceName": "aks-1", "location": "eastus"}),
           rec(CLUSTER, "d", {"resourceName": "aks-2", "location": "eastus"}, deleteBeforeReplace=True)]
    new = [rec(CLUSTER, "c", {"resourceName": "aks-9", "location": "westus"}),
           rec(CLUSTER, "d", {"resourceName": "aks-2", "location": "westus"}, deleteBeforeReplace=True)]
    renamed, dbr = day2.classify(old, new, rules)
    assert (renamed.action, renamed.order, renamed.collides) == ("replace", "create-first", None)
    assert (dbr.action, dbr.order, dbr.collides) == ("replace", "delete-first", None)


def test_other_inputs_update_in_place_and_ignore_changes_are_ignored(tmp_path):
    rules = rules_folder(tmp_path, {POOL: ["vmSize"]})
    old = [rec(POOL, "p", {"agentPoolName": "gpu", "vmSize": "a", "count": 0, "maxCount": 3},
               ignoreChanges=["count"]),
           rec(POOL, "q", {"agentPoolName": "gpu2", "vmSize": "a", "count": 0}, ignoreChanges=["count"])]
    new = [rec(POOL, "p", {"agentPoolName": "gpu", "vmSize": "a", "count": 1, "maxCount": 4},
               ignoreChanges=["count"]),
           rec(POOL, "q", {"agentPoolName": "gpu2", "vmSize": "a", "count": 1}, ignoreChanges=["count"])]
    update, ignored = day2.classify(old, new, rules)
    assert (update.action, update.paths, update.ignored) == ("update", ["count", "maxCount"], ["count"])
    assert (ignored.action, ignored.ignored) == ("ignored", ["count"])


def test_an_ignored_forcenew_input_does_not_replace(tmp_path):
    """Pulumi sends the old value of an ignored input: the provider never sees it change."""
    rules = rules_folder(tmp_path, {POOL: ["vmSize"]})
    old = [rec(POOL, "p", {"vmSize": "a"}, ignoreChanges=["vmSize"])]
    new = [rec(POOL, "p", {"vmSize": "b"}, ignoreChanges=["vmSize"])]
    assert day2.classify(old, new, rules)[0].action == "ignored"


def test_replace_on_changes_forces_a_replacement_without_a_row(tmp_path):
    rules = rules_folder(tmp_path, {})
    old = [rec(POOL, "p", {"enableEncryptionAtHost": False}, replaceOnChanges=["enableEncryptionAtHost"])]
    new = [rec(POOL, "p", {"enableEncryptionAtHost": True}, replaceOnChanges=["enableEncryptionAtHost"])]
    change = day2.classify(old, new, rules)[0]
    assert change.action == "replace" and "replaceOnChanges" in change.replaced_by[0]


def test_a_type_without_a_row_is_unknown_naming_the_file(tmp_path):
    rules = rules_folder(tmp_path, {})
    old, new = [rec("aws:eks/cluster:Cluster", "c", {"version": "1.34"})], [rec("aws:eks/cluster:Cluster", "c",
                                                                              {"version": "1.35"})]
    change = day2.classify(old, new, rules)[0]
    assert change.action == "unknown" and "force_new/aws.yaml" in change.note


def test_a_replaced_provider_replaces_what_it_manages_and_dependents_follow(tmp_path):
    """The cluster replaced under a new name: its id feeds the Kubernetes provider's clusterIdentifier
    (forceNew), unknown until the new cluster exists, which replaces the provider and every object it
    manages, and the pool whose cluster input is forceNew. The engine replaces a replaced provider's
    resources without their provider's diff (pulumi/pulumi step_generator.go providerChanged: ReplaceKeys
    ["provider"]), so only the deleteBeforeReplace option orders them: create-first, in the new cluster."""
    rules = rules_folder(tmp_path, {CLUSTER: ["location", "resourceName"], POOL: ["resourceName"]})
    cluster_urn, provider_urn = "urn:cluster", "urn:provider"
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "train"}}

    def program(cluster_name: str) -> list[Recorded]:
        return [
            rec(CLUSTER, "c", {"resourceName": cluster_name, "location": "eastus"}, urn=cluster_urn),
            rec("pulumi:providers:kubernetes", "k8s", {"clusterIdentifier": "c-id"}, urn=provider_urn,
                propertyDependencies={"clusterIdentifier": [cluster_urn]}),
            rec("kubernetes:core/v1:Namespace", "ns", ns, provider=f"{provider_urn}::k8s-id"),
            rec(POOL, "pool", {"resourceName": "c-id", "count": 1},
                propertyDependencies={"resourceName": [cluster_urn], "count": [cluster_urn]}),
        ]

    cluster, provider, namespace, pool = day2.classify(program("aks-1"), program("aks-2"), rules)
    assert cluster.action == "replace"
    assert provider.action == "replace" and "clusterIdentifier (unknown" in provider.replaced_by[0]
    assert (namespace.action, namespace.order, namespace.collides) == ("replace", "create-first", None)
    assert namespace.replaced_by == ["its provider k8s is replaced"]
    assert pool.action == "replace" and pool.replaced_by == [
        f"resourceName (unknown until the new {CLUSTER}::c exists)"]  # count is not forceNew


def test_a_replacement_under_the_same_fixed_name_keeps_what_is_made_of_it(tmp_path):
    """Replaced under the same cloud name (delete-first): ids and ARNs made of the name stay, so the
    provider's clusterIdentifier is the same and nothing follows."""
    rules = rules_folder(tmp_path, {CLUSTER: ["location"]})
    cluster_urn = "urn:cluster"

    def program(location: str) -> list[Recorded]:
        return [
            rec(CLUSTER, "c", {"resourceName": "aks", "location": location}, urn=cluster_urn,
                deleteBeforeReplace=True),
            rec("pulumi:providers:kubernetes", "k8s", {"clusterIdentifier": "c-id"},
                propertyDependencies={"clusterIdentifier": [cluster_urn]}),
        ]

    cluster, provider = day2.classify(program("eastus"), program("westus"), rules)
    assert (cluster.action, provider.action) == ("replace", "unchanged")


def test_deleted_resources_say_whether_the_up_keeps_or_fails_on_them(tmp_path):
    rules = rules_folder(tmp_path, {})
    old = [rec(POOL, "kept", {}, retainOnDelete=True), rec(POOL, "locked", {}, protect=True), rec(POOL, "gone", {})]
    kept, locked, gone = day2.classify(old, [], rules)
    assert [c.action for c in (kept, locked, gone)] == ["delete"] * 3
    assert kept.note.startswith("kept") and locked.note.startswith("protected") and gone.note == ""


def test_a_replaced_store_is_refused():
    change = day2.ResourceChange("replace", "azure-native:storage:FileShare", "share", replaced_by=["x (forceNew)"])
    [refusal] = day2.store_refusals([change], "azure")
    assert refusal.key == "azure-native:storage:FileShare::share" and "checkpoints" in refusal.reason


NET = {"cidr": "10.0.0.0/16"}


@pytest.mark.parametrize(("key", "value", "expected"), [
    ("torchfleet:zones", ["b"], {"torchfleet:zones": ["b"], "torchfleet:network": NET}),
    ("torchfleet:network.cidr", "10.1.0.0/16",
     {"torchfleet:zones": ["a"], "torchfleet:network": {"cidr": "10.1.0.0/16"}}),
    ("torchfleet:network.publicAccessCidrs", ["203.0.113.7/32"],
     {"torchfleet:zones": ["a"], "torchfleet:network": {**NET, "publicAccessCidrs": ["203.0.113.7/32"]}}),
    ("torchfleet:zones[1]", "c", {"torchfleet:zones": ["a", "c"], "torchfleet:network": NET}),
    ("torchfleet:network", None, {"torchfleet:zones": ["a"]}),
])
def test_apply_changes(key, value, expected):
    config = {"torchfleet:zones": ["a"], "torchfleet:network": {"cidr": "10.0.0.0/16"}}
    assert day2.apply_changes(config, {key: value}) == expected
    assert config == {"torchfleet:zones": ["a"], "torchfleet:network": {"cidr": "10.0.0.0/16"}}  # not modified


@pytest.mark.parametrize(("text", "message"), [
    ("torchfleet:zones", "expected KEY=VALUE"),
    ("zones=[a]", "namespace:name"),
    ("torchfleet:zones=[a", "not valid YAML"),
])
def test_bad_set_names_the_problem(text, message):
    with pytest.raises(StackFileError, match=message):
        day2.parse_set(text)


def test_set_through_a_scalar_is_refused():
    with pytest.raises(StackFileError, match="torchfleet:zones"):
        day2.apply_changes({"torchfleet:zones": "a"}, {"torchfleet:zones.x": 1})


# ---- mock synth -----------------------------------------------------------------------------------

def test_local_namespace_change_replaces_named_objects_delete_first():
    """The shipped Kubernetes rules: a new training namespace makes every object in it anew (new URNs),
    and the cluster-scoped volumes, whose names follow the namespace, are replaced with new names."""
    plan = day2.plan_stack_file(STACKS_DIR / "Pulumi.local.yaml", {"torchfleet:training.namespace": "elastic-two"})
    assert plan.refusals == [] and plan.collisions == []
    assert plan.get("kubernetes:core/v1:Namespace", "torchfleet-training-elastic-two").action == "create"
    assert plan.get("kubernetes:core/v1:Namespace", "torchfleet-training-elastic-job").action == "delete"
    volume = plan.get("kubernetes:core/v1:PersistentVolume", "torchfleet-training-shared-volume")
    assert volume.action == "replace" and "metadata.name" in volume.paths
    assert not plan.by_action("unknown")


def test_local_etcd_replicas_is_an_update():
    plan = day2.plan_stack_file(STACKS_DIR / "Pulumi.local.yaml", {"torchfleet:training.etcdReplicas": 3})
    changed = [c for c in plan.changes if c.action != "unchanged"]
    assert changed and {c.action for c in changed} <= {"update", "create"}, [(c.key, c.action) for c in changed]
    assert plan.get("kubernetes:apps/v1:StatefulSet", "torchfleet-training-elastic-job/etcd").action == "update"


SHARE = "azure-native:storage:FileShare"


@pytest.fixture(scope="module")
def azure_store_size_plan(tmp_path_factory):
    """Rules of the test's own (not the provider's): a new share quota replaces the share, a new Kubernetes
    version the AKS cluster. The synth shows the share's create-first collision on its fixed name (and the
    store refusal), the auto-named cluster's replacement without one, and the cascade through the provider."""
    rules = rules_folder(tmp_path_factory.mktemp("rules"), {CLUSTER: ["kubernetesVersion"], SHARE: ["shareQuota"]})
    config = yaml.safe_load((STACKS_DIR / "Pulumi.azure-eus.yaml").read_text())["config"]
    new = day2.apply_changes(config, {"torchfleet:kubernetesVersion": "1.34", "torchfleet:storage.sizeGb": 2048})
    return day2.plan_configs("azure-eus", config, new, rules)


def test_mock_synth_rule_forces_a_replacement_that_collides(azure_store_size_plan):
    plan = azure_store_size_plan
    [share] = [c for c in plan.changes if c.type == SHARE]
    assert (share.action, share.order, share.collides) == ("replace", "create-first", "shared")
    assert plan.collisions == [share]
    assert share.key in [r.key for r in plan.refusals]  # the store's data: refused whatever the cloud's rules
    [cluster] = [c for c in plan.changes if c.type == CLUSTER]
    assert (cluster.action, cluster.order, cluster.collides) == ("replace", "create-first", None)  # auto-named
    provider = next(c for c in plan.changes if c.type == "pulumi:providers:kubernetes")
    assert provider.action == "replace"
    namespaces = [c for c in plan.changes if c.type == "kubernetes:core/v1:Namespace"]
    assert namespaces and all(c.action == "replace" and c.collides is None for c in namespaces)


def record(program) -> list[Recorded]:
    """What a small program registers, through the same mocks and recording monitor as runner.synth: the
    options (ignoreChanges, deleteBeforeReplace) reach classify as the engine receives them."""
    monitor = RecordingMonitor(TorchfleetMocks())
    pulumi.runtime.set_mocks(TorchfleetMocks(), project="torchfleet", stack="t", preview=False, monitor=monitor)
    pulumi.runtime.test(program)()
    return list(monitor.recorded)


def config_maps(data: str):
    def program():
        meta = {"name": "settings", "namespace": "train"}
        k8s.core.v1.ConfigMap("ignored", metadata=meta, data={"a": data},
                              opts=pulumi.ResourceOptions(ignore_changes=["data"]))
        k8s.core.v1.ConfigMap("replaced", metadata={**meta, "name": "other"}, data={"a": data})
        k8s.core.v1.Namespace("updated", metadata={"name": "train", "labels": {"v": data}})
    return program


def test_mock_synth_ignore_changes_beats_a_forcenew_input():
    """The shipped Kubernetes rules: a ConfigMap's data replaces it (enableConfigMapMutable is off), delete-first
    under its own name; with ignoreChanges on data the same change is ignored; a Namespace's labels update."""
    old, new = record(config_maps("1")), record(config_maps("2"))
    changes = {c.name: c for c in day2.classify(old, new, force_new_rules.shipped())}
    assert (changes["ignored"].action, changes["ignored"].ignored) == ("ignored", ['data.a'])
    assert (changes["replaced"].action, changes["replaced"].order) == ("replace", "delete-first")
    assert changes["replaced"].collides is None
    assert (changes["updated"].action, changes["updated"].paths) == ("update", ['metadata.labels.v'])


@pytest.mark.parametrize("stack", ["gcp-usc1", "azure-eus"])
def test_a_bigger_store_grows_the_volumes_and_leaves_the_claims(stack):
    """Regression: storage.sizeGb fed each shared claim's request too, an update the API server refuses for a
    statically bound claim (tests/controlplane/test_claim_resize.py); the claims now ignore it."""
    plan = day2.plan_stack_file(STACKS_DIR / f"Pulumi.{stack}.yaml", {"torchfleet:storage.sizeGb": 4096})
    claims = [c for c in plan.changes if c.type == "kubernetes:core/v1:PersistentVolumeClaim" and c.paths]
    volumes = [c for c in plan.changes if c.type == "kubernetes:core/v1:PersistentVolume" and c.paths]
    assert claims and all(c.action == "ignored" for c in claims), [(c.key, c.action) for c in claims]
    assert volumes and all(c.action == "update" and c.paths == ["spec.capacity.storage"] for c in volumes)


# ---- refusal hook and the command -----------------------------------------------------------------

def test_every_cloud_day2_module_registers_a_list_of_rules():
    for cloud in ("aws", "gcp", "azure", "local"):
        rules = refusal_rules.rules_for(cloud)
        assert rules[: len(refusal_rules.COMMON_RULES)] == refusal_rules.COMMON_RULES
        assert all(callable(r) for r in rules)


def write_stack(tmp_path: Path, stack: str, **changes) -> Path:
    config = yaml.safe_load((STACKS_DIR / f"Pulumi.{stack}.yaml").read_text())["config"]
    path = tmp_path / f"Pulumi.{stack}.yaml"
    path.write_text(yaml.safe_dump({"config": {**config, **changes}}))
    return path


def test_plan_command_refuses_a_region_change(capsys, tmp_path):
    against = write_stack(tmp_path, "azure-eus", **{"azure-native:location": "westus2"})
    code = main(["plan", "--stack", "azure-eus", "--against", str(against)])
    out, _ = capsys.readouterr()
    assert code == 2
    assert "REFUSED" in out and "azure-native:location: eastus -> westus2" in out


def test_plan_command_refuses_with_a_registered_rule(capsys, monkeypatch):
    """The hook: a cloud's rule is asked with both specs and its refusal ends the command with exit 2."""
    seen = []

    def rule(change: refusal_rules.ConfigChange):
        seen.append((change.old.training.etcd_replicas, change.new.training.etcd_replicas))
        return [refusal_rules.Refusal("torchfleet:training", "a test's refusal", "do it in two steps")]

    monkeypatch.setattr(refusal_rules, "COMMON_RULES", [rule])
    code = main(["plan", "--stack", "local", "--set", "torchfleet:training.etcdReplicas=3", "--json"])
    out, _ = capsys.readouterr()
    assert code == 2 and seen == [(1, 3)]
    assert json.loads(out)["refused"] == [{"key": "torchfleet:training", "reason": "a test's refusal",
                                           "instead": "do it in two steps"}]


def test_plan_command_applies_a_clean_change(capsys):
    code = main(["plan", "--stack", "local", "--set", "torchfleet:training.etcdReplicas=3"])
    out, _ = capsys.readouterr()
    assert code == 0 and "update in place" in out and "REFUSED" not in out


@pytest.mark.parametrize(("argv", "message"), [
    (["plan", "--stack", "local"], "--set KEY=VALUE"),
    (["plan", "--stack", "local", "--set", "zones=[a]"], "namespace:name"),
    (["plan", "--stack", "local", "--set", "torchfleet:training.etcdReplicas=0"], "etcdReplicas"),
    (["plan", "--stack", "local", "--against", "nowhere/Pulumi.x.yaml"], "--against"),
])
def test_plan_command_bad_input_exits_2(capsys, argv, message):
    code = main(argv)
    _, err = capsys.readouterr()
    assert code == 2 and message in err, err


def test_plan_command_refuses_a_change_that_breaks_a_guardrail(capsys):
    """The same rules `torchfleet check` runs, on the changed config: raising the T4 pool to 16 nodes in each of
    its two zones reaches 34 GPUs over aws-usw2's guardrails.maxGpus=32 (it was `2 update`, exit 0)."""
    code = main(["plan", "--stack", "aws-usw2", "--set", "torchfleet:gpuPools[0].maxNodes=16"])
    out, err = capsys.readouterr()
    assert code == 2, out + err
    assert "REFUSED by the guardrails" in out
    [line] = [line for line in out.splitlines() if "gpu-count-cap" in line]
    assert "34 GPUs" in line and "guardrails.maxGpus=32" in line
    assert "this change breaks it (torchfleet:gpuPools[0].maxNodes)" in line
    assert "torchfleet:guardrails.maxGpus" in line.split("instead:")[1]
    # check's cost, before and after: the maximum grows by the T4 pool's 16 more nodes, idle does not.
    assert re.search(r"^cost, every pool at maxNodes: at most (\d+\.\d\d) -> (\d+\.\d\d) USD/hour \(\+\d+\.\d\d\)$",
                     out, re.M), out
    assert re.search(r"^cost, idle \(no job running\): at most .* USD/hour \(unchanged\)$", out, re.M), out


def test_plan_json_names_the_guardrail_and_a_change_within_it_applies(capsys):
    code = main(["plan", "--stack", "aws-usw2", "--set", "torchfleet:guardrails.maxGpus=8", "--json"])
    out, _ = capsys.readouterr()
    assert code == 2
    [broken] = json.loads(out)["guardrails"]
    assert broken["rule"] == "gpu-count-cap" and broken["guardrailKey"] == "torchfleet:guardrails.maxGpus"
    assert broken["changed"] == ["torchfleet:guardrails.maxGpus"] and broken["before"] is False
    code = main(["plan", "--stack", "aws-usw2", "--set", "torchfleet:gpuPools[0].maxNodes=4", "--json"])
    plan = json.loads(capsys.readouterr().out)
    assert code == 0 and plan["guardrails"] == []
    maximum = plan["cost"][0]
    assert maximum["what"] == "every pool at maxNodes" and maximum["afterUsdPerHour"] < maximum["beforeUsdPerHour"]


def test_a_guardrail_broken_before_the_change_says_so():
    from components import policy
    from torchfleet.preview.guardrails import GuardrailRefusal

    v = policy.Violation("store-encrypted", "fs", "not encrypted")
    assert "before this change" in GuardrailRefusal(v, ("torchfleet:zones",), True).line()
    assert "this change breaks it (torchfleet:zones)" in GuardrailRefusal(v, ("torchfleet:zones",), False).line()


@pytest.mark.parametrize(("key", "meant"), [
    ("torchfleet:gpuPool[0].maxNodes", "did you mean torchfleet:gpuPools?"),
    ("torchfleet:xyzzy[0].a", "(torchfleet:xyzzy is not in the config; it has: torchfleet:gpuPools, torchfleet:zones,"),
])
def test_set_through_a_missing_key_names_the_one_meant(key, meant):
    config = {"torchfleet:gpuPools": [{"gpu": "t4", "maxNodes": 8}], "torchfleet:zones": ["a"]}
    with pytest.raises(StackFileError, match=re.escape(meant)):
        day2.apply_changes(config, {key: 16})


def test_plan_command_set_typo_suggests_the_key(capsys):
    code = main(["plan", "--stack", "local", "--set", "torchfleet:gpuPool[0].maxNodes=4"])
    err = capsys.readouterr().err
    assert code == 2 and "--set torchfleet:gpuPool[0].maxNodes" in err and "did you mean torchfleet:gpuPools?" in err
