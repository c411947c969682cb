"""`torchfleet plan` compares and prints the inputs a provider keeps as sets as sets (force_new rows' `sets:`).

Before, every list compared by position: the EKS cluster's vpcConfig.publicAccessCidrs (schema.TypeSet in
terraform-provider-aws internal/service/eks/cluster.go@00555dc5) listed in another order showed as an update
of [0] and [1], a change the provider never makes.
"""

from __future__ import annotations

import json

import pytest

from tests.harness.placeholders import replaced
from torchfleet.cli import main
from torchfleet.preview import day2, force_new_rules
from torchfleet.preview.force_new_rules import FOLDER

# Their plans synthesize the same old config again and again: synthesized once (tests/harness/synth_cache.py).
pytestmark = pytest.mark.usefixtures("memoized_synth")

CLUSTER = "aws:eks/cluster:Cluster"
A, B, C = "127.0.0.1/32", "127.0.0.2/32", "127.0.0.3/32"  # data only


def test_a_set_compares_as_a_set_and_a_list_by_position():
    old, new = {"v": {"s": [A, B], "l": [A, B]}}, {"v": {"s": [B, A], "l": [B, A]}}
    assert day2.changed_paths(old, new, sets=frozenset({"v.s"})) == ["v.l[0]", "v.l[1]"]
    assert day2.changed_paths(old, {"v": {"s": [B, C], "l": [A, B]}}, sets=frozenset({"v.s"})) == ["v.s"]
    assert day2.changed_paths(old, new) == ["v.s[0]", "v.s[1]", "v.l[0]", "v.l[1]"]  # no rule: positions
    assert day2.set_change([A, B], [B, C]) == ([C], [A])
    taints = [{"key": "nvidia.com/gpu", "effect": "NO_SCHEDULE"}, {"key": "x", "effect": "NO_SCHEDULE"}]
    assert day2.changed_paths({"t": taints}, {"t": taints[::-1]}, sets=frozenset({"t"})) == []


def test_the_aws_rows_name_the_sets_read_from_the_provider_schema():
    rules = force_new_rules.load(FOLDER)
    assert set(rules.get(CLUSTER).sets) == {"enabledClusterLogTypes", "vpcConfig.publicAccessCidrs",
                                            "vpcConfig.securityGroupIds", "vpcConfig.subnetIds",
                                            "encryptionConfig.resources"}
    assert set(rules.get("aws:eks/nodeGroup:NodeGroup").sets) == {"subnetIds", "taints",
                                                                 "remoteAccess.sourceSecurityGroupIds"}
    assert "instanceTypes" not in rules.get("aws:eks/nodeGroup:NodeGroup").sets  # a TypeList: order kept


def test_a_row_s_sets_must_be_input_paths():
    row = {"forceNew": [], "source": "x.go", "sets": ["vpc config"]}
    document = {"source": {"provider": "p", "version": "1", "file": "f"}, "date": "2026-11-28",
                "types": {CLUSTER: row}}
    assert any("sets: expected a list of input paths" in p for p in force_new_rules.check_document(document, "aws"))


def aws(cidrs: list[str]) -> dict:
    config = replaced("aws-usw2")
    config["torchfleet:network"] = {**config["torchfleet:network"], "publicAccessCidrs": cidrs}
    return config


def test_reordered_public_access_cidrs_are_no_change():
    """Regression: the cluster was an update at vpcConfig.publicAccessCidrs[0] and [1]."""
    plan = day2.plan_configs("aws-usw2", aws([A, B]), aws([B, A]))
    assert plan.by_action("update") == [] and plan.by_action("replace") == []


def test_a_changed_set_prints_what_it_gains_and_loses(capsys, tmp_path):
    plan = day2.plan_configs("aws-usw2", aws([A, B]), aws([B, C]))
    (cluster,) = [c for c in plan.by_action("update") if c.type == CLUSTER]
    assert cluster.paths == ["vpcConfig.publicAccessCidrs"]
    assert cluster.set_changes == {"vpcConfig.publicAccessCidrs": ([C], [A])}
    assert cluster.to_json()["setChanges"] == {"vpcConfig.publicAccessCidrs": {"added": [C], "removed": [A]}}
    stack = tmp_path / "Pulumi.aws-usw2.yaml"
    stack.write_text(json.dumps({"config": aws([A, B])}))
    assert main(["plan", "--stack", str(stack), "--set", f'torchfleet:network.publicAccessCidrs=["{B}","{C}"]']) == 0
    out = capsys.readouterr().out
    assert f"{cluster.key}: vpcConfig.publicAccessCidrs (a set: +{C}, -{A})" in out
    assert "publicAccessCidrs[" not in out


@pytest.mark.parametrize("cidrs", [[A], [A, B, C]])
def test_a_set_that_grows_or_shrinks_is_one_change_at_its_path(cidrs):
    plan = day2.plan_configs("aws-usw2", aws([A, B]), aws(cidrs))
    (cluster,) = [c for c in plan.by_action("update") if c.type == CLUSTER]
    assert cluster.paths == ["vpcConfig.publicAccessCidrs"]
