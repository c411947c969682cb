import json

import pytest

from components.clouds.aws.cluster import CONTROL_PLANE_LOGS, kubeconfig
from components.clouds.aws.options import CLUSTER_TIMEOUTS, cluster_options
from torchfleet.preview.mock_aws import addon_version


def test_control_plane_is_encrypted_logged_and_private(aws_example):
    cluster = aws_example.one("aws:eks/cluster:Cluster")
    key = aws_example.one("aws:kms/key:Key")
    assert cluster.inputs["name"] == "torchfleet-aws-usw2"
    assert cluster.inputs["version"] == "1.35"
    assert cluster.inputs["encryptionConfig"] == {
        "provider": {"keyArn": f"arn:aws:kms:us-west-2:123456789012:key/{key.name}"},
        "resources": ["secrets"],
    }
    assert key.inputs["enableKeyRotation"] is True
    assert cluster.inputs["enabledClusterLogTypes"] == CONTROL_PLANE_LOGS
    vpc = cluster.inputs["vpcConfig"]
    assert vpc["endpointPrivateAccess"] is True
    # Issue 29: the shipped stack's public endpoint is open to its declared (placeholder) range only,
    # with the private endpoint on: a private-only endpoint made by the same `up` was unreachable.
    assert vpc["endpointPublicAccess"] is True and vpc["publicAccessCidrs"] == ["203.0.113.0/24"]
    assert len(vpc["subnetIds"]) == 2  # the private subnets
    # Issue 29: no hidden creator entry; every admin, the deployer too, is an entry of torchfleet:admins.
    assert cluster.inputs["accessConfig"] == {
        "authenticationMode": "API",
        "bootstrapClusterCreatorAdminPermissions": False,
    }
    assert cluster.inputs["upgradePolicy"] == {"supportType": "STANDARD"}
    log_group = aws_example.one("aws:cloudwatch/logGroup:LogGroup")
    assert log_group.inputs["name"] == "/aws/eks/torchfleet-aws-usw2/cluster"


def test_public_endpoint_limited_to_configured_cidrs(aws_three_zones):
    vpc = aws_three_zones.one("aws:eks/cluster:Cluster").inputs["vpcConfig"]
    assert vpc["publicAccessCidrs"] == ["203.0.113.0/24"]


def test_cluster_gets_generous_timeouts_from_its_options_helper(aws_example):
    opts = cluster_options(parent=None, depends_on=[])
    assert opts.custom_timeouts is CLUSTER_TIMEOUTS
    assert opts.delete_before_replace is True and not opts.protect
    assert CLUSTER_TIMEOUTS.create == "40m" and CLUSTER_TIMEOUTS.update == "90m"
    recorded = aws_example.one("aws:eks/cluster:Cluster").options["customTimeouts"]
    assert recorded == {"create": "40m", "update": "90m", "delete": "40m"}


def test_kubeconfig_is_a_secret_using_aws_exec_auth(aws_example):
    assert aws_example.outputs["kubeconfig"] == "[secret]"
    config = json.loads(kubeconfig("c1", "https://e", "Q0E=", "us-west-2"))
    user = config["users"][0]["user"]["exec"]
    assert user["command"] == "aws"
    assert user["args"] == ["eks", "get-token", "--cluster-name", "c1", "--region", "us-west-2"]
    assert "token" not in json.dumps(config["users"][0]["user"]).replace("get-token", "")


@pytest.mark.parametrize(
    ("profile", "role", "extra"),
    [
        ("team", None, ["--profile", "team"]),
        (None, "arn:aws:iam::123456789012:role/ci", ["--role-arn", "arn:aws:iam::123456789012:role/ci"]),
    ],
)
def test_kubeconfig_authenticates_as_the_provider_identity(profile, role, extra):
    """Regression (issue 20, AWS review M4): `aws eks get-token` ignored aws:profile and aws:assumeRoles."""
    config = json.loads(kubeconfig("c1", "https://e", "Q0E=", "us-west-2", profile, role))
    assert config["users"][0]["user"]["exec"]["args"][-2:] == extra


