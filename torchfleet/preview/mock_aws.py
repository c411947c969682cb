"""Computed outputs and invoke answers of the AWS provider under mocks."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

ACCOUNT = "123456789012"
REGION = "us-west-2"


def _arn(service: str, resource: str) -> str:
    return f"arn:aws:{service}:{REGION}:{ACCOUNT}:{resource}"


# The provider appends 26 characters to a name prefix (a timestamp and a counter).
NAME_SUFFIX = "20261125000000000000000001"


def _node_group_name(a) -> str:
    if "nodeGroupName" in a.inputs:
        return a.inputs["nodeGroupName"]
    return a.inputs.get("nodeGroupNamePrefix", a.name + "-") + NAME_SUFFIX


RESOURCES: dict = {
    "aws:eks/cluster:Cluster": lambda a: {
        "arn": _arn("eks", f"cluster/{a.inputs.get('name', a.name)}"),
        "endpoint": f"https://{a.name}.gr7.{REGION}.eks.amazonaws.com",
        "certificateAuthority": {"data": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t"},
        "vpcConfig": {**a.inputs.get("vpcConfig", {}), "clusterSecurityGroupId": f"sg-{a.name}-cluster"},
        "identities": [{"oidcs": [{"issuer": f"https://oidc.eks.{REGION}.amazonaws.com/id/MOCK"}]}],
    },
    "aws:eks/nodeGroup:NodeGroup": lambda a: {
        "nodeGroupName": _node_group_name(a),
        "arn": _arn("eks", f"nodegroup/{_node_group_name(a)}"),
        # EKS names the group's Auto Scaling group eks-<nodegroup>-<uuid>.
        "resources": [{"autoscalingGroups": [{"name": f"eks-{_node_group_name(a)}-0a1b2c3d"}]}],
    },
    "aws:eks/accessEntry:AccessEntry": lambda a: {"accessEntryArn": _arn("eks", f"access-entry/{a.name}")},
    "aws:iam/role:Role": lambda a: {"arn": f"arn:aws:iam::{ACCOUNT}:role/{a.name}"},
    "aws:kms/key:Key": lambda a: {"arn": _arn("kms", f"key/{a.name}")},
    "aws:efs/fileSystem:FileSystem": lambda a: {"arn": _arn("elasticfilesystem", f"file-system/fs-{a.name}")},
    "aws:efs/accessPoint:AccessPoint": lambda a: {"arn": _arn("elasticfilesystem", f"access-point/fsap-{a.name}")},
    "aws:ec2/launchTemplate:LaunchTemplate": lambda a: {"latestVersion": 1},
}

# What DescribeAddonVersions would name as an add-on's default for a minor (the mock's stand-in: a real
# lookup needs AWS). Keyed on the minor, as EKS's answer is: one version for every minor hid the add-on
# updates of a Kubernetes upgrade from `torchfleet plan`. The major: v2 for the S3 driver, whose version
# the program checks (clouds/aws/datasets.py wants v2 or later), v0 for the others.
MOCK_ADDON_MAJORS = {"aws-mountpoint-s3-csi-driver": 2}


def addon_version(addon: str, kubernetes_version: str) -> str:
    """The mock's default version of `addon` for the cluster minor `kubernetes_version` ("1.35")."""
    minor = kubernetes_version.split(".")[1]
    return f"v{MOCK_ADDON_MAJORS.get(addon, 0)}.{minor}.0-eksbuild.mock"

# The cluster the program reads as running (components/clouds/aws/live.py): none by default, as before
# the first `up`. Tests of a day-2 change put the cluster of the first config here:
# {"<cluster name>": {"version": "1.35", "zones": [...], "bootstrap": False,
#                     "nodeGroups": {"<name>": {"version": "1.35", "min": 0, "max": 8, "desired": 3}}}}
LIVE_CLUSTERS: dict = {}


