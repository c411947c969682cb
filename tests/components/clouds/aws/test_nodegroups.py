import pytest

from components.catalog import Machine
from components.clouds.aws.nodegroups import GPU_AMI, launch_template_args, manager_zone_sizes, scale_from_zero_tags
from components.clouds.aws.options import nodegroup_options
from components.spec import GpuPoolSpec
from torchfleet.preview.mock_aws import NAME_SUFFIX

GPU_GROUPS = {
    # fixture: {pool name: (zone, capacity, instance types, min, max)}
    "aws_example": {
        "gpu-t4-us-west-2a": ("us-west-2a", "SPOT", ["g4dn.xlarge"], 0, 8),
        "gpu-t4-us-west-2b": ("us-west-2b", "SPOT", ["g4dn.xlarge"], 0, 8),
        "gpu-a10g-us-west-2a": ("us-west-2a", "ON_DEMAND", ["g5.xlarge"], 0, 2),
    },
    "aws_three_zones": {
        **{f"gpu-t4-us-east-1{z}": (f"us-east-1{z}", "SPOT", ["g4dn.xlarge"], 0, 4) for z in "abc"},
        **{f"gpu-a10g-us-east-1{z}": (f"us-east-1{z}", "ON_DEMAND", ["g5.12xlarge"], 1, 2) for z in "abc"},
    },
}
# fixture: {manager group: (zone, min, max)}: managerPool {minNodes: 1, maxNodes: 3} in both
# (the stack's and the default), split over the zones with the remainder to the earlier ones.
MANAGER_GROUPS = {
    "aws_example": {"manager-us-west-2a": ("us-west-2a", 1, 2), "manager-us-west-2b": ("us-west-2b", 0, 1)},
    "aws_three_zones": {f"manager-us-east-1{z}": (f"us-east-1{z}", int(z == "a"), 1) for z in "abc"},
}

# fixture: {CPU group: (zone, min, max)}: the example stack's cpuPool {machineType: m6i.large, maxNodes: 2} over
# both zones, from zero; the three-zone config declares none.
CPU_GROUPS = {
    "aws_example": {"cpu-us-west-2a": ("us-west-2a", 0, 1), "cpu-us-west-2b": ("us-west-2b", 0, 1)},
    "aws_three_zones": {},
}


def _pool(group) -> str:
    """The pool a node group implements: its name prefix without the trailing '-'."""
    return group.inputs["nodeGroupNamePrefix"].removesuffix("-")


def _subnet_zone(result, subnet_id):
    subnet = next(s for s in result.of_type("aws:ec2/subnet:Subnet") if f"{s.name}-id" == subnet_id)
    return subnet.inputs["availabilityZone"]