def test_provider_profile_and_role_reach_the_kubeconfig_from_config():
    from tests.harness import synth_config

    result = synth_config(
        "aws-cred",
        {
            "aws:region": "us-west-2",
            "aws:profile": "team",
            "aws:assumeRoles": [{"roleArn": "arn:aws:iam::123456789012:role/deployer"}],
            "torchfleet:cloud": "aws",
            "torchfleet:zones": ["us-west-2a", "us-west-2b"],
            "torchfleet:gpuPools": [{"gpu": "t4", "maxNodes": 1}],
            "torchfleet:admins": ["arn:aws:iam::123456789012:role/platform"],
            "torchfleet:network": {"publicAccessCidrs": ["203.0.113.0/24"]},
        },
    )
    assert result.spec.aws_profile == "team"
    assert result.spec.aws_role_arn == "arn:aws:iam::123456789012:role/deployer"
    # The listed admin only: torchfleet:admins is the one source (admins.py), the caller gets nothing implicit.
    entries = result.of_type("aws:eks/accessEntry:AccessEntry")
    assert [e.inputs["principalArn"] for e in entries] == ["arn:aws:iam::123456789012:role/platform"]
    policies = result.of_type("aws:eks/accessPolicyAssociation:AccessPolicyAssociation")
    provider = result.one("pulumi:providers:kubernetes")
    for policy in policies:
        assert policy.inputs["policyArn"].endswith(":cluster-access-policy/AmazonEKSClusterAdminPolicy")
        assert policy.inputs["accessScope"] == {"type": "cluster"}
        assert policy.key in result.depends_on(provider)


def test_stack_outputs(aws_example):
    out = aws_example.outputs
    assert out["clusterName"] == "torchfleet-aws-usw2"
    assert out["region"] == "us-west-2"
    assert out["zones"] == ["us-west-2a", "us-west-2b"]
    assert out["gpuPools"] == ["gpu-t4-us-west-2a", "gpu-t4-us-west-2b", "gpu-a10g-us-west-2a"]
    assert out["fileSystemId"] == aws_example.one("aws:efs/fileSystem:FileSystem").name + "-id"


def test_vpc_cni_enforces_network_policies_before_nodes_join(aws_example):
    """Regression (review): without enableNetworkPolicy the namespace's default-deny was ignored on EKS."""
    cni = next(a for a in aws_example.of_type("aws:eks/addon:Addon") if a.inputs["addonName"] == "vpc-cni")
    assert json.loads(cni.inputs["configurationValues"]) == {"enableNetworkPolicy": "true"}
    assert cni.inputs["addonVersion"] == addon_version("vpc-cni", "1.35")  # EKS's default for the minor (addons.py)
    for group in aws_example.of_type("aws:eks/nodeGroup:NodeGroup"):
        assert any(dep.endswith(f"::{cni.name}") for dep in group.options["dependencies"]), group.name


def test_what_destroy_keeps_is_not_encrypted_with_the_key_destroy_deletes(aws_example):
    """AWS review m10: destroy schedules the secrets key for deletion (unprotected, not retained) while
    it keeps the EFS file system and the log group. Were either encrypted with that key, the kept data
    would become unreadable 30 days later. The key encrypts the cluster's Secrets only; EFS uses the
    AWS managed key aws/elasticfilesystem (no kmsKeyId), the log group CloudWatch's own encryption."""
    key = aws_example.one("aws:kms/key:Key")
    assert (key.options["protect"], key.options["retainOnDelete"]) == (False, False)
    assert key.inputs["deletionWindowInDays"] == 30  # KMS's longest wait; no charge while pending
    cluster = aws_example.one("aws:eks/cluster:Cluster")
    assert cluster.inputs["encryptionConfig"]["resources"] == ["secrets"]
    kept = [r for r in aws_example.resources if r.options.get("retainOnDelete")]
    assert sorted(r.type for r in kept) == [
        "aws:cloudwatch/logGroup:LogGroup", "aws:efs/backupPolicy:BackupPolicy", "aws:efs/fileSystem:FileSystem",
        "aws:efs/fileSystemPolicy:FileSystemPolicy",  # kept with the store since issue 29
    ]
    for r in kept:
        assert "kmsKeyId" not in r.inputs, r.name
        assert key.name not in json.dumps(r.inputs), r.name
