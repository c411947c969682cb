"""components.spec.parse: one test per invalid-config case of the spec issue.

Each test asserts the exact key path of the problem and the part of the message that helps
(the suggestion, the retirement date and replacement, the valid values), and that nothing else
is reported, so a rule that stops firing or starts firing elsewhere fails here.
"""

from __future__ import annotations

import dataclasses

import pytest

from components import catalog
from components.clouds.traits import CLOUD_TRAITS
from tests.components.spec.configs import BASE, PUBLIC, config, ok, only, pools, problems

GPU_POOLS = "torchfleet:gpuPools"


@pytest.mark.parametrize("cloud", sorted(BASE))
def test_base_configs_are_valid(cloud):
    # The control for every test below: each starts from one of these and breaks one thing.
    ok(BASE[cloud])


# ---------------------------------------------------------------- cloud and keys


@pytest.mark.parametrize("cloud", ["ibm", "AWS", "", None])
def test_unknown_cloud(cloud):
    message = only(config("aws", cloud=cloud), "torchfleet:cloud")
    assert message == f"must be one of aws, gcp, azure, local, got {cloud!r}"


def test_unknown_key_in_gpu_pool_suggests_the_close_one():
    found = problems(pools("aws", {"gpu": "t4", "maxNode": 4}))
    assert found == {
        f"{GPU_POOLS}[0].maxNode": ["unknown key; did you mean 'maxNodes'?"],
        # The typo also leaves the pool without its required maximum.
        f"{GPU_POOLS}[0].maxNodes": ["required: the most nodes the autoscaler may add (>= 1)"],
    }


@pytest.mark.parametrize(
    "section, value, typo, suggestion",
    [
        ("managerPool", {"machinType": "m6i.large"}, "machinType", "machineType"),
        ("storage", {"protct": False}, "protct", "protect"),
        ("training", {"etcdReplica": 3}, "etcdReplica", "etcdReplicas"),
        ("network", {"natGateway": "single", **PUBLIC}, "natGateway", "natGateways"),
        ("autoscaler", {"scaleDownUnneededTim": "5m"}, "scaleDownUnneededTim", "scaleDownUnneededTime"),
        ("guardrails", {"maxGPUs": 8}, "maxGPUs", "maxGpus"),
    ],
)
def test_unknown_key_in_a_section_suggests_the_close_one(section, value, typo, suggestion):
    message = only(config("aws", **{section: value}), f"torchfleet:{section}.{typo}")
    assert message == f"unknown key; did you mean '{suggestion}'?"


def test_unknown_key_with_no_close_match_lists_the_valid_keys():
    message = only(pools("aws", {"gpu": "t4", "maxNodes": 4, "colour": "green"}), f"{GPU_POOLS}[0].colour")
    assert message == (
        "unknown key; valid keys: diskSizeGb, encryptionAtHost, gpu, machineTypes, maxNodes, minNodes, spot, zones"
    )


def test_unknown_top_level_key_suggests_the_close_one():
    raw = config("aws", gpuPools=None)
    raw["torchfleet:gpuPool"] = [{"gpu": "t4", "maxNodes": 4}]
    found = problems(raw)
    assert found["torchfleet:gpuPool"] == ["unknown key; did you mean 'torchfleet:gpuPools'?"]
    # ... and the key it meant is missing, so the stack has no GPU pool: both are reported.
    assert list(found) == ["torchfleet:gpuPool", GPU_POOLS]


def test_unknown_top_level_key_is_reported_with_an_unknown_cloud():
    raw = config("aws", cloud="ibm")
    raw["torchfleet:zone"] = ["us-west-2a"]
    assert problems(raw) == {
        "torchfleet:zone": ["unknown key; did you mean 'torchfleet:zones'?"],
        "torchfleet:cloud": ["must be one of aws, gcp, azure, local, got 'ibm'"],
    }


