"""IAM policy documents as pure functions (so parliament and the tests read exactly what ships).

Least privilege: read-only describe actions on "*" (they support no resource scoping), and
every mutating action scoped to this cluster's own resources.
"""

from __future__ import annotations

import json

VERSION = "2012-10-17"

# Managed policies EKS documents for its roles:
# https://docs.aws.amazon.com/eks/latest/userguide/cluster-iam-role.html
CLUSTER_MANAGED_POLICIES = ("AmazonEKSClusterPolicy",)
# https://docs.aws.amazon.com/eks/latest/userguide/create-node-role.html
# AmazonEKS_CNI_Policy stays on the node role, although AWS recommends a separate role for aws-node
# (awsdocs/amazon-eks-user-guide create-node-role.adoc; AWS review, "Other notes"): with the VPC CNI
# on EKS Pod Identity, a new node becomes Ready only once aws-node has credentials, which come from
# the eks-pod-identity-agent DaemonSet on that same node; an agent that does not tolerate the
# not-ready taint never lands there, and the node never joins (terraform-aws-modules/terraform-aws-eks
# #3621, open 2026-01; aws-node crash-loops without the agent: aws/amazon-vpc-cni-k8s#3840, 2026-08).
# What the policy grants (ENI and IP management) is reachable only by hostNetwork pods: the launch
# template's IMDS hop limit of 1 keeps other pods from the node role (nodegroups.py), and the
# training namespace's `restricted` level refuses hostNetwork.
NODE_MANAGED_POLICIES = (
    "AmazonEKSWorkerNodePolicy",
    "AmazonEKS_CNI_Policy",
    "AmazonEC2ContainerRegistryReadOnly",
)
# AWS-maintained, scoped by tags to access points the driver itself creates:
# https://docs.aws.amazon.com/eks/latest/userguide/efs-csi.html
EFS_CSI_MANAGED_POLICY = "service-role/AmazonEFSCSIDriverPolicy"
# https://docs.aws.amazon.com/eks/latest/userguide/ebs-csi.html (also scoped by tags to its own volumes)
EBS_CSI_MANAGED_POLICY = "service-role/AmazonEBSCSIDriverPolicy"


def managed_policy_arn(partition: str, name: str) -> str:
    return f"arn:{partition}:iam::aws:policy/{name}"


def assume_role_policy(service: str) -> str:
    """Trust policy for an AWS service principal (eks, ec2)."""
    return json.dumps(
        {
            "Version": VERSION,
            "Statement": [{"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}],
        }
    )


def pod_identity_trust_policy() -> str:
    """Trust policy for EKS Pod Identity: the agent assumes the role and tags the session.

    https://docs.aws.amazon.com/eks/latest/userguide/pod-id-role.html
    """
    return json.dumps(
        {
            "Version": VERSION,
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": "pods.eks.amazonaws.com"},
                    "Action": ["sts:AssumeRole", "sts:TagSession"],
                }
            ],
        }
    )


def cluster_autoscaler_policy(partition: str, region: str, account: str, cluster: str, asg_names: list[str]) -> str:
    """The cluster autoscaler's permissions: describe anything, scale only this cluster's groups.

    Follows the autoscaler's AWS guide ("Full Cluster Autoscaler Features Policy", minus the
    launch-template and instance-requirements writes it does not need for managed node groups):
    https://github.com/kubernetes/autoscaler/blob/master/cluster-autoscaler/cloudprovider/aws/README.md#iam-policy
    """
    asg_arns = [
        f"arn:{partition}:autoscaling:{region}:{account}:autoScalingGroup:*:autoScalingGroupName/{name}"
        for name in asg_names
    ]
    return json.dumps(
        {
            "Version": VERSION,
            "Statement": [
                {
                    "Sid": "DescribeForScalingDecisions",
                    "Effect": "Allow",
                    "Action": [
                        "autoscaling:DescribeAutoScalingGroups",
                        "autoscaling:DescribeAutoScalingInstances",
                        "autoscaling:DescribeLaunchConfigurations",
                        "autoscaling:DescribeScalingActivities",
                        "autoscaling:DescribeTags",
                        "ec2:DescribeImages",
                        "ec2:DescribeInstanceTypes",
                        "ec2:DescribeLaunchTemplateVersions",
                        "ec2:GetInstanceTypesFromInstanceRequirements",
                    ],
                    "Resource": "*",
                },
                {
                    "Sid": "DescribeOwnNodegroups",
                    "Effect": "Allow",
                    "Action": ["eks:DescribeNodegroup"],
                    "Resource": f"arn:{partition}:eks:{region}:{account}:nodegroup/{cluster}/*/*",
                },
                {
                    "Sid": "ScaleOnlyThisClustersGroups",
                    "Effect": "Allow",
                    "Action": ["autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup"],
                    "Resource": asg_arns,
                    # Belt and braces: the groups must also carry this cluster's ownership tag,
                    # which EKS managed node groups put on their groups.
                    "Condition": {"StringEquals": {f"aws:ResourceTag/k8s.io/cluster-autoscaler/{cluster}": "owned"}},
                },
            ],
        }
    )
