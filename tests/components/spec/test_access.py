"""torchfleet:admins, torchfleet:deployerPrincipalType, storage.adopt, the AWS provider credentials and
one size per EKS pool (issue 20): bad values are refused naming the key, before anything is created."""

from __future__ import annotations

import pytest

from tests.components.spec.configs import config, ok, only, pools


@pytest.mark.parametrize(
    ("cloud", "admin"),
    [
        ("aws", "arn:aws:iam::123456789012:role/platform"),
        ("aws", "arn:aws:iam::123456789012:user/alice"),
        ("gcp", "user:alice@example.com"),
        ("gcp", "serviceAccount:ci@my-ml-project.iam.gserviceaccount.com"),
        ("azure", "ServicePrincipal:00000000-0000-0000-0000-0000000000c1"),
    ],
)
def test_admins_in_each_clouds_form_are_accepted(cloud, admin):
    assert ok(config(cloud, admins=[admin])).access.admins == (admin,)


@pytest.mark.parametrize(
    ("cloud", "admin", "hint"),
    [
        # An assumed-role session ARN is not an IAM role: access entries refuse it.
        ("aws", "arn:aws:sts::123456789012:assumed-role/platform/alice", "arn:aws:iam::123456789012:role/"),
        ("gcp", "group:ml@example.com", "user:alice@example.com"),  # needs Google Groups for RBAC
        ("gcp", "alice@example.com", "user:"),
        ("azure", "00000000-0000-0000-0000-0000000000c1", "Group:"),
        ("azure", "Robot:00000000-0000-0000-0000-0000000000c1", "Group:"),
    ],
)
def test_admins_in_another_form_are_refused_naming_the_entry(cloud, admin, hint):
    message = only(config(cloud, admins=[admin]), "torchfleet:admins[0]")
    assert hint in message and cloud in message
    assert "a aws" not in message and "a azure" not in message  # issue 22: "expected a aws identity"


def test_admins_must_be_a_list_and_local_has_none():
    assert "expected a list" in only(config("aws", admins="arn:aws:iam::123456789012:role/x"), "torchfleet:admins")
    assert "kubeconfig" in only(config("local", admins=["x"]), "torchfleet:admins")


def test_deployer_principal_type_is_azures_and_one_of_three():
    assert ok(config("azure", deployerPrincipalType="ServicePrincipal")).access.deployer_type == "ServicePrincipal"
    assert ok(config("azure")).access.deployer_type == "User"
    assert "ServicePrincipal" in only(config("azure", deployerPrincipalType="SP"), "torchfleet:deployerPrincipalType")
    assert "only Azure" in only(config("aws", deployerPrincipalType="User"), "torchfleet:deployerPrincipalType")


@pytest.mark.parametrize("mode", ["spn", "workloadidentity"])
def test_kube_login_as_a_service_principal_is_azures(mode):
    spec = ok(config("azure", kubeLogin=mode, deployerPrincipalType="ServicePrincipal"))
    assert spec.access.kube_login == mode
    assert ok(config("azure")).access.kube_login == "azurecli"
    # The cluster-admin grant goes to the provider's identity: a service principal, not a User.
    assert "ServicePrincipal" in only(config("azure", kubeLogin=mode), "torchfleet:deployerPrincipalType")


@pytest.mark.parametrize("value", ["devicecode", "SPN", ["spn"], 1])
def test_kube_login_other_than_a_non_interactive_mode_is_refused(value):
    message = only(config("azure", kubeLogin=value), "torchfleet:kubeLogin")
    assert "azurecli, spn, workloadidentity" in message


def test_kube_login_is_azure_only():
    assert "only the Azure" in only(config("gcp", kubeLogin="azurecli"), "torchfleet:kubeLogin")


def test_storage_adopt_is_a_boolean_and_not_on_local():
    assert ok(config("aws", storage={"adopt": True})).storage.adopt is True
    assert only(config("gcp", storage={"adopt": "yes"}), "torchfleet:storage.adopt")
    assert "keeps nothing" in only(config("local", storage={"adopt": True}), "torchfleet:storage.adopt")


def test_aws_provider_profile_and_role_are_read_and_checked():
    role = "arn:aws:iam::123456789012:role/deployer"
    spec = ok(config("aws", **{"aws:profile": "team", "aws:assumeRoles": [{"roleArn": role}]}))
    assert (spec.aws_profile, spec.aws_role_arn) == ("team", role)
    assert ok(config("aws", **{"aws:assumeRole": {"roleArn": role}})).aws_role_arn == role  # the older key
    assert "roleArn" in only(config("aws", **{"aws:assumeRoles": [{"roleArn": "nope"}]}), "aws:assumeRoles")
    assert "profile" in only(config("aws", **{"aws:profile": "a b"}), "aws:profile")


def test_an_eks_pool_mixing_sizes_is_refused():
    """Regression (issue 20, AWS review M2): the autoscaler sizes a group from its first type only."""
    message = only(pools("aws", {"gpu": "t4", "maxNodes": 2, "machineTypes": ["g4dn.xlarge", "g4dn.2xlarge"]}),
                   "torchfleet:gpuPools[0].machineTypes")
    assert "g4dn.xlarge=4 vCPU/16 GiB" in message and "g4dn.2xlarge=8 vCPU/32 GiB" in message
    # Azure makes an agent pool per machine type: mixing is fine there.
    assert ok(pools("azure", {"gpu": "t4", "maxNodes": 2,
                              "machineTypes": ["Standard_NC4as_T4_v3", "Standard_NC8as_T4_v3"]}))


def test_gcp_network_must_hold_every_node_the_pools_reach():
    """GCP review F6: a /20 network gives the Pod range room for 16 nodes; more pools were accepted."""
    raw = config("gcp", network={"cidr": "10.0.0.0/20"},
                 gpuPools=[{"gpu": "t4", "maxNodes": 20}])  # 20 per zone x 2 zones + manager 3
    message = only(raw, "torchfleet:network.cidr")
    assert "room for 16 nodes" in message and "reach 43" in message
    assert ok(config("gcp", network={"cidr": "10.0.0.0/16"}, gpuPools=[{"gpu": "t4", "maxNodes": 20}]))


def test_gcp_basic_filestore_refuses_a_172_17_node_range():
    """GCP review F8: Basic-tier Filestore does not serve clients in 172.17.0.0/16."""
    message = only(config("gcp", network={"cidr": "172.17.0.0/16"}), "torchfleet:network.cidr")
    assert "172.17.0.0/16" in message and "Basic-tier Filestore" in message
    assert ok(config("gcp", network={"cidr": "172.17.0.0/16"}, storage={"tier": "ZONAL"}))