@pytest.mark.parametrize(
    "cloud, missing",
    [("aws", "aws:region"), ("gcp", "gcp:region"), ("gcp", "gcp:project"), ("azure", "azure-native:location")],
)
def test_missing_provider_key(cloud, missing):
    raw = config(cloud)
    del raw[missing]
    assert only(raw, missing) == f"required for cloud {cloud}"


# ---------------------------------------------------------------- GPUs


@pytest.mark.parametrize("gpu", ["t5", "a100", "rtx4090", 4])
def test_unknown_gpu(gpu):
    message = only(pools("aws", {"gpu": gpu, "maxNodes": 4}), f"{GPU_POOLS}[0].gpu")
    assert message == (
        f"unknown GPU {gpu!r}; the catalog has: a100-40gb, a100-80gb, a10g, h100, k80, l4, t4, v100"
    )


def test_pool_without_a_gpu():
    # Regression: a pool with no `gpu` (or a misspelt one) was told "unknown GPU None".
    found = problems(pools("gcp", {"gpus": "t4", "maxNodes": 4}))
    assert found == {
        f"{GPU_POOLS}[0].gpus": ["unknown key; did you mean 'gpu'?"],
        f"{GPU_POOLS}[0].gpu": ["required; gcp offers: a100-40gb, a100-80gb, h100, l4, t4, v100"],
    }


@pytest.mark.parametrize(
    "cloud, gpu, date, replacement",
    [
        ("aws", "k80", "2024-09-30", "t4"),
        ("gcp", "k80", "2024-05-01", "t4"),
        ("azure", "k80", "2023-08-31", "t4"),
        ("azure", "v100", "2025-09-30", "a100-80gb"),
    ],
)
def test_retired_gpu_names_the_date_and_a_replacement(cloud, gpu, date, replacement):
    message = only(pools(cloud, {"gpu": gpu, "maxNodes": 4}), f"{GPU_POOLS}[0].gpu")
    assert message.startswith(f"{gpu} on {cloud} was retired on {date} (")
    assert message.endswith(f"); use {replacement} instead")
    assert catalog.offering(gpu, cloud).reason in message  # the why, from the catalog row


@pytest.mark.parametrize(
    "cloud, gpu, offered",
    [
        ("gcp", "a10g", "a100-40gb, a100-80gb, h100, l4, t4, v100"),
        # Azure's V100 is retired, so it is not offered either.
        ("azure", "a10g", "a100-40gb, a100-80gb, h100, t4"),
        ("azure", "l4", "a100-40gb, a100-80gb, h100, t4"),
    ],
)
def test_gpu_the_cloud_does_not_offer(cloud, gpu, offered):
    message = only(pools(cloud, {"gpu": gpu, "maxNodes": 4}), f"{GPU_POOLS}[0].gpu")
    assert message == f"{gpu} is not offered on {cloud}; {cloud} offers: {offered}"


# ---------------------------------------------------------------- zones


@pytest.mark.parametrize(
    "cloud, zone, zones",
    [
        ("aws", "us-east-1a", "us-west-2a, us-west-2b, us-west-2c, us-west-2d"),
        ("aws", "us-west-2", "us-west-2a, us-west-2b, us-west-2c, us-west-2d"),
        ("aws", "us-west-21a", "us-west-2a, us-west-2b, us-west-2c, us-west-2d"),
        ("aws", "us-west-2z", "us-west-2a, us-west-2b, us-west-2c, us-west-2d"),  # issue 12: accepted before
        ("gcp", "us-east1-b", "us-central1-a, us-central1-b, us-central1-c, us-central1-f"),
        ("gcp", "us-central1a", "us-central1-a, us-central1-b, us-central1-c, us-central1-f"),
        ("gcp", "us-central1-d", "us-central1-a, us-central1-b, us-central1-c, us-central1-f"),
    ],
)
def test_zone_not_in_the_region(cloud, zone, zones):
    # The region catalog (components/catalog/regions.yaml) lists each region's zones.
    region = BASE[cloud][f"{cloud}:region"]
    raw = config(cloud, zones=[BASE[cloud]["torchfleet:zones"][0], zone])
    message = only(raw, "torchfleet:zones[1]")
    assert message == f"zone {zone!r} is not in region {region}; its zones: {zones}"


