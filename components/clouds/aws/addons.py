"""EKS add-ons: the version EKS names for the cluster's minor, and, for those that call AWS APIs,
their own EKS Pod Identity role (least privilege: one AWS-managed policy per driver, nothing on
the node role)."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from components.clouds.aws import iam
from components.clouds.aws.options import named_options


def addon_version(addon: str, kubernetes_version: str, parent: pulumi.Resource) -> pulumi.Output[str]:
    """The add-on version EKS itself picks by default for this Kubernetes minor, looked up at deploy time.

    EKS refuses a version it does not list as compatible with the cluster's minor
    ("InvalidParameterException: Addon version specified is not supported", hashicorp/terraform-provider-aws#20559),
    and a hard-coded one goes stale (the 2024-25 pins were, for a 1.35 cluster: issue 20). DescribeAddonVersions
    for the minor answers from AWS's own compatibility list, as terraform-aws-eks does
    (`data "aws_eks_addon_version"`). most_recent=False: the minor's default version, so a `pulumi up`
    does not upgrade an add-on just because AWS published a newer build; a new cluster minor brings
    its own default.
    https://docs.aws.amazon.com/eks/latest/APIReference/API_DescribeAddonVersions.html
    """
    found = aws.eks.get_addon_version_output(
        addon_name=addon,
        kubernetes_version=kubernetes_version,
        most_recent=False,
        opts=pulumi.InvokeOutputOptions(parent=parent),
    )
    return found.version


def create_addon(
    name: str,
    *,
    parent: pulumi.Resource,
    cluster: aws.eks.Cluster,
    addon: str,
    kubernetes_version: str,
    depends_on: list[pulumi.Resource] | None = None,
    **extra,
) -> aws.eks.Addon:
    """An add-on at the minor's version. OVERWRITE on update too, as terraform-aws-eks does, so a
    version bump is not refused over fields EKS manages itself. Delete-before-replace: one add-on
    of a name per cluster."""
    return aws.eks.Addon(
        name,
        cluster_name=cluster.name,
        addon_name=addon,
        addon_version=addon_version(addon, kubernetes_version, parent),
        resolve_conflicts_on_update="OVERWRITE",
        **extra,
        opts=named_options(parent, depends_on),
    )


def create_addon_with_identity(
    name: str,
    *,
    parent: pulumi.Resource,
    cluster: aws.eks.Cluster,
    addon: str,
    kubernetes_version: str,
    service_account: str,
    managed_policy: str,
    partition: str,
    depends_on: list[pulumi.Resource],
) -> aws.eks.Addon:
    """An add-on whose controller's service account assumes its own role.

    `depends_on`: the node groups. A component's depends_on does not reach its children (Pulumi
    SDK: a child inherits only protect and providers from its parent), so it is passed here; the
    controller needs nodes to run on, and on destroy it must go before them.
    """
    child = pulumi.ResourceOptions(parent=parent)
    role = aws.iam.Role(f"{name}-role", assume_role_policy=iam.pod_identity_trust_policy(), opts=child)
    attachment = aws.iam.RolePolicyAttachment(
        f"{name}-policy",
        role=role.name,
        policy_arn=iam.managed_policy_arn(partition, managed_policy),
        opts=child,
    )
    return create_addon(
        f"{name}-driver",
        parent=parent,
        cluster=cluster,
        addon=addon,
        kubernetes_version=kubernetes_version,
        depends_on=[attachment, *depends_on],
        pod_identity_associations=[{"role_arn": role.arn, "service_account": service_account}],
    )
