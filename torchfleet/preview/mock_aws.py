"""Computed outputs and invoke answers of the AWS provider under mocks."""

from __future__ import annotations

ACCOUNT = "123456789012"
REGION = "us-west-2"


def _arn(service: str, resource: str) -> str:
    return f"arn:aws:{service}:{REGION}:{ACCOUNT}:{resource}"


RESOURCES: dict = {
    "aws:eks/cluster:Cluster": lambda a: {
        "arn": _arn("eks", f"cluster/{a.inputs.get('name', a.name)}"),
        "endpoint": f"https://{a.name}.gr7.{REGION}.eks.amazonaws.com",
        "certificateAuthority": {"data": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t"},
        "vpcConfig": {**a.inputs.get("vpcConfig", {}), "clusterSecurityGroupId": f"sg-{a.name}-cluster"},
        "identities": [{"oidcs": [{"issuer": f"https://oidc.eks.{REGION}.amazonaws.com/id/MOCK"}]}],
    },
    "aws:eks/nodeGroup:NodeGroup": lambda a: {
        "arn": _arn("eks", f"nodegroup/{a.inputs.get('nodeGroupName', a.name)}"),
        # EKS names the group's Auto Scaling group eks-<nodegroup>-<uuid>.
        "resources": [{"autoscalingGroups": [{"name": f"eks-{a.inputs.get('nodeGroupName', a.name)}-0a1b2c3d"}]}],
    },
    "aws:iam/role:Role": lambda a: {"arn": f"arn:aws:iam::{ACCOUNT}:role/{a.name}"},
    "aws:kms/key:Key": lambda a: {"arn": _arn("kms", f"key/{a.name}")},
    "aws:efs/fileSystem:FileSystem": lambda a: {"arn": _arn("elasticfilesystem", f"file-system/fs-{a.name}")},
    "aws:efs/accessPoint:AccessPoint": lambda a: {"arn": _arn("elasticfilesystem", f"access-point/fsap-{a.name}")},
    "aws:ec2/launchTemplate:LaunchTemplate": lambda a: {"latestVersion": 1},
}

CALLS: dict = {
    "aws:index/getCallerIdentity:getCallerIdentity": lambda a: {
        "accountId": ACCOUNT,
        "arn": f"arn:aws:iam::{ACCOUNT}:user/deployer",
        "userId": "AIDAMOCK",
        "id": ACCOUNT,
    },
    "aws:index/getPartition:getPartition": lambda a: {
        "partition": "aws",
        "dnsSuffix": "amazonaws.com",
        "reverseDnsPrefix": "com.amazonaws",
        "id": "aws",
    },
}