@pytest.mark.parametrize("zone", ["4", "0", "eastus-1", "1a"])
def test_azure_zone_other_than_1_2_3(zone):
    message = only(config("azure", zones=["1", zone]), "torchfleet:zones[1]")
    assert message == f'zone {zone!r} is not in location eastus; its zones: "1", "2", "3"'


def test_azure_zone_is_checked_without_a_location():
    # Regression: the zone check ran only when the region was known, so a missing location hid
    # a bad Azure zone (whose valid values do not depend on the region) until the next run.
    raw = config("azure", zones=["1", "4"])
    del raw["azure-native:location"]
    assert list(problems(raw)) == ["azure-native:location", "torchfleet:zones[1]"]


def test_pool_zone_must_be_one_of_the_stack_zones():
    message = only(pools("aws", {"gpu": "t4", "maxNodes": 4, "zones": ["us-west-2c"]}), f"{GPU_POOLS}[0].zones")
    assert message == "'us-west-2c' is not one of torchfleet:zones ['us-west-2a', 'us-west-2b']"


def test_zone_listed_twice():
    # Regression: the repeated zone also reached the pools, which then blamed gpuPools[0] for
    # "t4 in zone us-west-2a is already gpuPools[0]": one mistake, reported at the wrong key.
    message = only(config("aws", zones=["us-west-2a", "us-west-2a", "us-west-2b"]), "torchfleet:zones")
    assert message == "each zone once, got ['us-west-2a', 'us-west-2a', 'us-west-2b']"


# ---------------------------------------------------------------- node counts and machines


@pytest.mark.parametrize(
    "section, key",
    [
        ("gpuPools", f"{GPU_POOLS}[0].minNodes"),
        ("managerPool", "torchfleet:managerPool.minNodes"),
    ],
)
def test_min_nodes_above_max_nodes(section, key):
    value = {"minNodes": 5, "maxNodes": 2}
    raw = pools("aws", {"gpu": "t4", **value}) if section == "gpuPools" else config("aws", managerPool=value)
    assert only(raw, key) == "minNodes (5) must not exceed maxNodes (2)"


def test_negative_min_nodes():
    message = only(pools("aws", {"gpu": "t4", "minNodes": -1, "maxNodes": 4}), f"{GPU_POOLS}[0].minNodes")
    assert message == "must be >= 0, got -1"


def test_zero_max_nodes():
    message = only(pools("aws", {"gpu": "t4", "maxNodes": 0}), f"{GPU_POOLS}[0].maxNodes")
    assert message == "must be >= 1, got 0"


# AWS only: an EKS node group takes several instance types; GKE and AKS pools take one (traits).
@pytest.mark.parametrize(
    "cloud, gpu, machines, detail",
    [
        ("aws", "t4", ["g4dn.xlarge", "g4dn.12xlarge"], "g4dn.xlarge=1, g4dn.12xlarge=4"),
        ("aws", "a10g", ["g5.2xlarge", "g5.12xlarge", "g5.48xlarge"], "g5.2xlarge=1, g5.12xlarge=4, g5.48xlarge=8"),
    ],
)
def test_machine_types_in_one_pool_with_different_gpu_counts(cloud, gpu, machines, detail):
    message = only(pools(cloud, {"gpu": gpu, "maxNodes": 4, "machineTypes": machines}), f"{GPU_POOLS}[0].machineTypes")
    assert message == f"machines in one pool must have the same GPU count, got {detail}"


