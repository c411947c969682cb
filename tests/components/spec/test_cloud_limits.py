"""components.spec.parse against the clouds' real limits: one test per case of issue 12 that was
accepted silently (or crashed) before. Each asserts the key, the bad value, the limit and the fix,
and that nothing else is reported."""

from __future__ import annotations

import dataclasses

import pytest

from components.spec import ConfigError, parse
from tests.components.spec.configs import BASE, PUBLIC, config, ok, only, pools, problems

GPU_POOLS = "torchfleet:gpuPools"

# ---------------------------------------------------------------- numbers: the clouds' own maxima


def test_huge_max_nodes_is_refused_not_emitted_as_a_float():
    # Regression (issue 12): maxNodes: 99999999999999999999 was synthesized as maxSize 1e+20.
    message = only(pools("aws", {"gpu": "t4", "maxNodes": 99999999999999999999}), f"{GPU_POOLS}[0].maxNodes")
    assert message.startswith("must be <= 450 (the most nodes one node pool")
    assert message.endswith("got 99999999999999999999")


@pytest.mark.parametrize("cloud, most", [("aws", 450), ("gcp", 1000), ("azure", 1000)])
def test_max_nodes_per_pool_is_the_clouds_quota(cloud, most):
    # On GCP the network must also hold that many nodes (GKE's Pod range): a /8 does.
    wide = {"torchfleet:network": {"cidr": "10.0.0.0/8"}} if cloud == "gcp" else {}
    ok({**pools(cloud, {"gpu": "t4", "maxNodes": most}), **wide})
    message = only({**pools(cloud, {"gpu": "t4", "maxNodes": most + 1}), **wide}, f"{GPU_POOLS}[0].maxNodes")
    assert message.startswith(f"must be <= {most} ") and message.endswith(f"got {most + 1}")


def test_manager_pool_max_nodes_has_the_same_ceiling():
    message = only(config("gcp", managerPool={"maxNodes": 5000}), "torchfleet:managerPool.maxNodes")
    assert message.startswith("must be <= 1000 ")


@pytest.mark.parametrize("cloud, most", [("aws", 16384), ("gcp", 65536), ("azure", 2048)])
def test_disk_size_ceiling_per_cloud(cloud, most):
    ok(pools(cloud, {"gpu": "t4", "maxNodes": 2, "diskSizeGb": most}))
    message = only(pools(cloud, {"gpu": "t4", "maxNodes": 2, "diskSizeGb": most + 1}), f"{GPU_POOLS}[0].diskSizeGb")
    assert message.startswith(f"must be <= {most} (the largest root disk") and message.endswith(f"got {most + 1}")
    message = only(config(cloud, managerPool={"diskSizeGb": most + 1}), "torchfleet:managerPool.diskSizeGb")
    assert message.startswith(f"must be <= {most} ")


@pytest.mark.parametrize("cloud", ["aws", "gcp", "azure"])
def test_etcd_members_beyond_the_manager_nodes_are_refused(cloud):
    """Left from issue 19, a first `pulumi up` that cannot finish (issue 20): one etcd member a node
    (required anti-affinity), so members beyond managerPool.maxNodes stayed Pending and the
    StatefulSet's await failed the update."""
    message = only(config(cloud, training={"etcdReplicas": 5}, managerPool={"maxNodes": 3}),
                   "torchfleet:training.etcdReplicas")
    assert message == ("5 etcd members need as many manager nodes (one member a node), but managerPool.maxNodes "
                       "is 3: raise managerPool.maxNodes to at least 5 or lower etcdReplicas")
    ok(config(cloud, training={"etcdReplicas": 5}, managerPool={"maxNodes": 5}))


def test_etcd_replicas_at_most_seven():
    ok(config("aws", training={"etcdReplicas": 7}, managerPool={"maxNodes": 7}))
    message = only(config("aws", training={"etcdReplicas": 9}), "torchfleet:training.etcdReplicas")
    assert message == (
        "must be <= 7 (etcd's own advice: no more than seven members, https://etcd.io/docs/v3.5/faq/), got 9"
    )


