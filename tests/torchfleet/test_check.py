"""`torchfleet check` end to end: stack files in tmp_path -> synth -> rules -> lines and exit code.

"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from components import policy
from components.policy.inputs import _urn_key
from tests.harness import REPO, STACKS, STACKS_DIR, synth_stack
from tests.harness.placeholders import replaced
from torchfleet.check import resources_of
from torchfleet.cli import main

CLOUD_STACKS = [s for s in STACKS if s != "local"]


def write_stack(tmp_path: Path, name: str, config: dict) -> Path:
    path = tmp_path / f"Pulumi.{name}.yaml"
    path.write_text(yaml.safe_dump({"config": config}, sort_keys=False))
    return path


def example_config(stack: str) -> dict:
    """The example stack as a user deploys it: its placeholders replaced (tests/harness/placeholders.py)."""
    return replaced(stack)


def mandatory(found: list[policy.Violation]) -> list[policy.Violation]:
    """The violations that fail a check (the example stacks' open API endpoints are advisory)."""
    return [v for v in found if not v.advisory]


def check(capsys, stack_file: Path, *extra: str) -> tuple[int, list[str], str]:
    code = main(["check", "--stack-file", str(stack_file), *extra])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def test_local_stack_is_clean(capsys):
    code, lines, err = check(capsys, STACKS_DIR / "Pulumi.local.yaml")
    assert (code, lines) == (0, [])
    assert "local: 0 violation(s) and 0 advisory of 10 rules" in err


def test_missing_stack_file_is_a_config_error(capsys, tmp_path):
    code, lines, err = check(capsys, tmp_path / "Pulumi.nope.yaml")
    assert (code, lines) == (2, [])
    assert "does not exist" in err


def test_invalid_stack_config_exits_2_naming_the_key(capsys, tmp_path):
    stack = write_stack(tmp_path, "bad", {"torchfleet:cloud": "local", "torchfleet:guardrails": {"maxGpu": 4}})
    code, lines, err = check(capsys, stack)
    assert (code, lines) == (2, [])
    assert "torchfleet:guardrails.maxGpu: unknown key; did you mean 'maxGpus'?" in err


@pytest.mark.parametrize("stack", CLOUD_STACKS)
def test_every_example_stack_passes_the_guardrails(capsys, stack, tmp_path):
    code, lines, _ = check(capsys, write_stack(tmp_path, stack, example_config(stack)))
    assert lines == [] and code == 0


@pytest.mark.parametrize("stack", CLOUD_STACKS)
def test_every_example_stack_as_shipped_fails_on_its_placeholders_only(capsys, stack):
    """Issue 29: the example's 203.0.113.0/24 or all-zero admin, deployed, makes a cluster nobody reaches."""
    code, lines, err = check(capsys, STACKS_DIR / f"Pulumi.{stack}.yaml")
    assert code == 1 and lines
    assert {line.split("  ")[0] for line in lines} == {"placeholder"}
    assert f"{stack}: 0 violation(s)" in err and f"{stack}: {len(lines)} placeholder(s) of the example" in err


@pytest.mark.parametrize("stack", CLOUD_STACKS)
def test_stack_breaking_the_config_guardrails_exits_1_with_one_line_each(capsys, tmp_path, stack):
    config = example_config(stack)
    # Every pool on-demand without allowing it, a cap below what the pools reach, an unprotected store.
    config["torchfleet:gpuPools"] = [{**pool, "spot": False} for pool in config["torchfleet:gpuPools"]]
    config["torchfleet:guardrails"] = {"maxGpus": 1, "allowOnDemandGpus": False}
    config["torchfleet:storage"] = {**config["torchfleet:storage"], "protect": False}
    code, lines, _ = check(capsys, write_stack(tmp_path, stack, config))
    assert code == 1
    rows = [line.split("  ", 2) for line in lines]
    assert all(len(row) == 3 and all(row) for row in rows), lines
    rules = {row[0] for row in rows}
    assert rules == {"gpu-pool-spot", "gpu-count-cap", "store-protected"}, lines
    spot_pools = [row[1] for row in rows if row[0] == "gpu-pool-spot"]
    assert len(spot_pools) == len(set(spot_pools)) >= len(config["torchfleet:gpuPools"])
    assert ["gpu-count-cap", policy.STACK] in [row[:2] for row in rows]


def test_allow_on_demand_and_a_higher_cap_make_the_same_pools_pass(capsys, tmp_path):
    config = example_config("aws-usw2")
    config["torchfleet:gpuPools"] = [{**pool, "spot": False} for pool in config["torchfleet:gpuPools"]]
    config["torchfleet:guardrails"] = {"maxGpus": 18, "allowOnDemandGpus": True}  # 2 zones x 8 x 1 + 2 x 1
    code, lines, _ = check(capsys, write_stack(tmp_path, "aws-ondemand", config))
    assert (code, lines) == (0, [])
    config["torchfleet:guardrails"]["maxGpus"] = 17
    code, lines, _ = check(capsys, write_stack(tmp_path, "aws-ondemand", config))
    assert code == 1 and [line.split("  ")[0] for line in lines] == ["gpu-count-cap"]


@pytest.mark.parametrize("stack", CLOUD_STACKS)
def test_synthesized_gpu_pools_lose_their_taint_and_zone_and_are_caught(stack):
    """Rules the config cannot break (the program always taints and pins pools): break the synth."""
    result = synth_stack(stack)
    resources = resources_of(result.resources)
    pools = policy.gpu_pools(resources)
    assert pools, "the example stack has GPU pools"
    assert mandatory(policy.check(resources, max_gpus=10_000, allow_on_demand_gpus=True)) == []
    for pool in pools:
        inputs = pool.resource["inputs"]
        if "taints" in inputs:  # EKS
            inputs["taints"], inputs["subnetIds"] = [], ["subnet-a", "subnet-b"]
        elif "nodeConfig" in inputs:  # GKE
            inputs["nodeConfig"]["taints"], inputs["nodeLocations"] = [], ["z-a", "z-b"]
        else:  # AKS
            inputs["nodeTaints"], inputs["availabilityZones"] = [], ["1", "2"]
    found = mandatory(policy.check(resources, max_gpus=10_000, allow_on_demand_gpus=True))
    assert {(v.rule, v.resource) for v in found} == {
        (rule, pool.label) for pool in pools for rule in ("gpu-pool-tainted", "gpu-pool-one-zone")
    }


def test_policy_config_out_writes_the_stacks_limits_for_crossguard(capsys, tmp_path):
    config = {"torchfleet:cloud": "local", "torchfleet:guardrails": {"maxGpus": 12, "allowOnDemandGpus": True}}
    out = tmp_path / "policy-config.json"
    code, _, _ = check(capsys, write_stack(tmp_path, "limits", config), "--policy-config-out", str(out))
    assert code == 0
    assert json.loads(out.read_text()) == {
        "gpu-count-cap": {"maxGpus": 12},
        "gpu-pool-spot": {"allowOnDemandGpus": True},
        "public-endpoint": {"enforcementLevel": "advisory"},
    }


def test_the_installed_entry_point_returns_the_exit_code(tmp_path):
    missing = tmp_path / "Pulumi.none.yaml"
    proc = subprocess.run([sys.executable, "-m", "torchfleet", "check", "--stack-file", str(missing)],
                          cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2 and "does not exist" in proc.stderr


def _break_stores_ips_and_pins(resources: list[dict]) -> set[tuple[str, str]]:
    """Unencrypted EFS, public node IPs, a `latest` image and chart; returns what must be reported."""
    expected = set()
    by_key = {f"{r['type']}::{r['name']}": r for r in resources}
    for r in resources:
        t, i = r["type"], r["inputs"]
        if t == "aws:efs/fileSystem:FileSystem":
            i["encrypted"] = False
            expected.add(("store-encrypted", r["name"]))
        elif t == "aws:eks/nodeGroup:NodeGroup":
            for urn in r["options"]["propertyDependencies"]["subnetIds"]:
                subnet = by_key[_urn_key(urn)]
                subnet["inputs"]["mapPublicIpOnLaunch"] = True
                expected.add(("no-public-node-ips", subnet["name"]))
        elif t == "gcp:container/cluster:Cluster":
            i["privateClusterConfig"] = {**i.get("privateClusterConfig", {}), "enablePrivateNodes": False}
            expected.add(("no-public-node-ips", r["name"]))
        elif t == "azure-native:containerservice:AgentPool":
            i["enableNodePublicIP"] = True
            expected.add(("no-public-node-ips", r["name"]))
        elif t == "kubernetes:helm.sh/v3:Release":
            i["version"] = "latest"
            expected.add(("pinned-versions", r["name"]))
    pods = [r for r in resources if r["type"] == "kubernetes:apps/v1:StatefulSet"]
    if pods:
        pods[0]["inputs"]["spec"]["template"]["spec"]["containers"][0]["image"] = "quay.io/coreos/etcd:latest"
        expected.add(("pinned-versions", pods[0]["name"]))
    return expected


@pytest.mark.parametrize("stack", CLOUD_STACKS)
def test_synthesized_stack_with_public_ips_unpinned_images_or_an_open_store_is_caught(stack):
    result = synth_stack(stack)
    resources = resources_of(result.resources)
    expected = _break_stores_ips_and_pins(resources)
    assert {rule for rule, _ in expected} >= {"no-public-node-ips", "pinned-versions"}
    found = mandatory(policy.check(resources, max_gpus=10_000, allow_on_demand_gpus=True))
    assert {(v.rule, v.resource) for v in found} == expected


@pytest.mark.parametrize("stack", CLOUD_STACKS)
def test_allow_placeholders_warns_and_exits_0_as_ci_s_offline_preview_runs_it(capsys, stack):
    """.github/workflows/preview.yml runs check on the shipped stacks with --allow-placeholders and fails on
    its exit code: the placeholders alone must not fail it (a violation still does)."""
    code, lines, err = check(capsys, STACKS_DIR / f"Pulumi.{stack}.yaml", "--allow-placeholders")
    assert (code, lines) == (0, [])
    assert "warning: placeholder  " in err
    workflow = (REPO / ".github" / "workflows" / "preview.yml").read_text()
    assert 'torchfleet check --allow-placeholders --stack-file "${file}"' in workflow


def test_allow_placeholders_keeps_violations(capsys, tmp_path):
    config = yaml.safe_load((STACKS_DIR / "Pulumi.aws-usw2.yaml").read_text())["config"]  # as shipped
    config["torchfleet:guardrails"] = {"maxGpus": 8}
    code, lines, err = check(capsys, write_stack(tmp_path, "aws-usw2", config), "--allow-placeholders")
    assert code == 1 and {line.split("  ")[0] for line in lines} == {"gpu-pool-spot", "gpu-count-cap"}
    assert "warning: placeholder  torchfleet:network.publicAccessCidrs[0]" in err
