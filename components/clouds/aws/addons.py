"""EKS add-ons that call AWS APIs, each with its own EKS Pod Identity role (least privilege:
one AWS-managed policy per driver, nothing on the node role)."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from components.clouds.aws import iam


def create_addon_with_identity(
    name: str,
    *,
    parent: pulumi.Resource,
    cluster: aws.eks.Cluster,
    addon: str,
    version: str,
    service_account: str,
    managed_policy: str,
    partition: str,
) -> aws.eks.Addon:
    """A pinned add-on whose controller's service account assumes its own role."""
    child = pulumi.ResourceOptions(parent=parent)
    role = aws.iam.Role(f"{name}-role", assume_role_policy=iam.pod_identity_trust_policy(), opts=child)
    attachment = aws.iam.RolePolicyAttachment(
        f"{name}-policy",
        role=role.name,
        policy_arn=iam.managed_policy_arn(partition, managed_policy),
        opts=child,
    )
    return aws.eks.Addon(
        f"{name}-driver",
        cluster_name=cluster.name,
        addon_name=addon,
        addon_version=version,
        pod_identity_associations=[{"role_arn": role.arn, "service_account": service_account}],
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[attachment]),
    )
