import json

import pytest
import yaml

from components.clouds.aws.autoscaling import (
    AUTOSCALER_CHART,
    AUTOSCALER_IMAGE_TAGS,
    DEVICE_PLUGIN_CHART,
    autoscaler_values,
    expander_priorities,
)
from components.clouds.traits import CLOUD_TRAITS
from components.spec import parse
from tests.components.spec.configs import config
from torchfleet.preview.mock_aws import NAME_SUFFIX


def _release(result, chart):
    return next(r for r in result.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["chart"] == chart)


def test_autoscaler_image_known_for_every_accepted_kubernetes_version():
    assert set(AUTOSCALER_IMAGE_TAGS) == set(CLOUD_TRAITS["aws"].kubernetes_versions)
    assert all(tag.startswith(f"v{minor}.") for minor, tag in AUTOSCALER_IMAGE_TAGS.items())


# Regression (2026-11-23): the image was pinned only for 1.30-1.34, so AWS refused 1.35 and 1.36
# (the only minors in standard support on all three clouds). The tags are kubernetes/autoscaler's
# cluster-autoscaler-1.35.2 and -1.36.1 releases.
@pytest.mark.parametrize("minor, tag", [("1.35", "v1.35.2"), ("1.36", "v1.36.1")])
def test_autoscaler_image_matches_the_cluster_minor(minor, tag):
    spec = parse(config("aws", kubernetesVersion=minor))
    assert autoscaler_values(spec, "torchfleet-test")["image"]["tag"] == tag


def test_autoscaler_chart_grants_what_the_newest_image_watches():
    # From 1.35 the autoscaler locks DRA on and lists resource.k8s.io objects; the chart's
    # ClusterRole grants them from 9.54.0 (kubernetes/autoscaler#8827). Chart 9.46.6 did not.
    newest = max(tuple(int(p) for p in minor.split(".")) for minor in AUTOSCALER_IMAGE_TAGS)
    chart = tuple(int(p) for p in AUTOSCALER_CHART["version"].split("."))
    assert newest < (1, 35) or chart >= (9, 54, 0)


def test_autoscaler_chart_is_pinned_and_configured(aws_three_zones):
    release = _release(aws_three_zones, "cluster-autoscaler")
    assert release.inputs["version"] == AUTOSCALER_CHART["version"]
    assert release.inputs["repositoryOpts"] == {"repo": "https://kubernetes.github.io/autoscaler"}
    values = release.inputs["values"]
    assert values["image"]["tag"] == "v1.35.2"
    assert values["autoDiscovery"]["clusterName"] == "torchfleet-aws-three"
    assert values["awsRegion"] == "us-east-1"
    assert values["nodeSelector"] == {"torchfleet.io/pool": "manager"}
    # The manager groups' taint (issue 30): without it the autoscaler would stay Pending on a new stack.
    assert values["tolerations"] == [
        {"key": "CriticalAddonsOnly", "operator": "Equal", "value": "true", "effect": "NoSchedule"}]
    args = values["extraArgs"]
    assert args["expander"] == "priority"
    # Off: a job keeps its pods in one zone, so a scale-up split over zones wastes nodes (AWS review m2).
    assert args["balance-similar-node-groups"] is False
    assert args["scale-down-unneeded-time"] == "3m"
    assert args["scale-down-delay-after-add"] == "4m"
    priorities = yaml.safe_load(values["expanderPriorities"])
    assert priorities[50] == [f".*-gpu-t4-us-east-1{z}-.*" for z in "abc"]
    assert priorities[10] == [f".*-gpu-a10g-us-east-1{z}-.*" for z in "abc"]
    assert priorities[1] == [".*"]


def test_expander_prefers_spot_over_on_demand():
    from components.spec import GpuPoolSpec

    pools = (GpuPoolSpec("t4", "z1", (), 0, 1, spot=True), GpuPoolSpec("t4", "z2", (), 0, 1, spot=False))
    p = expander_priorities(pools)
    assert max(p) == 50 and p[50] == [".*-gpu-t4-z1-.*"]
    assert p[10] == [".*-gpu-t4-z2-.*"]


def test_autoscaler_iam_scales_only_this_clusters_groups(aws_example):
    policy = json.loads(aws_example.one("aws:iam/rolePolicy:RolePolicy").inputs["policy"])
    statements = {s["Sid"]: s for s in policy["Statement"]}
    describe = statements["DescribeForScalingDecisions"]
    assert describe["Resource"] == "*"
    assert all(":Describe" in a or ":Get" in a for a in describe["Action"])
    scale = statements["ScaleOnlyThisClustersGroups"]
    assert scale["Action"] == ["autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup"]
    arn = (
        "arn:aws:autoscaling:us-west-2:123456789012:autoScalingGroup:*:autoScalingGroupName/eks-{}-"
        + NAME_SUFFIX
        + "-0a1b2c3d"
    )
    pools = ["gpu-t4-us-west-2a", "gpu-t4-us-west-2b", "gpu-a10g-us-west-2a"]
    pools += ["manager-us-west-2a", "manager-us-west-2b", "cpu-us-west-2a", "cpu-us-west-2b"]  # cpuPool too
    assert scale["Resource"] == sorted(arn.format(p) for p in pools)  # sorted: a zone reorder is no diff
    assert scale["Condition"] == {
        "StringEquals": {"aws:ResourceTag/k8s.io/cluster-autoscaler/torchfleet-aws-usw2": "owned"}
    }
    node_groups = statements["DescribeOwnNodegroups"]["Resource"]
    assert node_groups == "arn:aws:eks:us-west-2:123456789012:nodegroup/torchfleet-aws-usw2/*/*"


def test_autoscaler_identity_is_its_own_pod_identity_role(aws_example):
    association = aws_example.one("aws:eks/podIdentityAssociation:PodIdentityAssociation")
    assert (association.inputs["namespace"], association.inputs["serviceAccount"]) == (
        "kube-system",
        "cluster-autoscaler",
    )
    policy = aws_example.one("aws:iam/rolePolicy:RolePolicy")
    assert association.inputs["roleArn"].endswith("/" + policy.inputs["role"].removesuffix("-id"))


def test_device_plugin_lands_on_tainted_gpu_nodes(aws_example):
    release = _release(aws_example, "nvidia-device-plugin")
    assert release.inputs["version"] == DEVICE_PLUGIN_CHART["version"]
    # One pin for both clouds that install the plugin (AWS review: 0.17.1 was from 2025-03).
    from components.clouds.azure import device_plugin

    assert DEVICE_PLUGIN_CHART["version"] == device_plugin.CHART_VERSION
    values = release.inputs["values"]
    assert values["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in values["tolerations"]