@pytest.mark.parametrize("fixture", GPU_GROUPS)
def test_one_gpu_group_per_gpu_and_zone(request, fixture):
    result = request.getfixturevalue(fixture)
    groups = {_pool(g): g for g in result.of_type("aws:eks/nodeGroup:NodeGroup")}
    assert set(groups) == {*MANAGER_GROUPS[fixture], *CPU_GROUPS[fixture], *GPU_GROUPS[fixture]}
    for pool, (zone, capacity, types, lo, hi) in GPU_GROUPS[fixture].items():
        g = groups[pool].inputs
        assert [_subnet_zone(result, s) for s in g["subnetIds"]] == [zone]
        assert g["capacityType"] == capacity
        assert g["instanceTypes"] == types
        assert g["amiType"] == GPU_AMI == "AL2023_x86_64_NVIDIA"
        assert g["scalingConfig"] == {"minSize": lo, "maxSize": hi, "desiredSize": lo}
        gpu = pool.split("-")[1]
        assert g["labels"] == {
            "torchfleet.io/pool": "gpu",
            "torchfleet.io/gpu": gpu,
            "torchfleet.io/capacity": "spot" if capacity == "SPOT" else "on-demand",
            "nvidia.com/gpu.present": "true",
            "k8s.amazonaws.com/accelerator": f"nvidia-{gpu}",
        }
        assert g["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}]


@pytest.mark.parametrize("fixture", MANAGER_GROUPS)
def test_one_on_demand_manager_group_per_zone(request, fixture):
    """Regression (issue 20, AWS review M7): one manager group spanned every zone, so the autoscaler
    could not grow it in the zone of a lost etcd member's EBS volume, which then stayed Pending."""
    result = request.getfixturevalue(fixture)
    groups = {_pool(g): g for g in result.of_type("aws:eks/nodeGroup:NodeGroup") if _pool(g).startswith("manager")}
    assert set(groups) == set(MANAGER_GROUPS[fixture])
    for pool, (zone, lo, hi) in MANAGER_GROUPS[fixture].items():
        g = groups[pool].inputs
        assert [_subnet_zone(result, s) for s in g["subnetIds"]] == [zone]
        assert g["capacityType"] == "ON_DEMAND"
        assert g["instanceTypes"] == ["m6i.large"]
        assert g["labels"] == {"torchfleet.io/pool": "manager"}
        # Only platform pods and EKS's own add-ons (CoreDNS, the CSI controllers) land beside etcd: an untainted
        # group took every pod without a GPU selector, researchers' CPU jobs included (issue 30).
        assert g["taints"] == [{"key": "CriticalAddonsOnly", "value": "true", "effect": "NO_SCHEDULE"}]
        assert g["scalingConfig"] == {"minSize": lo, "maxSize": hi, "desiredSize": lo}


@pytest.mark.parametrize("fixture", MANAGER_GROUPS)
def test_no_node_group_spans_zones(request, fixture):
    """The class of M7: a pod bound to a zonal volume needs a group the autoscaler can grow in that
    zone, so every node group, manager or GPU, has exactly one subnet (one zone)."""
    result = request.getfixturevalue(fixture)
    for g in result.of_type("aws:eks/nodeGroup:NodeGroup"):
        assert len(g.inputs["subnetIds"]) == 1, _pool(g)


@pytest.mark.parametrize("n_zones", [1, 2, 3, 4])
@pytest.mark.parametrize(("lo", "hi"), [(0, 1), (1, 1), (1, 3), (2, 3), (3, 3), (0, 7), (5, 10), (100, 450)])
def test_manager_sizes_split_over_zones_keep_the_totals(n_zones, lo, hi):
    zones = tuple(f"z{i}" for i in range(n_zones))
    sizes = manager_zone_sizes(zones, lo, hi)
    assert sum(z[0] for z in sizes.values()) == lo
    assert sum(z[1] for z in sizes.values()) == hi
    assert list(sizes) == list(zones[: min(n_zones, hi)])  # a zone with no share of maxNodes has no group
    assert all(zhi >= 1 and 0 <= zlo <= zhi for zlo, zhi in sizes.values())  # EKS: maxSize >= 1, min <= max
    assert max(z[1] for z in sizes.values()) - min(z[1] for z in sizes.values()) <= 1


@pytest.mark.parametrize("fixture", MANAGER_GROUPS)
def test_manager_groups_can_scale_from_zero_in_their_zone(request, fixture):
    """A zone's manager group may start at zero nodes; the template node must carry the label the
    control pods (etcd, the autoscaler) select, or the autoscaler never grows that zone for them."""
    result = request.getfixturevalue(fixture)
    tags = {}
    for t in result.of_type("aws:autoscaling/tag:Tag"):
        tags.setdefault(t.inputs["autoscalingGroupName"], {})[t.inputs["tag"]["key"]] = t.inputs["tag"]["value"]
    for pool in MANAGER_GROUPS[fixture]:
        assert tags[f"eks-{pool}-{NAME_SUFFIX}-0a1b2c3d"] == {
            "k8s.io/cluster-autoscaler/node-template/label/torchfleet.io/pool": "manager",
            "k8s.io/cluster-autoscaler/node-template/taint/CriticalAddonsOnly": "true:NoSchedule",
        }


@pytest.mark.parametrize("fixture", CPU_GROUPS)
def test_the_cpu_pool_is_one_tainted_group_per_zone_from_zero(request, fixture):
    """torchfleet:cpuPool (issue 30): where the CLI's pods without a GPU run; labelled and tainted
    torchfleet.io/pool=cpu, and its template node says so, so the autoscaler grows it from zero for them only."""
    result = request.getfixturevalue(fixture)
    groups = {_pool(g): g for g in result.of_type("aws:eks/nodeGroup:NodeGroup") if _pool(g).startswith("cpu-")}
    assert set(groups) == set(CPU_GROUPS[fixture])
    tags = {}
    for t in result.of_type("aws:autoscaling/tag:Tag"):
        tags.setdefault(t.inputs["autoscalingGroupName"], {})[t.inputs["tag"]["key"]] = t.inputs["tag"]["value"]
    prefix = "k8s.io/cluster-autoscaler/node-template"
    for pool, (zone, lo, hi) in CPU_GROUPS[fixture].items():
        g = groups[pool].inputs
        assert [_subnet_zone(result, s) for s in g["subnetIds"]] == [zone]
        assert (g["capacityType"], g["instanceTypes"], g["amiType"]) == ("ON_DEMAND", ["m6i.large"],
                                                                          "AL2023_x86_64_STANDARD")
        assert g["labels"] == {"torchfleet.io/pool": "cpu", "torchfleet.io/capacity": "on-demand"}
        assert g["taints"] == [{"key": "torchfleet.io/pool", "value": "cpu", "effect": "NO_SCHEDULE"}]
        assert g["scalingConfig"] == {"minSize": lo, "maxSize": hi, "desiredSize": lo}
        assert tags[f"eks-{pool}-{NAME_SUFFIX}-0a1b2c3d"] == {
            f"{prefix}/label/torchfleet.io/pool": "cpu",
            f"{prefix}/label/torchfleet.io/capacity": "on-demand",
            f"{prefix}/taint/torchfleet.io/pool": "cpu:NoSchedule",
            f"{prefix}/resources/ephemeral-storage": "90Gi",
        }


def test_every_group_uses_an_imdsv2_launch_template(aws_example):
    templates = aws_example.of_type("aws:ec2/launchTemplate:LaunchTemplate")
    assert len(templates) == len(aws_example.of_type("aws:eks/nodeGroup:NodeGroup")) == 7
    for t in templates:
        assert t.inputs["metadataOptions"]["httpTokens"] == "required"
        assert t.inputs["metadataOptions"]["httpPutResponseHopLimit"] == 1
        assert t.inputs["blockDeviceMappings"][0]["ebs"]["encrypted"] == "true"
        assert "networkInterfaces" not in t.inputs
    by_id = {f"{t.name}-id" for t in templates}
    assert all(g.inputs["launchTemplate"]["id"] in by_id for g in aws_example.of_type("aws:eks/nodeGroup:NodeGroup"))


def test_launch_template_disk_size():
    assert launch_template_args(321)["block_device_mappings"][0]["ebs"]["volume_size"] == 321


def test_desired_size_is_sent_from_the_live_group_not_ignored(aws_example):
    """Issue 29: an ignored desired size is the state's, stale once the autoscaler moved it, and the
    provider sends it with every min/max change (raising minNodes above it failed). live.py sends the
    group's current size instead; with no cluster yet (the mock's default) that is minNodes."""
    assert not nodegroup_options(None, []).ignore_changes
    for g in aws_example.of_type("aws:eks/nodeGroup:NodeGroup"):
        assert not g.options.get("ignoreChanges")
        assert g.inputs["scalingConfig"]["desiredSize"] == g.inputs["scalingConfig"]["minSize"]
        assert g.inputs["version"] == "1.35"  # nodes follow the control plane's minor


def test_scale_from_zero_tags_describe_the_template_node():
    pool = GpuPoolSpec("a10g", "us-east-1a", (Machine("g5.12xlarge", 4, 48, 192),), 0, 2)
    prefix = "k8s.io/cluster-autoscaler/node-template"
    assert scale_from_zero_tags(pool) == {
        f"{prefix}/label/torchfleet.io/pool": "gpu",
        f"{prefix}/label/torchfleet.io/gpu": "a10g",
        f"{prefix}/label/torchfleet.io/capacity": "spot",
        f"{prefix}/label/nvidia.com/gpu.present": "true",
        # Regression (issue 20, AWS review M1): without it the autoscaler launched extra GPU nodes
        # while the device plugin started.
        f"{prefix}/label/k8s.amazonaws.com/accelerator": "nvidia-a10g",
        f"{prefix}/taint/nvidia.com/gpu": "present:NoSchedule",
        f"{prefix}/resources/nvidia.com/gpu": "4",
        f"{prefix}/resources/ephemeral-storage": "180Gi",
    }


# What a GPU node offers pods, and what the AWS autoscaler's template node takes from the instance
# type without a tag (aws_manager.go buildNodeFromTemplate: pods, cpu, memory; nvidia.com/gpu from
# its own table, which the tag overrides).
NODE_RESOURCES = {"cpu", "memory", "pods", "ephemeral-storage", "nvidia.com/gpu"}
FROM_INSTANCE_TYPE = {"cpu", "memory", "pods"}


@pytest.mark.parametrize("disk_gb", [20, 100, 200, 333, 2000])
def test_the_template_node_declares_every_resource_a_pod_may_request(disk_gb):
    """Regression (issue 20, AWS review m8): the template node had no ephemeral-storage, so a pod
    requesting any never scaled a pool up from zero. The class: every resource a real node offers is
    either derived from the instance type or tagged, and no tag promises more than a node has."""
    pool = GpuPoolSpec("t4", "us-west-2a", (Machine("g4dn.xlarge", 1, 4, 16),), 0, 2, disk_size_gb=disk_gb)
    prefix = "k8s.io/cluster-autoscaler/node-template/resources/"
    tagged = {k.removeprefix(prefix): v for k, v in scale_from_zero_tags(pool).items() if k.startswith(prefix)}
    assert FROM_INSTANCE_TYPE | set(tagged) >= NODE_RESOURCES
    ephemeral_gib = int(tagged["ephemeral-storage"].removesuffix("Gi"))
    assert 0 < ephemeral_gib <= disk_gb * 0.9  # the kubelet's nodefs.available<10% hard eviction


@pytest.mark.parametrize("fixture", GPU_GROUPS)
def test_each_gpu_groups_asg_carries_its_tags(request, fixture):
    result = request.getfixturevalue(fixture)
    tags = result.of_type("aws:autoscaling/tag:Tag")
    by_group: dict[str, dict[str, str]] = {}
    for t in tags:
        assert t.inputs["tag"]["propagateAtLaunch"] is False
        by_group.setdefault(t.inputs["autoscalingGroupName"], {})[t.inputs["tag"]["key"]] = t.inputs["tag"]["value"]
    # EKS names a managed node group's Auto Scaling group eks-<nodegroup>-<uuid> (see mock_aws).
    groups = {*GPU_GROUPS[fixture], *MANAGER_GROUPS[fixture], *CPU_GROUPS[fixture]}
    assert set(by_group) == {f"eks-{pool}-{NAME_SUFFIX}-0a1b2c3d" for pool in groups}
    for pool in GPU_GROUPS[fixture]:
        group_tags = by_group[f"eks-{pool}-{NAME_SUFFIX}-0a1b2c3d"]
        gpus = "4" if "a10g" in pool and fixture == "aws_three_zones" else "1"
        assert group_tags["k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu"] == gpus
        assert group_tags["k8s.io/cluster-autoscaler/node-template/label/torchfleet.io/gpu"] == pool.split("-")[1]


def test_tag_resources_are_named_by_their_key_not_their_position(aws_example):
    """Regression (issue 20, AWS review m3): tags named by index moved to other resources when a label
    was added, and two parallel updates could delete the key the other had just written."""
    tags = [t for t in aws_example.of_type("aws:autoscaling/tag:Tag") if "gpu-t4-us-west-2a" in t.name]
    assert {t.name.removeprefix("torchfleet-aws-nodes-gpu-t4-us-west-2a-") for t in tags} == {
        "label-torchfleet-io-pool",
        "label-torchfleet-io-gpu",
        "label-torchfleet-io-capacity",
        "label-nvidia-com-gpu-present",
        "label-k8s-amazonaws-com-accelerator",
        "taint-nvidia-com-gpu",
        "resources-nvidia-com-gpu",
        "resources-ephemeral-storage",
    }
