"""EKS add-ons: at the version EKS names for the cluster's minor; those that call AWS APIs each with
their own Pod Identity role and one managed policy."""

import pytest

from torchfleet.preview.mock_aws import addon_version


@pytest.mark.parametrize(
    ("addon_name", "service_account", "policy"),
    [
        ("aws-efs-csi-driver", "efs-csi-controller-sa", "AmazonEFSCSIDriverPolicy"),
        ("aws-ebs-csi-driver", "ebs-csi-controller-sa", "AmazonEBSCSIDriverPolicy"),
    ],
)
def test_csi_driver_is_an_addon_with_its_own_identity(aws_example, addon_name, service_account, policy):
    addon = next(a for a in aws_example.of_type("aws:eks/addon:Addon") if a.inputs["addonName"] == addon_name)
    assert addon.inputs["addonVersion"] == addon_version(addon_name, "1.35")  # the stack's minor
    [association] = addon.inputs["podIdentityAssociations"]
    assert association["serviceAccount"] == service_account
    role = next(r for r in aws_example.of_type("aws:iam/role:Role") if association["roleArn"].endswith(f"/{r.name}"))
    assert "pods.eks.amazonaws.com" in role.inputs["assumeRolePolicy"]
    attached = [
        a.inputs["policyArn"]
        for a in aws_example.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if a.inputs["role"] == role.name
    ]
    assert attached == [f"arn:aws:iam::aws:policy/service-role/{policy}"]


def test_every_addon_version_comes_from_eks_for_the_cluster_minor(aws_example):
    """Regression (issue 20, AWS review B2): four add-ons were hard-pinned to 2024-25 builds with no
    tie to the cluster's minor; EKS refuses a version it does not list for that minor."""
    addons = aws_example.of_type("aws:eks/addon:Addon")
    assert {a.inputs["addonName"] for a in addons} == {
        "vpc-cni", "eks-pod-identity-agent", "aws-efs-csi-driver", "aws-ebs-csi-driver", "kube-proxy", "coredns"
    }
    for addon in addons:
        assert addon.inputs["addonVersion"] == addon_version(addon.inputs["addonName"], "1.35"), addon.name
        assert addon.inputs["resolveConflictsOnUpdate"] == "OVERWRITE"


def test_coredns_and_kube_proxy_are_managed_and_coredns_waits_for_nodes(aws_example):
    """AWS review m7: the self-managed copies EKS installs were never upgraded with the control plane."""
    by_name = {a.inputs["addonName"]: a for a in aws_example.of_type("aws:eks/addon:Addon")}
    for addon in ("coredns", "kube-proxy"):
        assert by_name[addon].inputs["resolveConflictsOnCreate"] == "OVERWRITE"  # takes over the copy
    groups = {g.key for g in aws_example.of_type("aws:eks/nodeGroup:NodeGroup")}
    assert groups <= aws_example.depends_on(by_name["coredns"])
