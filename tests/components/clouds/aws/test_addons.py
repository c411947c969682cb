"""Add-ons that call AWS APIs: pinned, each with its own Pod Identity role and one managed policy."""

import pytest

from components.clouds.aws.ebs import EBS_CSI_ADDON_VERSION
from components.clouds.aws.efs import EFS_CSI_ADDON_VERSION


@pytest.mark.parametrize(
    ("addon_name", "version", "service_account", "policy"),
    [
        ("aws-efs-csi-driver", EFS_CSI_ADDON_VERSION, "efs-csi-controller-sa", "AmazonEFSCSIDriverPolicy"),
        ("aws-ebs-csi-driver", EBS_CSI_ADDON_VERSION, "ebs-csi-controller-sa", "AmazonEBSCSIDriverPolicy"),
    ],
)
def test_csi_driver_is_a_pinned_addon_with_its_own_identity(aws_example, addon_name, version, service_account, policy):
    addon = next(a for a in aws_example.of_type("aws:eks/addon:Addon") if a.inputs["addonName"] == addon_name)
    assert addon.inputs["addonVersion"] == version
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