@pytest.mark.parametrize(
    "cloud, gpu, machine",
    [
        ("aws", "t4", "g5.xlarge"),  # an A10G machine
        ("aws", "t4", "m6i.large"),  # no GPU at all
        ("gcp", "l4", "n1-standard-8"),  # L4 only comes on G2
        ("azure", "t4", "Standard_NC24ads_A100_v4"),
    ],
)
def test_machine_type_that_does_not_carry_the_gpu(cloud, gpu, machine):
    message = only(pools(cloud, {"gpu": gpu, "maxNodes": 4, "machineTypes": [machine]}), f"{GPU_POOLS}[0].machineTypes")
    valid = ", ".join(m.type for m in catalog.offering(gpu, cloud).machines)
    assert message == f"{machine} has no {gpu} on {cloud}; valid: {valid}"


def test_gpu_machine_as_the_manager_pool():
    message = only(config("aws", managerPool={"machineType": "g4dn.xlarge"}), "torchfleet:managerPool.machineType")
    assert message == "g4dn.xlarge is a GPU machine; the manager pool is for control pods"


@pytest.mark.parametrize("cloud", ["aws", "gcp", "azure"])
@pytest.mark.parametrize("value", [None, []])
def test_no_gpu_pools(cloud, value):
    message = only(config(cloud, gpuPools=value), GPU_POOLS)
    assert message == "list at least one GPU pool, e.g. [{gpu: t4, maxNodes: 4}]"


def test_same_gpu_twice_for_a_zone():
    raw = pools(
        "aws",
        {"gpu": "t4", "maxNodes": 4},  # both zones
        {"gpu": "T4", "maxNodes": 2, "zones": ["us-west-2b"]},  # GPU keys are case-insensitive
    )
    message = only(raw, f"{GPU_POOLS}[1].gpu")
    assert message == f"t4 in zone us-west-2b is already {GPU_POOLS}[0]; list each GPU once per zone"


def test_same_gpu_in_different_zones_is_fine():
    spec = ok(pools(
        "aws",
        {"gpu": "t4", "maxNodes": 4, "zones": ["us-west-2a"]},
        {"gpu": "t4", "maxNodes": 2, "zones": ["us-west-2b"], "machineTypes": ["g4dn.12xlarge"]},
    ))
    assert [(p.name, p.gpus_per_node) for p in spec.gpu_pools] == [("gpu-t4-us-west-2a", 1), ("gpu-t4-us-west-2b", 4)]


def test_local_stack_with_gpu_pools():
    message = only(config("local", gpuPools=[{"gpu": "t4", "maxNodes": 1}]), GPU_POOLS)
    assert message == "the local stack is CPU-only and has no GPU pools; remove this key"


def test_local_stack_with_zones():
    message = only(config("local", zones=["us-west-2a"]), "torchfleet:zones")
    assert message == "the local stack has no zones; remove this key"


# ---------------------------------------------------------------- storage


@pytest.mark.parametrize(
    "storage, tier, minimum, size",
    [
        ({"sizeGb": 512}, "BASIC_HDD", 1024, 512),  # the default tier
        ({"tier": "BASIC_HDD", "sizeGb": 1023}, "BASIC_HDD", 1024, 1023),
        ({"tier": "BASIC_SSD", "sizeGb": 1024}, "BASIC_SSD", 2560, 1024),
        ({"tier": "ZONAL", "sizeGb": 100}, "ZONAL", 1024, 100),
    ],
)
def test_filestore_size_below_the_tier_minimum(storage, tier, minimum, size):
    message = only(config("gcp", storage=storage), "torchfleet:storage.sizeGb")
    assert message == f"tier {tier} needs at least {minimum} GiB, got {size}"


@pytest.mark.parametrize(
    "storage, tier",
    [({"sizeGb": 50}, "Premium_LRS"), ({"tier": "Premium_ZRS", "sizeGb": 99}, "Premium_ZRS")],
)
def test_azure_share_size_below_the_minimum(storage, tier):
    message = only(config("azure", storage=storage), "torchfleet:storage.sizeGb")
    assert message == f"tier {tier} needs at least 100 GiB, got {storage['sizeGb']}"