@pytest.mark.parametrize(
    "cloud, tier, most",
    [("gcp", "BASIC_HDD", 65433), ("gcp", "ZONAL", 102400), ("azure", "Premium_LRS", 102400)],
)
def test_share_size_ceiling_per_tier(cloud, tier, most):
    ok(config(cloud, storage={"tier": tier, "sizeGb": most}))
    message = only(config(cloud, storage={"tier": tier, "sizeGb": most + 1}), "torchfleet:storage.sizeGb")
    assert message.startswith(f"must be <= {most} (the largest {tier} store") and message.endswith(f"got {most + 1}")


def test_max_gpus_has_a_ceiling():
    message = only(config("aws", guardrails={"maxGpus": 2**40}), "torchfleet:guardrails.maxGpus")
    assert message == f"must be <= {2**31 - 1} (the largest number a config value takes), got {2**40}"


# ---------------------------------------------------------------- regions, zones, versions, machines


@pytest.mark.parametrize(
    "cloud, key, value, hint",
    [
        ("aws", "aws:region", "mars-north-1", "did you mean eu-north-1?"),
        ("aws", "aws:region", "us-wset-2", "did you mean us-west-2?"),
        ("gcp", "gcp:region", "us-central", "did you mean us-central1?"),
        # An Azure display name is not a location name.
        ("azure", "azure-native:location", "East US 2 (fake)", "did you mean eastus2?"),
        ("azure", "azure-native:location", "East US", "did you mean eastus?"),
    ],
)
def test_unknown_region_suggests_a_known_one(cloud, key, value, hint):
    message = only(config(cloud, **{key: value}), key)
    assert message.startswith(f"unknown {cloud} region {value!r}; {hint} (")
    assert "components/catalog/regions.yaml" in message


@pytest.mark.parametrize("value", [["us-west-2"], {"name": "us-west-2"}, 2])
def test_region_of_the_wrong_type(value):
    # Regression (issue 12): aws:region given as a list crashed the program.
    assert only(config("aws", **{"aws:region": value}), "aws:region") == (
        f"expected one region name like us-west-2, got {value!r}"
    )


def test_azure_location_without_availability_zones():
    message = only(config("azure", **{"azure-native:location": "westus"}), "torchfleet:zones")
    assert message.startswith("location westus has no availability zones")


def test_gpu_not_offered_in_a_region_the_catalog_knows(monkeypatch):
    # The catalog lists a region's GPUs only where the vendor page was read (us-west-2 lists every
    # AWS GPU of the catalog): a region listing fewer refuses the others, naming where they are.
    from components.catalog import regions

    real = regions.load()
    usw2 = dataclasses.replace(real["aws"].regions["us-west-2"], gpus=("t4",))
    aws = dataclasses.replace(real["aws"], regions={**real["aws"].regions, "us-west-2": usw2})
    monkeypatch.setattr(regions, "load", lambda: {**real, "aws": aws})
    message = only(pools("aws", {"gpu": "t4", "maxNodes": 2}, {"gpu": "l4", "maxNodes": 2}), f"{GPU_POOLS}[1].gpu")
    assert message == (
        "l4 is not offered in us-west-2 (it offers t4); pick one of those or another region"
    )


# As of the catalog check of 2026-11-23 (components/catalog/kubernetes.yaml): GKE's 1.31 is past its
# 24 months, and 1.36 is offered by both. What Torchfleet creates starts only in standard support
# there (GKE's REGULAR channel, AKS's Standard tier): the fix names only those minors.
@pytest.mark.parametrize("cloud, version, service, offered, ended, allowed", [
    ("gcp", "1.99", "GKE", "1.32, 1.33, 1.34, 1.35, 1.36", "1.32, 1.33, 1.34", "1.35, 1.36"),
    ("azure", "1.10", "AKS", "1.31, 1.32, 1.33, 1.34, 1.35, 1.36", "1.31, 1.32, 1.33", "1.34, 1.35, 1.36"),
])
def test_kubernetes_version_the_service_does_not_offer(cloud, version, service, offered, ended, allowed):
    message = only(config(cloud, kubernetesVersion=version), "torchfleet:kubernetesVersion")
    assert message.startswith(f"{service} offers {offered} (https://")
    assert f"; standard support has ended for {ended}: Torchfleet " in message
    assert message.endswith(f"use one of {allowed}, got {version!r}")


