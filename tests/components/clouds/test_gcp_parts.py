"""The GCP module's pure parts: address plan, names, resource options, kubeconfig, store settings."""

from __future__ import annotations

import ipaddress
import re

import pulumi
import pytest
import yaml

from components.clouds.gcp import cluster, filestore, network, pools
from components.clouds.gcp.kubeconfig import AUTH_PLUGIN, kubeconfig
from components.spec import GPU_TAINT, StorageSpec, parse


class _Parent(pulumi.ComponentResource):
    """Options helpers only read `parent`; no engine is needed to build ResourceOptions."""

    def __init__(self) -> None:  # never registered with an engine
        pass


# ---------------------------------------------------------------- address plan


@pytest.mark.parametrize(
    ("cidr", "nodes", "services", "store", "pods", "max_nodes"),
    [
        ("10.0.0.0/16", "10.0.0.0/20", "10.0.16.0/20", "10.0.32.0/20", "10.0.128.0/17", 256),
        ("172.16.0.0/12", "172.16.0.0/16", "172.17.0.0/16", "172.18.0.0/16", "172.24.0.0/13", 4096),
        ("10.8.0.0/20", "10.8.0.0/24", "10.8.1.0/24", "10.8.2.0/24", "10.8.8.0/21", 16),
    ],
)
def test_address_plan_splits_the_stack_cidr(cidr, nodes, services, store, pods, max_nodes):
    plan = network.address_plan(cidr)
    assert (plan.nodes, plan.services, plan.store, plan.pods) == (nodes, services, store, pods)
    assert plan.max_nodes == max_nodes
    nets = [ipaddress.ip_network(r) for r in (plan.nodes, plan.services, plan.store, plan.pods)]
    assert all(n.subnet_of(ipaddress.ip_network(cidr)) for n in nets)
    assert not any(a.overlaps(b) for i, a in enumerate(nets) for b in nets[i + 1:])


@pytest.mark.parametrize(
    ("tier", "size_gb", "expected"),
    [
        ("BASIC_HDD", 1024, "10.0.32.0/29"),
        ("BASIC_SSD", 65433, "10.0.32.0/29"),
        ("ZONAL", 1024, "10.0.32.0/26"),
        ("ZONAL", 10239, "10.0.32.0/26"),
        # Regression (issue 20, GCP review F15): the 10-100 TiB band is High Scale's, which takes a /24.
        ("ZONAL", 10240, "10.0.32.0/24"),
        ("ZONAL", 102400, "10.0.32.0/24"),
        ("REGIONAL", 102400, "10.0.32.0/26"),
    ],
)
def test_filestore_reserved_range_is_sized_for_the_tier(tier, size_gb, expected):
    assert filestore.reserved_range("10.0.32.0/20", tier, size_gb) == expected


# ---------------------------------------------------------------- names and labels


_ACCOUNT_ID = re.compile(r"^[a-z][-a-z0-9]{4,28}[a-z0-9]$")


@pytest.mark.parametrize(
    "stack",
    ["gcp-usc1", "dev", "Team_A.Prod", "a-very-long-stack-name-for-the-research-group-europe", "x--"],
)
def test_service_account_id_is_always_valid(stack):
    account = pools.service_account_id(stack)
    assert _ACCOUNT_ID.match(account), account
    assert account.endswith("-nodes")


def test_service_account_id_is_per_stack():
    assert pools.service_account_id("gcp-usc1") == "tfleet-gcp-usc1-nodes"
    assert pools.service_account_id("gcp-usc1") != pools.service_account_id("gcp-euw4")
    # Long names that differ only past the cut still get their own account.
    a = pools.service_account_id("research-team-gpu-cluster-us-central1")
    b = pools.service_account_id("research-team-gpu-cluster-us-east4")
    assert a != b and len(a) <= 30 and len(b) <= 30


def test_resource_labels_are_valid_gcp_labels():
    spec = parse(
        {
            "torchfleet:cloud": "gcp", "gcp:region": "us-central1", "gcp:project": "ml-research",
            "torchfleet:zones": ["us-central1-a"], "torchfleet:gpuPools": [{"gpu": "t4", "maxNodes": 1}],
        },
        stack="Research.Prod",
    )
    assert cluster.resource_labels(spec) == {"torchfleet-stack": "research-prod"}