@pytest.mark.parametrize(
    "cloud, tiers", [("gcp", "BASIC_HDD, BASIC_SSD, ZONAL, REGIONAL"), ("azure", "Premium_LRS, Premium_ZRS")]
)
def test_unknown_storage_tier(cloud, tiers):
    message = only(config(cloud, storage={"tier": "STANDARD"}), "torchfleet:storage.tier")
    assert message == f"must be one of {tiers}, got 'STANDARD'"


def test_storage_size_on_aws_which_grows_by_itself():
    message = only(config("aws", storage={"sizeGb": 1024}), "torchfleet:storage.sizeGb")
    assert message == "this cloud's store grows by itself; remove this key"


# ---------------------------------------------------------------- training, network, autoscaler


@pytest.mark.parametrize("operator", ["pytorchjob", "TorchElastic", ""])
def test_bad_operator(operator):
    message = only(config("aws", training={"operator": operator}), "torchfleet:training.operator")
    assert message == f"must be one of job, torchelastic, kubeflow, got {operator!r}"


@pytest.mark.parametrize("namespace", ["Elastic-Job", "elastic_job", "-jobs", "jobs-", "a" * 64, ""])
def test_bad_namespace(namespace):
    message = only(config("aws", training={"namespace": namespace}), "torchfleet:training.namespace")
    assert message == f"must be a DNS label (lowercase letters, digits, '-'), got {namespace!r}"


@pytest.mark.parametrize("replicas", [2, 4])
def test_even_etcd_replicas(replicas):
    message = only(config("aws", training={"etcdReplicas": replicas}), "torchfleet:training.etcdReplicas")
    assert message == f"etcd needs an odd member count for a quorum (1, 3, 5), got {replicas}"


@pytest.mark.parametrize(
    "cidr, message",
    [
        ("10.0.0.0/33", "expected an IPv4 CIDR like 10.0.0.0/16, got '10.0.0.0/33'"),
        ("10.0.0.1/16", "expected an IPv4 CIDR like 10.0.0.0/16, got '10.0.0.1/16'"),  # host bits set
        ("vpc", "expected an IPv4 CIDR like 10.0.0.0/16, got 'vpc'"),
        # Regression: ip_network() read the int 16 as the address 0.0.0.16/32 ("too small"),
        # and took IPv6 networks although the message and the VPCs want IPv4.
        (16, "expected an IPv4 CIDR like 10.0.0.0/16, got 16"),
        ("fd00::/48", "expected an IPv4 CIDR like 10.0.0.0/16, got 'fd00::/48'"),
        ("10.0.0.0/24", "10.0.0.0/24 is too small for per-zone node subnets; use /20 or larger, e.g. 10.0.0.0/16"),
    ],
)
def test_bad_cidr(cidr, message):
    assert only(config("aws", network={"cidr": cidr, **PUBLIC}), "torchfleet:network.cidr") == message


def test_bad_public_access_cidr():
    message = only(config("aws", network={"publicAccessCidrs": ["203.0.113.0/24", "office"]}),
                   "torchfleet:network.publicAccessCidrs")
    assert message == "expected CIDRs like 203.0.113.0/24, got 'office'"


@pytest.mark.parametrize("key", ["scaleDownUnneededTime", "scaleDownDelayAfterAdd"])
@pytest.mark.parametrize("duration", ["5 minutes", "300", "5min", "1d", 5])
def test_bad_duration(key, duration):
    message = only(config("aws", autoscaler={key: duration}), f"torchfleet:autoscaler.{key}")
    assert message == f"expected a duration like 5m, 300s or 1h, got {duration!r}"


@pytest.mark.parametrize("version", ["1.3", "1.33.1", "v1.33", "latest"])
def test_bad_kubernetes_version(version):
    message = only(config("aws", kubernetesVersion=version), "torchfleet:kubernetesVersion")
    assert message == f'expected a minor version like "1.35" (quoted), got {version!r}'