# Regression (2026-11-23): the default 1.33 had left standard support on all three services, and
# a Standard-tier AKS cluster (what azure/cluster.py creates) cannot start on it without Premium
# and long-term support, nor can GKE's REGULAR channel: `pulumi up` would have been refused by the
# cloud after the preview passed. The dates are each minor's end of standard support.
@pytest.mark.parametrize("cloud, version, end", [
    ("azure", "1.31", "2025-11-01"),
    ("azure", "1.32", "2026-03-31"),
    ("azure", "1.33", "2026-07-31"),
    ("gcp", "1.32", "2026-04-11"),
    ("gcp", "1.33", "2026-08-03"),
    ("gcp", "1.34", "2026-10-01"),
])
def test_kubernetes_version_past_standard_support_is_refused(cloud, version, end):
    message = only(config(cloud, kubernetesVersion=version), "torchfleet:kubernetesVersion")
    assert f", but standard support for {version} ended on {end}: " in message
    if cloud == "azure":
        assert message.startswith("AKS offers 1.31, 1.32, 1.33, 1.34, 1.35, 1.36 (https://learn.microsoft.com/")
        assert "Standard-tier AKS cluster" in message and "long-term support needs the Premium tier" in message
        assert message.endswith(f"; use one of 1.34, 1.35, 1.36, got {version!r}")
    else:
        assert message.startswith("GKE offers 1.32, 1.33, 1.34, 1.35, 1.36 (https://cloud.google.com/")
        assert "REGULAR release channel" in message and "Extended channel" in message
        assert message.endswith(f"; use one of 1.35, 1.36, got {version!r}")


@pytest.mark.parametrize("cloud, version", [
    ("azure", "1.34"), ("azure", "1.35"), ("azure", "1.36"), ("gcp", "1.35"), ("gcp", "1.36"),
    # EKS starts a cluster in extended support (billed), so AWS keeps every minor EKS offers.
    ("aws", "1.31"), ("aws", "1.33"), ("aws", "1.35"), ("aws", "1.36"),
])
def test_kubernetes_version_in_support_is_accepted(cloud, version):
    assert ok(config(cloud, kubernetesVersion=version)).kubernetes_version == version


def test_standard_support_is_judged_on_the_catalogs_day(monkeypatch):
    # The catalog is read on its `checked` day, and so is standard support: a refreshed catalog
    # retires the minors whose standard support ended before it (AKS 1.34 on 2026-11-30).
    from components.catalog import kubernetes

    real = kubernetes.load()
    later = dataclasses.replace(real["aks"], checked="2026-12-01")
    monkeypatch.setattr(kubernetes, "load", lambda: {**real, "aks": later})
    message = only(config("azure", kubernetesVersion="1.34"), "torchfleet:kubernetesVersion")
    assert ", but standard support for 1.34 ended on 2026-11-30: " in message
    assert message.endswith("; use one of 1.35, 1.36, got '1.34'")
    ok(config("azure", kubernetesVersion="1.35"))


@pytest.mark.parametrize("version", [1.33, 133, ["1.33"]])
def test_kubernetes_version_not_a_string(version):
    message = only(config("aws", kubernetesVersion=version), "torchfleet:kubernetesVersion")
    assert message == f'expected a minor version like "1.35" (quoted), got {version!r}'


@pytest.mark.parametrize(
    "cloud, machine, hint",
    [
        ("aws", "m6i.lrage", "is not a size of m6i.*, which comes in large, xlarge,"),
        ("aws", "m7g.large", "is not in the catalog's aws machine types (x86_64"),  # Graviton: no x86 AMI
        ("aws", "m6ilarge", "is not named like a machine type on aws"),
        ("gcp", "e2-standrd-4", "is not named like a machine type on gcp"),
        ("gcp", "e2-standard-3", "is not a size of e2-standard-*, which comes in 2, 4, 8, 16, 32"),
        ("azure", "Standard_D4s_5v", "is not named like a machine type on azure"),
        ("azure", "Standard_NC4as_T4_v3x", "is not named like a machine type on azure"),
    ],
)
def test_misspelled_manager_machine_type(cloud, machine, hint):
    message = only(config(cloud, managerPool={"machineType": machine}), "torchfleet:managerPool.machineType")
    assert message.startswith(f"{machine!r} {hint}")
    assert "did you mean" in message or "e.g." in message


