"""torchfleet:researchers per cloud, through the program under mocks: each identity can fetch credentials
and is bound to the training namespace's torchfleet-researcher Role, and to nothing cluster-wide."""

from __future__ import annotations

import json

import pytest

from components.clouds.azure import cluster as aks_cluster
from components.clouds.gcp.access import CREDENTIALS_ROLE
from components.kube import researchers
from components.spec.access import RESEARCHERS_GROUP
from tests.harness import STACKS_DIR
from torchfleet.preview.runner import SynthResult, stack_config, synth

ROLE_BINDING = "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding"
CLUSTER_ROLE_BINDING = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding"
STACKS = {"aws": "aws-usw2", "gcp": "gcp-usc1", "azure": "azure-eus"}
RESEARCHERS = {
    "aws": ["arn:aws:iam::123456789012:role/researcher", "arn:aws:iam::123456789012:user/bob"],
    "gcp": ["user:alice@example.com", "serviceAccount:ci@ml.iam.gserviceaccount.com"],
    "azure": ["Group:00000000-0000-0000-0000-0000000000a1"],
}
_DONE: dict[str, SynthResult] = {}


def with_researchers(cloud: str) -> SynthResult:
    """The example stack of this cloud plus torchfleet:researchers (each synthesized once)."""
    if cloud not in _DONE:
        stack, config, secrets = stack_config(STACKS_DIR / f"Pulumi.{STACKS[cloud]}.yaml")
        config = {**config, "torchfleet:researchers": json.dumps(RESEARCHERS[cloud])}
        _DONE[cloud] = synth(stack, config, secrets)
    return _DONE[cloud]


def binding(result: SynthResult, name: str):
    return next(r for r in result.of_type(ROLE_BINDING) if r.inputs["metadata"]["name"] == name)


def test_aws_gives_each_researcher_an_access_entry_in_the_group_and_no_policy():
    result = with_researchers("aws")
    entries = {r.inputs["principalArn"]: r for r in result.of_type("aws:eks/accessEntry:AccessEntry")}
    for arn in RESEARCHERS["aws"]:
        assert entries[arn].inputs["kubernetesGroups"] == [RESEARCHERS_GROUP]
        assert entries[arn].inputs["type"] == "STANDARD"
    policies = result.of_type("aws:eks/accessPolicyAssociation:AccessPolicyAssociation")
    assert not {p.inputs["principalArn"] for p in policies} & set(RESEARCHERS["aws"])
    # The static binding of that group to the Role (k8s/base/jobs/rolebinding-researchers.yaml).
    static = binding(result, "torchfleet-researchers")
    assert static.inputs["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                                          "name": RESEARCHERS_GROUP}]  # fmt: skip
    assert static.inputs["roleRef"]["name"] == researchers.ROLE


def test_gcp_gives_each_researcher_credentials_and_a_role_binding_to_its_email():
    result = with_researchers("gcp")
    members = {r.inputs["member"]: r for r in result.of_type("gcp:projects/iAMMember:IAMMember")}
    for member in RESEARCHERS["gcp"]:
        assert members[member].inputs["role"] == CREDENTIALS_ROLE
    bound = binding(result, researchers.BINDING)
    assert bound.inputs["metadata"]["namespace"] == "elastic-job"
    assert bound.inputs["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "torchfleet-researcher",
    }
    assert [s["name"] for s in bound.inputs["subjects"]] == ["alice@example.com", "ci@ml.iam.gserviceaccount.com"]
    assert {s["kind"] for s in bound.inputs["subjects"]} == {"User"}


def test_azure_gives_each_group_the_cluster_user_role_and_a_role_binding():
    result = with_researchers("azure")
    object_id = RESEARCHERS["azure"][0].split(":", 1)[1]
    [role] = [r for r in result.of_type("azure-native:authorization:RoleAssignment")
              if r.inputs["principalId"] == object_id]  # fmt: skip
    assert role.inputs["roleDefinitionId"].endswith(aks_cluster.AKS_CLUSTER_USER)
    assert role.inputs["principalType"] == "Group"
    bound = binding(result, researchers.BINDING)
    assert bound.inputs["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": object_id}]


@pytest.mark.parametrize("cloud", list(STACKS))
def test_nothing_cluster_wide_names_a_researcher(cloud):
    result = with_researchers(cloud)
    names = {i.split(":", 1)[-1].split("/")[-1] for i in RESEARCHERS[cloud]} | {RESEARCHERS_GROUP}
    for crb in result.of_type(CLUSTER_ROLE_BINDING):
        assert not {s.get("name") for s in crb.inputs.get("subjects") or []} & names, crb.name
