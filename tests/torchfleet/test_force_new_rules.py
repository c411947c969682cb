"""torchfleet/preview/force_new/*.yaml: the providers' force-new rules as data (force_new_rules.py).

Every file follows the schema and names the provider version this project pins; every row is walked;
every custom resource type a shipped stack registers has a row (else `torchfleet plan` can only say
"unknown" for it). The schema check itself is tested on bad documents, each problem named.
"""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

import pytest
import yaml

from tests.harness import REPO, STACKS, synth_stack
from torchfleet.preview import force_new_rules
from torchfleet.preview.force_new_rules import FOLDER, RulesError

FILES = sorted(p.name.removesuffix(".yaml") for p in FOLDER.glob("*.yaml"))
CLOUD_FILES = ("aws", "gcp", "azure")
# The package each file's rows were read from, and where this project pins its version.
PINNED = {
    "aws": "pulumi-aws",
    "gcp": "pulumi-gcp",
    "azure": "pulumi-azure-native",
}
# The Kubernetes rows come from the provider tests/controlplane builds (its go.mod names the tag).
KUBERNETES_GO_MOD = REPO / "tests" / "controlplane" / "modules" / "pulumi-kubernetes" / "go.mod"


def rows():
    rules = force_new_rules.load(FOLDER, strict=False)
    for rule_file in rules.files.values():
        for rule in rule_file.types.values():
            yield pytest.param(rule, id=rule.type)


@pytest.mark.parametrize("name", FILES)
def test_every_file_follows_the_schema(name):
    rule_file = force_new_rules.read_file(FOLDER / f"{name}.yaml")  # raises RulesError naming each problem
    assert rule_file.types, f"force_new/{name}.yaml has no rows"


@pytest.mark.parametrize("name", [f for f in FILES if f in PINNED])
def test_cloud_files_name_the_pinned_provider_version(name):
    rule_file = force_new_rules.read_file(FOLDER / f"{name}.yaml")
    assert rule_file.provider == PINNED[name]
    assert rule_file.version == metadata.version(PINNED[name]), (
        f"force_new/{name}.yaml was read at {rule_file.version}; the project pins "
        f"{metadata.version(PINNED[name])}: read the rows again")


def test_kubernetes_rows_name_the_provider_the_control_plane_builds():
    rule_file = force_new_rules.read_file(FOLDER / "kubernetes.yaml")
    assert rule_file.provider == "pulumi-kubernetes"
    assert f"v{rule_file.version}" in re.findall(r"tagged (v[\d.]+)", KUBERNETES_GO_MOD.read_text())


@pytest.mark.parametrize("rule", list(rows()))
def test_every_row(rule):
    """Each row: its token belongs to its file, its paths are input paths, it cites its source file."""
    assert force_new_rules.file_of(rule.type) == rule.file
    assert all(force_new_rules.PATH.match(p) for p in rule.force_new), rule.force_new
    assert len(set(rule.force_new)) == len(rule.force_new)
    assert rule.source.strip()
    if rule.type.startswith("kubernetes:") and rule.type != "kubernetes:helm.sh/v3:Release":
        # pulumi-kubernetes diff.go: every object replaces on its name and namespace
        assert {"metadata.name", "metadata.namespace"} <= set(rule.force_new)


@pytest.fixture(scope="module")
def registered_types() -> dict[str, set[str]]:
    """type -> the shipped stacks that register it (custom resources; dynamic ones diff themselves)."""
    found: dict[str, set[str]] = {}
    for stack in STACKS:
        for r in synth_stack(stack).resources:
            if r.custom and not r.type.startswith("pulumi-python:dynamic:"):
                found.setdefault(r.type, set()).add(stack)
    return found


def test_every_registered_type_has_a_row(registered_types):
    missing_files = [f"force_new/{name}.yaml" for name in CLOUD_FILES if name not in FILES]
    if missing_files:
        pytest.skip(f"waiting for {', '.join(missing_files)} (each cloud's engineer writes its own); "
                    "the Kubernetes rows are checked by test_every_kubernetes_type_has_a_row")
    rules = force_new_rules.load(FOLDER)
    missing = sorted(f"{t} ({', '.join(sorted(s))})" for t, s in registered_types.items() if rules.get(t) is None)
    assert not missing, "types without a force-new row:\n  " + "\n  ".join(missing)


def test_every_kubernetes_type_has_a_row(registered_types):
    rules = force_new_rules.load(FOLDER, strict=False)
    missing = sorted(t for t in registered_types if force_new_rules.file_of(t) == "kubernetes" and rules.get(t) is None)
    assert not missing, f"kubernetes types without a row in force_new/kubernetes.yaml: {missing}"


# ---- the schema check --------------------------------------------------------------------------

GOOD = {
    "source": {"provider": "pulumi-aws", "version": "7.51.1", "file": "terraform-provider-aws@abc"},
    "date": "2026-11-28",
    "types": {"aws:eks/cluster:Cluster": {"forceNew": ["name", "vpcConfig.securityGroupIds"],
                                          "source": "eks/cluster.go"}},
}


def test_a_good_document_has_no_problems():
    assert force_new_rules.check_document(GOOD, "aws") == []


@pytest.mark.parametrize(("change", "message"), [
    ({"source": "terraform-provider-aws@abc"}, "source: expected a mapping {provider:"),
    ({"date": "yesterday"}, "date: expected YYYY-MM-DD"),
    ({"extra": 1}, "unknown key 'extra'"),
    ({"types": {"aws:eks/cluster:Cluster": {"forceNew": "name", "source": "x"}}}, "forceNew: expected a list"),
    ({"types": {"aws:eks/cluster:Cluster": {"forceNew": ["vpc config"], "source": "x"}}}, "not an input path"),
    ({"types": {"aws:eks/cluster:Cluster": {"forceNew": ["name"]}}}, "source: required"),
    ({"types": {"gcp:container/cluster:Cluster": {"forceNew": [], "source": "x"}}}, "belongs in force_new/gcp.yaml"),
    ({"types": {"not a token": {"forceNew": [], "source": "x"}}}, "not a Pulumi type token"),
    ({"types": {"aws:eks/cluster:Cluster": {"forceNew": ["name", "name"], "source": "x"}}}, "appears twice"),
])
def test_schema_problems_name_the_file_and_key(change, message):
    problems = force_new_rules.check_document({**GOOD, **change}, "aws")
    assert any(message in p and p.startswith("force_new/aws.yaml") for p in problems), problems


def test_every_problem_at_once(tmp_path: Path):
    (tmp_path / "aws.yaml").write_text(yaml.safe_dump({**GOOD, "date": "x", "source": "y"}))
    with pytest.raises(RulesError) as error:
        force_new_rules.load(tmp_path)
    assert len(error.value.problems) == 2


def test_a_broken_file_fails_only_its_own_types(tmp_path: Path):
    (tmp_path / "aws.yaml").write_text(yaml.safe_dump({**GOOD, "date": "x"}))
    (tmp_path / "kubernetes.yaml").write_text((FOLDER / "kubernetes.yaml").read_text())
    rules = force_new_rules.load(tmp_path, strict=False)
    assert rules.get("kubernetes:core/v1:Namespace") is not None
    with pytest.raises(RulesError, match="date"):
        rules.get("aws:eks/cluster:Cluster")
    assert rules.missing_file("gcp:container/cluster:Cluster") == "force_new/gcp.yaml"