@pytest.mark.parametrize(
    "cloud, machine", [("aws", "m6i.lrage"), ("gcp", "e2-standrd-4"), ("azure", "Standard_D4s_5v")]
)
def test_manager_machine_did_you_mean(cloud, machine):
    message = only(config(cloud, managerPool={"machineType": machine}), "torchfleet:managerPool.machineType")
    right = {"aws": "m6i.large", "gcp": "e2-standard-4", "azure": "Standard_D4s_v5"}[cloud]
    assert f"did you mean {right}?" in message


@pytest.mark.parametrize(
    "cloud, machine",
    [("aws", "t3.large"), ("aws", "c7i.2xlarge"), ("gcp", "n2-standard-8"), ("gcp", "c3-highmem-4"),
     ("azure", "Standard_E8ads_v5"), ("azure", "Standard_F4s_v2")],
)
def test_real_manager_machine_types_pass(cloud, machine):
    ok(config(cloud, managerPool={"machineType": machine}))


def test_gcp_project_id_pattern():
    # Regression (issue 12): a display name was accepted as the project id.
    message = only(config("gcp", **{"gcp:project": "My Project!!"}), "gcp:project")
    assert message.startswith("'My Project!!' is not a project id: 6-30 lowercase letters, digits and '-'")


@pytest.mark.parametrize("project", ["abcde", "a" * 31, "1project", "project-", "my_project"])
def test_gcp_project_id_edges_refused(project):
    assert only(config("gcp", **{"gcp:project": project}), "gcp:project").startswith(f"{project!r} is not")


@pytest.mark.parametrize("project", ["abcdef", "a" * 30, "my-ml-project-2"])
def test_gcp_project_id_edges_accepted(project):
    ok(config("gcp", **{"gcp:project": project}))


# ---------------------------------------------------------------- networks


@pytest.mark.parametrize("cidr", ["10.0.0.0/8", "10.0.0.0/15"])
def test_aws_vpc_larger_than_a_16(cidr):
    message = only(config("aws", network={"cidr": cidr, **PUBLIC}), "torchfleet:network.cidr")
    assert message == f"{cidr} is larger than aws allows (/16 to /28); use e.g. 10.0.0.0/16"


@pytest.mark.parametrize("cloud", ["aws", "gcp", "azure"])
@pytest.mark.parametrize("cidr", ["0.0.0.0/0", "8.8.0.0/16", "0.0.0.0/1"])
def test_network_must_be_a_private_range(cloud, cidr):
    # On Azure 0.0.0.0/0 also left no room for the service and pod ranges (issue 12: a traceback).
    network = {"cidr": cidr, **(PUBLIC if cloud in ("aws", "azure") else {})}
    message = only(config(cloud, network=network), "torchfleet:network.cidr")
    assert message.startswith(f"{cidr} is not a private range; use one inside 10.0.0.0/8")


def test_azure_network_leaving_no_room_for_service_and_pod_ranges(monkeypatch):
    # Every candidate pair taken: reported up front, not as a ValueError from azure/naming.py.
    from components.clouds import traits

    squeezed = dataclasses.replace(traits.CLOUD_TRAITS["azure"], service_range_candidates=("10.1.0.0/16",))
    monkeypatch.setitem(traits.CLOUD_TRAITS, "azure", squeezed)
    message = only(config("azure", network={"cidr": "10.0.0.0/12", **PUBLIC}), "torchfleet:network.cidr")
    assert message.startswith("10.0.0.0/12 overlaps every range azure can give Kubernetes services and pods")


def test_azure_service_and_pod_candidates_are_the_ones_the_cloud_module_uses():
    from components.clouds.azure import naming
    from components.clouds.traits import CLOUD_TRAITS

    assert CLOUD_TRAITS["azure"].service_range_candidates == naming._SERVICE_CANDIDATES
    assert CLOUD_TRAITS["azure"].pod_range_candidates == naming._POD_CANDIDATES
    ok(config("azure", network={"cidr": "10.0.0.0/8", **PUBLIC}))  # 172.16.0.0/16 and 100.64.0.0/14 stay free
    assert naming.cluster_ranges("10.0.0.0/8")["service_cidr"] == "172.16.0.0/16"


# ---------------------------------------------------------------- names derived from the stack


