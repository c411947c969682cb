"""torchfleet:researchers: each cloud's identity forms as torchfleet:admins (Azure: groups only), each once,
never also an admin, and within EKS's access entries; bad values are refused naming the key."""

from __future__ import annotations

import pytest

from tests.components.spec.configs import config, ok, only


@pytest.mark.parametrize(
    ("cloud", "researcher"),
    [
        ("aws", "arn:aws:iam::123456789012:role/researcher"),
        ("aws", "arn:aws:iam::123456789012:user/alice"),
        ("gcp", "user:alice@example.com"),
        ("gcp", "serviceAccount:ci@my-ml-project.iam.gserviceaccount.com"),
        ("azure", "Group:00000000-0000-0000-0000-0000000000a1"),
    ],
)
def test_researchers_in_each_clouds_form_are_accepted(cloud, researcher):
    spec = ok(config(cloud, researchers=[researcher]))
    assert spec.access.researchers == (researcher,)
    assert spec.access.admins == tuple(config(cloud).get("torchfleet:admins", ()))  # Azure requires admins


@pytest.mark.parametrize(
    ("cloud", "researcher", "hint"),
    [
        ("aws", "arn:aws:sts::123456789012:assumed-role/r/alice", "arn:aws:iam::123456789012:role/"),
        ("gcp", "group:ml@example.com", "user:alice@example.com"),
        ("azure", "Robot:00000000-0000-0000-0000-0000000000a1", "Group:"),
        # A user's Kubernetes name on AKS is not its object id: only groups bind (kube/researchers.py).
        ("azure", "User:00000000-0000-0000-0000-0000000000a1", "Microsoft Entra group"),
        ("azure", "ServicePrincipal:00000000-0000-0000-0000-0000000000a1", "Microsoft Entra group"),
    ],
)
def test_researchers_in_another_form_are_refused_naming_the_entry(cloud, researcher, hint):
    assert hint in only(config(cloud, researchers=[researcher]), "torchfleet:researchers[0]")


def test_researchers_must_be_a_list_each_once_and_local_has_none():
    arn = "arn:aws:iam::123456789012:role/r"
    assert "expected a list" in only(config("aws", researchers=arn), "torchfleet:researchers")
    assert "each identity once" in only(config("aws", researchers=[arn, arn]), "torchfleet:researchers")
    assert "kubeconfig" in only(config("local", researchers=["x"]), "torchfleet:researchers")


def test_an_admin_is_not_also_a_researcher():
    """EKS takes one access entry per principal: the second would fail `pulumi up`, not the preview."""
    arn = "arn:aws:iam::123456789012:role/platform"
    message = only(config("aws", admins=[arn], researchers=[arn]), "torchfleet:researchers")
    assert arn in message and "torchfleet:admins" in message


def test_admins_and_researchers_share_eks_access_entries():
    admins = [f"arn:aws:iam::123456789012:role/a{i}" for i in range(1500)]
    researchers = [f"arn:aws:iam::123456789012:role/r{i}" for i in range(1499)]
    message = only(config("aws", admins=admins, researchers=researchers), "torchfleet:admins + torchfleet:researchers")
    assert message.startswith("at most 2998 on aws, got 2999")
    assert ok(config("aws", admins=admins, researchers=researchers[:-1])).access.researchers == tuple(researchers[:-1])