def test_gke_taint_spells_the_effect_as_the_gke_api():
    assert pools.gke_taint(GPU_TAINT) == {"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}


def test_node_roles_are_least_privilege():
    assert set(pools.NODE_ROLES) == {
        "roles/container.defaultNodeServiceAccount",  # GKE's documented minimum (GCP review F12)
        "roles/artifactregistry.reader",
    }
    assert not any(r in pools.NODE_ROLES for r in ("roles/editor", "roles/owner", "roles/container.admin"))


# ---------------------------------------------------------------- resource options


def test_cluster_options_ignore_default_pool_fields_and_node_locations_only():
    """nodeLocations (GCP review M1): never sent as desired_locations, which moves every pool."""
    opts = cluster.cluster_options(_Parent())
    assert sorted(opts.ignore_changes) == ["initialNodeCount", "nodeConfig", "nodeLocations"]
    assert opts.protect is None  # deletion protection is GKE's own flag (deletionProtection)


def test_cluster_options_wait_for_the_key_grant():
    grant = _Parent()
    assert cluster.cluster_options(_Parent(), depends_on=[grant]).depends_on == [grant]


def test_kms_key_is_deleted_with_the_stack():
    from components.clouds.gcp import kms

    assert kms.DELETION_POLICY == "DELETE"


def test_pool_options_wait_for_roles_and_leave_size_to_the_autoscaler():
    role = _Parent()
    opts = pools.pool_options(_Parent(), [role])
    assert opts.depends_on == [role]
    assert opts.ignore_changes == ["initialNodeCount"]
    assert opts.delete_before_replace is True  # fixed pool names: no create-before-delete
    assert opts.custom_timeouts.update == "60m"


@pytest.mark.parametrize("protect", [True, False])
def test_store_options_keep_but_never_protect(protect):
    opts = filestore.store_options(StorageSpec(protect=protect, tier="BASIC_HDD", size_gb=1024), _Parent(), "x")
    assert not opts.protect
    assert opts.retain_on_delete is protect
    assert opts.import_ == "x"


def test_kept_names_are_fixed_per_stack_and_valid():
    from components.clouds.gcp.names import gcp_name

    assert filestore.instance_name("gcp-usc1") == "torchfleet-gcp-usc1-store"
    long = "Team_" + "x" * 90
    for stack in ("gcp-usc1", "Team_A.dev", long):
        for what in ("store", "vpc"):
            name = gcp_name(stack, what)
            assert re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", name) and len(name) <= 63, name
    assert gcp_name(long, "vpc") != gcp_name(long + "y", "vpc")


_REASON = "torchfleet storage.protect"


@pytest.mark.parametrize(
    ("tier", "protect", "expected"),
    [
        ("BASIC_HDD", True, {}),  # the service refuses the flag on Basic tiers
        ("BASIC_SSD", True, {}),
        ("ZONAL", True, {"deletion_protection_enabled": True, "deletion_protection_reason": _REASON}),
        ("ZONAL", False, {"deletion_protection_enabled": False}),
        ("REGIONAL", True, {"deletion_protection_enabled": True, "deletion_protection_reason": _REASON}),
    ],
)
def test_service_side_protection_only_where_the_tier_has_it(tier, protect, expected):
    assert filestore.service_protection(StorageSpec(protect=protect, tier=tier, size_gb=1024)) == expected


# ---------------------------------------------------------------- autoscaling and pools


@pytest.mark.parametrize(
    ("cidrs", "private_endpoint"), [(("0.0.0.0/0",), False), (("203.0.113.0/24",), False), ((), True)]
)
def test_public_endpoint_only_while_someone_may_use_it(cidrs, private_endpoint):
    config = cluster.private_cluster(cidrs)
    assert config.pop("master_global_access_config", None) == ({"enabled": True} if private_endpoint else None)
    assert config == {"enable_private_nodes": True, "enable_private_endpoint": private_endpoint}
    assert cluster.authorized_networks(cidrs)["cidr_blocks"] == [
        {"cidr_block": c, "display_name": f"torchfleet-{i}"} for i, c in enumerate(cidrs)
    ]
    # Regression (issue 20, GCP review F1): no Google Cloud public IP gets in beside the list.
    assert cluster.authorized_networks(cidrs)["gcp_public_cidrs_access_enabled"] is False


def test_autoscaler_profile_without_node_auto_provisioning():
    assert cluster.autoscaling_config() == {"enabled": False, "autoscaling_profile": "OPTIMIZE_UTILIZATION"}


def test_gpu_node_config_carries_accelerators_and_gvnic_the_manager_none():
    gpu = pools.node_config("sa", "a3-highgpu-1g", 200, {}, {}, accelerators=[{"type": "nvidia-h100-80gb"}])
    manager = pools.node_config("sa", "e2-standard-4", 100, {}, {})
    assert gpu["gvnic"] == {"enabled": True} and "gvnic" not in manager
    assert "guest_accelerators" not in manager
    assert manager["spot"] is False


# ---------------------------------------------------------------- kubeconfig


def test_kubeconfig_uses_the_gke_auth_plugin_and_no_credentials():
    config = yaml.safe_load(kubeconfig("c1", "198.51.100.1", "Q0E="))
    assert config["current-context"] == "gke-c1"
    assert config["clusters"][0]["cluster"] == {"server": "https://198.51.100.1", "certificate-authority-data": "Q0E="}
    user = config["users"][0]["user"]
    assert set(user) == {"exec"}
    assert user["exec"]["command"] == AUTH_PLUGIN
    assert user["exec"]["apiVersion"] == "client.authentication.k8s.io/v1beta1"
    assert user["exec"]["provideClusterInfo"] is True


def test_kubeconfig_for_the_dns_endpoint_has_no_cluster_ca():
    # GKE's DNS endpoint presents a publicly trusted certificate; the cluster CA would fail the
    # handshake, so the file leaves it out as gcloud's --dns-endpoint does (GCP review F1).
    host = "gke-abc-123.us-central1.gke.goog"
    config = yaml.safe_load(kubeconfig("c1", host, "Q0E=", dns_endpoint=True))
    assert config["clusters"][0]["cluster"] == {"server": f"https://{host}"}
    assert config["users"][0]["user"]["exec"]["command"] == AUTH_PLUGIN


@pytest.mark.parametrize("on", [True, False])
def test_control_plane_endpoints_say_allow_external_traffic_explicitly(on):
    assert cluster.control_plane_endpoints(on) == {"dns_endpoint_config": {"allow_external_traffic": on}}


def test_csi_volume_source_names_instance_share_and_address():
    assert filestore.csi_volume_source("us-central1-a", "fs1", "10.0.0.2") == {
        "csi": {
            "driver": "filestore.csi.storage.gke.io",
            "volumeHandle": "modeInstance/us-central1-a/fs1/share",
            "volumeAttributes": {"ip": "10.0.0.2", "volume": "share"},
        }
    }