def test_more_aws_zones_than_the_network_layout_holds():
    # Regression (review): five zones crashed in the network code after resources were registered.
    zones = ["us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d", "us-east-1f"]
    raw = {**config("aws", zones=zones), "aws:region": "us-east-1"}
    message = only(raw, "torchfleet:zones")
    assert message == "at most 4 zones on aws, got 5; pick 4"


@pytest.mark.parametrize("version", ["1.29", "1.30", "1.37"])
def test_aws_kubernetes_version_eks_offers(version):
    # EKS offers 1.31-1.36 (catalog/kubernetes.yaml: 1.30 left extended support on 2026-07-23), and
    # aws/autoscaling.py pins an autoscaler image for each, so the list is EKS's alone.
    message = only(config("aws", kubernetesVersion=version), "torchfleet:kubernetesVersion")
    assert message.startswith("EKS offers 1.31, 1.32, 1.33, 1.34, 1.35, 1.36 (https://docs.aws.amazon.com/eks/")
    assert "autoscaler" not in message
    assert message.endswith(f"use one of 1.31, 1.32, 1.33, 1.34, 1.35, 1.36, got {version!r}")


def test_aws_kubernetes_version_without_an_autoscaler_image_is_refused(monkeypatch):
    # The cluster autoscaler image must match the cluster minor: a minor EKS offers before
    # aws/autoscaling.py pins an image for it (as 1.35 and 1.36 were until 2026-11-23) is refused.
    narrower = dataclasses.replace(CLOUD_TRAITS["aws"], kubernetes_versions=("1.31", "1.32", "1.33", "1.34"))
    monkeypatch.setitem(CLOUD_TRAITS, "aws", narrower)
    message = only(config("aws", kubernetesVersion="1.35"), "torchfleet:kubernetesVersion")
    assert message.startswith("EKS offers 1.31, 1.32, 1.33, 1.34, 1.35, 1.36 (https://docs.aws.amazon.com/eks/")
    assert "autoscaler image Torchfleet pins exists for 1.31, 1.32, 1.33, 1.34" in message
    assert message.endswith("use one of 1.31, 1.32, 1.33, 1.34, got '1.35'")


# ---------------------------------------------------------------- every problem at once


def test_all_problems_reported_at_once():
    raw = config(
        "aws",
        gpuPools=[{"gpu": "k80", "maxNodes": 4}, {"gpu": "t4", "minNodes": 3, "maxNodes": 1}],
        training={"namespace": "Bad_NS"},
        network={"cidr": "10.0.0.0/99", **PUBLIC},
    )
    found = problems(raw)
    assert list(found) == [
        f"{GPU_POOLS}[0].gpu",
        f"{GPU_POOLS}[1].minNodes",
        "torchfleet:training.namespace",
        "torchfleet:network.cidr",
    ]
    assert sum(len(messages) for messages in found.values()) == 4


# ---------------------------------------------------------------- network.dnsEndpoint (GCP review F1)


def test_gcp_dns_endpoint_is_on_unless_the_stack_turns_it_off():
    assert ok(BASE["gcp"]).network.dns_endpoint is True
    assert ok(config("gcp", network={"dnsEndpoint": False})).network.dns_endpoint is False


def test_gcp_dns_endpoint_must_be_a_boolean():
    message = only(config("gcp", network={"dnsEndpoint": "sometimes"}), "torchfleet:network.dnsEndpoint")
    assert message == "expected true or false, got 'sometimes'"


@pytest.mark.parametrize("cloud", ["aws", "azure"])
def test_dns_endpoint_is_refused_where_the_cloud_has_none(cloud):
    assert ok(BASE[cloud]).network.dns_endpoint is False
    message = only(config(cloud, network={"dnsEndpoint": True, **(PUBLIC if cloud in ("aws", "azure") else {})}),
                   "torchfleet:network.dnsEndpoint")
    assert message.startswith(f"{cloud} has no DNS-based control-plane endpoint (GKE only); remove this key")