@pytest.mark.parametrize("cloud", ["gcp", "azure", "local"])
@pytest.mark.parametrize("length", [40, 63])
def test_long_namespace_on_clouds_running_the_store_owner_job(cloud, length):
    # Regression (issue 12): store_owner.job_name raised ValueError at synth for 40-63 characters.
    namespace = "n" * length
    message = only(config(cloud, training={"namespace": namespace}), "torchfleet:training.namespace")
    assert message.startswith(f"at most 39 characters on {cloud}, got {length} ")
    assert f"'store-owner-{namespace}-shared-data'" in message


def test_long_namespace_is_fine_on_aws_whose_store_sets_its_owner():
    ok(config("aws", training={"namespace": "n" * 63}))
    ok(config("gcp", training={"namespace": "n" * 39}))


@pytest.mark.parametrize(
    "cloud, stack, what, most",
    [
        ("aws", "s" * 90, "the EKS cluster name", 89),
        ("gcp", "s" * 78, "the nodes' service account name", 77),
    ],
)
def test_stack_name_overflowing_a_cloud_name(cloud, stack, what, most):
    found = problems(config(cloud), stack=stack)
    assert list(found) == ["stack"]
    [message] = found["stack"]
    assert message.startswith(f"the stack name {stack!r} makes {what} ")
    assert message.endswith(f"to at most {most} characters")
    ok(config(cloud), stack=stack[:most])


def test_stack_name_overflowing_the_subnet_tag_key():
    # kubernetes.io/cluster/torchfleet-<stack> (128) and the EKS name (100) both break at 90.
    found = problems(config("aws"), stack="s" * 96)
    assert len(found["stack"]) == 2
    assert "the subnet tag key the load balancers read" in found["stack"][1]
    assert "128" in found["stack"][1]


@pytest.mark.parametrize("stack", ["team.dev", "dev_é", "日本"])
def test_stack_name_with_characters_an_eks_name_refuses(stack):
    found = problems(config("aws"), stack=stack)
    assert list(found) == ["stack"]
    [message] = found["stack"]
    # '.' breaks the EKS name only; a non-ASCII name is no Pulumi stack name at all.
    assert "ASCII letters, digits, '-' and '_'" in message or "is not a Pulumi stack name" in message


def test_dot_in_the_stack_name_is_fine_where_no_name_refuses_it():
    ok(config("gcp"), stack="team.dev")
    ok(config("azure"), stack="team.dev")


# ---------------------------------------------------------------- keys and types


@pytest.mark.parametrize(
    "cloud, key, owner",
    [("aws", "gcp:project", "gcp"), ("aws", "azure-native:location", "azure"), ("gcp", "aws:region", "aws"),
     ("local", "aws:region", "aws")],
)
def test_another_clouds_key_is_an_error(cloud, key, owner):
    # README: unknown keys are errors. Regression (issue 12): gcp:project on an AWS stack was ignored.
    message = only(config(cloud, **{key: "us-west-2" if owner == "aws" else "x"}), key)
    assert message == f"a key of {owner}'s provider, but torchfleet:cloud is {cloud}: it would be ignored; remove it"


def test_own_clouds_other_provider_keys_are_left_to_the_provider():
    ok(config("aws", **{"aws:profile": "dev"}))


@pytest.mark.parametrize(
    "section, value, key",
    [
        ("cloud", ["aws"], "torchfleet:cloud"),
        ("storage", {"tier": ["BASIC_HDD"]}, "torchfleet:storage.tier"),
        ("managerPool", {"machineType": ["m6i.large"]}, "torchfleet:managerPool.machineType"),
        ("training", {"operator": ["kubeflow"]}, "torchfleet:training.operator"),
        ("network", {"cidr": 167772160, **PUBLIC}, "torchfleet:network.cidr"),
    ],
)
def test_values_of_the_wrong_type_are_errors_not_tracebacks(section, value, key):
    base = "gcp" if section == "storage" else "aws"
    raw = config(base, **{section: value})
    with pytest.raises(ConfigError) as caught:
        parse(raw, "test")
    assert [p.split(": ", 1)[0] for p in caught.value.problems] == [key]


def test_a_long_value_is_cut_short_in_the_message():
    # Regression (issue 12): a small alias bomb printed a 310 KB error; one line stays one line.
    message = only(config("aws", **{"aws:region": ["x" * 1000] * 1000}), "aws:region")
    assert len(message) < 200 and message.endswith("...")


def test_every_base_config_still_parses():
    for cloud in BASE:
        ok(BASE[cloud])