@contextlib.contextmanager
def running(resources: list) -> Iterator[None]:
    """LIVE_CLUSTERS set, for the block, to the EKS cluster `resources` (a synth's) would leave running:
    its version, the zones of its subnets, its creator-entry flag and each node group's scaling, as
    DescribeCluster and DescribeNodegroup would answer after that program's `up`. torchfleet plan runs
    the changed program inside it, as `pulumi preview` would run it against the deployed stack."""
    by_key = {f"{r.name}-id": r for r in resources if r.type == "aws:ec2/subnet:Subnet"}
    live = {}
    for c in (r for r in resources if r.type == "aws:eks/cluster:Cluster"):
        groups = {}
        for g in (r for r in resources if r.type == "aws:eks/nodeGroup:NodeGroup"):
            s = g.inputs.get("scalingConfig", {})
            groups[g.inputs.get("nodeGroupName") or g.inputs.get("nodeGroupNamePrefix", "") + NAME_SUFFIX] = {
                "version": g.inputs.get("version", c.inputs.get("version")),
                "min": int(s.get("minSize", 0)), "max": int(s.get("maxSize", 1)),
                "desired": int(s.get("desiredSize", 0)),
            }
        zones = [by_key[i].inputs["availabilityZone"] for i in c.inputs["vpcConfig"]["subnetIds"] if i in by_key]
        live[c.inputs["name"]] = {
            "version": c.inputs.get("version"),
            "zones": zones,
            "bootstrap": c.inputs.get("accessConfig", {}).get("bootstrapClusterCreatorAdminPermissions", True),
            "nodeGroups": groups,
        }
    before = dict(LIVE_CLUSTERS)
    LIVE_CLUSTERS.clear()
    LIVE_CLUSTERS.update(live)
    try:
        yield
    finally:
        LIVE_CLUSTERS.clear()
        LIVE_CLUSTERS.update(before)


def _live(name: str) -> dict:
    return LIVE_CLUSTERS[name]


_LIVE_SUBNET = "subnet-live-"  # + the zone: DescribeSubnets answers the zone back


def _get_cluster(a) -> dict:
    c = _live(a.args["name"])
    return {
        "name": a.args["name"],
        "id": a.args["name"],
        "version": c["version"],
        "vpcConfig": {"subnetIds": [_LIVE_SUBNET + z for z in c["zones"]]},
        "accessConfigs": [
            {"authenticationMode": "API", "bootstrapClusterCreatorAdminPermissions": c.get("bootstrap", False)}
        ],
    }


def _get_node_group(a) -> dict:
    g = _live(a.args["clusterName"])["nodeGroups"][a.args["nodeGroupName"]]
    return {
        "clusterName": a.args["clusterName"],
        "nodeGroupName": a.args["nodeGroupName"],
        "id": a.args["nodeGroupName"],
        "version": g["version"],
        "scalingConfigs": [{"minSize": g["min"], "maxSize": g["max"], "desiredSize": g["desired"]}],
    }


CALLS: dict = {
    "aws:eks/getClusters:getClusters": lambda a: {"names": sorted(LIVE_CLUSTERS), "id": "us-west-2"},
    "aws:eks/getCluster:getCluster": _get_cluster,
    "aws:ec2/getSubnet:getSubnet": lambda a: {
        "id": a.args["id"], "availabilityZone": a.args["id"].removeprefix(_LIVE_SUBNET)},
    "aws:eks/getNodeGroups:getNodeGroups": lambda a: {
        "clusterName": a.args["clusterName"], "id": a.args["clusterName"],
        "names": sorted(_live(a.args["clusterName"]).get("nodeGroups", {})),
    },
    "aws:eks/getNodeGroup:getNodeGroup": _get_node_group,
    "aws:iam/getSessionContext:getSessionContext": lambda a: {
        "arn": a.args["arn"], "id": a.args["arn"], "issuerArn": a.args["arn"],
    },
    "aws:eks/getAddonVersion:getAddonVersion": lambda a: {
        "addonName": a.args["addonName"],
        "kubernetesVersion": a.args["kubernetesVersion"],
        "version": addon_version(a.args["addonName"], a.args["kubernetesVersion"]),
        "id": a.args["addonName"],
    },
    # storage.adopt: the file system an earlier destroy kept, found by its creation token.
    "aws:efs/getFileSystem:getFileSystem": lambda a: {
        "creationToken": a.args.get("creationToken"),
        "fileSystemId": "fs-0adopted",
        "id": "fs-0adopted",
    },
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
