"""GKE under mocks: what the GCP stacks register, asserted on the recorded inputs and options.

Three stacks, each synthesized once: the example stack, a three-zone stack with two GPU types
(one of them on-demand, unprotected ZONAL Filestore), and a one-zone stack with every GPU GCP
offers (to check each GPU gets its machine family and accelerator).
"""

from __future__ import annotations

import asyncio
import ipaddress
from typing import Any

import pulumi
import pulumi_gcp as gcp
import pytest
import yaml

from components import catalog
from components.clouds.base import ClusterHandle
from components.clouds.gcp import GcpCluster, filestore
from components.clouds.gcp import kubeconfig as kubeconfig_mod
from components.clouds.gcp.network import PODS_RANGE
from components.clouds.gcp.pools import NODE_ROLES
from components.spec import GPU_TAINT, PlatformSpec, parse
from tests.harness import STACKS_DIR, synth_config, synth_stack
from torchfleet.jobs import target as job_target
from torchfleet.preview import mock_gcp
from torchfleet.preview.mocks import TorchfleetMocks
from torchfleet.preview.runner import SynthResult, stack_config

CLUSTER = "gcp:container/cluster:Cluster"
NODE_POOL = "gcp:container/nodePool:NodePool"
FILESTORE = "gcp:filestore/instance:Instance"
SUBNET = "gcp:compute/subnetwork:Subnetwork"
IAM_MEMBER = "gcp:projects/iAMMember:IAMMember"
ACCOUNT = "gcp:serviceaccount/account:Account"

THREE_ZONES: dict[str, Any] = {
    "torchfleet:cloud": "gcp",
    "gcp:project": "ml-research",
    "gcp:region": "europe-west4",
    "torchfleet:zones": ["europe-west4-a", "europe-west4-b", "europe-west4-c"],
    "torchfleet:kubernetesVersion": "1.36",
    "torchfleet:managerPool": {"machineType": "e2-standard-8", "minNodes": 2, "maxNodes": 5},
    "torchfleet:gpuPools": [
        {"gpu": "t4", "maxNodes": 6, "minNodes": 1},
        {"gpu": "a100-40gb", "maxNodes": 2, "spot": False, "zones": ["europe-west4-a", "europe-west4-b"],
         "machineTypes": ["a2-highgpu-2g"]},
    ],
    "torchfleet:storage": {"protect": False, "tier": "ZONAL", "sizeGb": 2048},
    # Narrowed to two ranges, without the DNS endpoint: the kubeconfig then names the IP endpoint.
    "torchfleet:network": {"cidr": "10.20.0.0/16", "publicAccessCidrs": ["203.0.113.0/24", "198.51.100.7/32"],
                           "dnsEndpoint": False},
    "torchfleet:guardrails": {"allowOnDemandGpus": True},
}
# Every GPU GCP offers, in one zone: the machine family each must get.
FAMILY = {"t4": "n1-", "v100": "n1-", "l4": "g2-", "a100-40gb": "a2-", "a100-80gb": "a2-", "h100": "a3-"}
ALL_GPUS: dict[str, Any] = {
    "torchfleet:cloud": "gcp",
    "gcp:project": "ml-research",
    "gcp:region": "us-central1",
    "torchfleet:zones": ["us-central1-a"],
    "torchfleet:gpuPools": [{"gpu": g, "maxNodes": 1} for g in FAMILY],
    "torchfleet:storage": {"tier": "REGIONAL", "sizeGb": 1024},
    "torchfleet:guardrails": {"maxGpus": 1000},
}


def _example_raw() -> dict[str, Any]:
    _, config, _ = stack_config(STACKS_DIR / "Pulumi.gcp-usc1.yaml")
    return {k: yaml.safe_load(v) if v[:1] in "[{" else v for k, v in config.items()}


CASES = {
    "gcp-usc1": (lambda: synth_stack("gcp-usc1"), _example_raw),
    "three-zones": (lambda: synth_config("three-zones", THREE_ZONES), lambda: THREE_ZONES),
    "all-gpus": (lambda: synth_config("all-gpus", ALL_GPUS), lambda: ALL_GPUS),
}
_SYNTHS: dict[str, tuple[SynthResult, PlatformSpec]] = {}


def synthed(case: str) -> tuple[SynthResult, PlatformSpec]:
    """(what the stack registers, the spec it was built from): each stack synthesized once."""
    if case not in _SYNTHS:
        run, raw = CASES[case]
        _SYNTHS[case] = (run(), parse(raw(), stack=case))
    return _SYNTHS[case]


@pytest.fixture(scope="module", params=list(CASES))
def stack(request) -> tuple[SynthResult, PlatformSpec]:
    return synthed(request.param)


@pytest.fixture(scope="module")
def three_zones() -> tuple[SynthResult, PlatformSpec]:
    return synthed("three-zones")


@pytest.fixture(scope="module")
def all_gpus() -> SynthResult:
    return synthed("all-gpus")[0]


@pytest.fixture(scope="module")
def handle() -> tuple[ClusterHandle, dict[str, Any]]:
    """GcpCluster's handle for the three-zone stack, with its outputs resolved under mocks."""
    spec = parse(THREE_ZONES, stack="handle")
    got: dict[str, Any] = {}

    def program():
        got["handle"] = h = GcpCluster("h", spec).handle

        async def collect() -> None:
            got["volume_source"] = await pulumi.Output.from_input(h.store.volume_source).future()
            got["nfs_cidrs"] = [await pulumi.Output.from_input(c).future() for c in h.store.nfs_cidrs]
            got["kubeconfig_is_secret"] = await h.kubeconfig.is_secret()
            got["outputs"] = {k: await pulumi.Output.from_input(v).future() for k, v in h.outputs.items()}

        return pulumi.Output.from_input(asyncio.ensure_future(collect()))

    pulumi.runtime.set_mocks(TorchfleetMocks(), project="torchfleet", stack="handle", preview=False)
    pulumi.runtime.test(program)()
    return got.pop("handle"), got


def gpu_pools(result: SynthResult) -> dict[str, Any]:
    return {r.inputs["name"]: r for r in result.of_type(NODE_POOL) if r.inputs["name"] not in ("manager", "cpu")}


# ---------------------------------------------------------------- network


def test_vpc_is_custom_mode_with_one_regional_subnet(stack):
    result, spec = stack
    assert result.one("gcp:compute/network:Network").inputs["autoCreateSubnetworks"] is False
    subnet = result.one(SUBNET).inputs
    assert subnet["region"] == spec.region
    assert subnet["privateIpGoogleAccess"] is True
    net = ipaddress.ip_network(spec.network.cidr)
    ranges = [subnet["ipCidrRange"]] + [r["ipCidrRange"] for r in subnet["secondaryIpRanges"]]
    nets = [ipaddress.ip_network(r) for r in ranges]
    assert all(n.subnet_of(net) for n in nets), ranges
    assert not any(a.overlaps(b) for i, a in enumerate(nets) for b in nets[i + 1:]), ranges


def test_cloud_nat_serves_the_node_subnet(stack):
    result, spec = stack
    nat = result.one("gcp:compute/routerNat:RouterNat").inputs
    router = result.one("gcp:compute/router:Router")
    assert nat["router"] == router.name and nat["region"] == spec.region
    assert nat["sourceSubnetworkIpRangesToNat"] == "LIST_OF_SUBNETWORKS"
    subnet = result.one(SUBNET)
    assert nat["subnetworks"] == [{"name": f"{subnet.name}-id", "sourceIpRangesToNats": ["ALL_IP_RANGES"]}]


# ---------------------------------------------------------------- cluster


def test_cluster_is_private_vpc_native_and_hardened(stack):
    result, spec = stack
    c = result.one(CLUSTER).inputs
    subnet = result.one(SUBNET).inputs
    # No nodeLocations (GCP review M1): it would be sent as desired_locations and move every pool.
    assert c["location"] == spec.region and "nodeLocations" not in c
    assert "nodeLocations" in result.one(CLUSTER).options["ignoreChanges"]
    assert c["removeDefaultNodePool"] is True
    private = not spec.network.public_access_cidrs  # the shipped stack is private (issue 20)
    expected = {"enablePrivateNodes": True, "enablePrivateEndpoint": private}
    if private:
        expected["masterGlobalAccessConfig"] = {"enabled": True}
    assert c["privateClusterConfig"] == expected
    assert c["networkingMode"] == "VPC_NATIVE"
    secondary = {r["rangeName"] for r in subnet["secondaryIpRanges"]}
    policy = c["ipAllocationPolicy"]
    assert {policy["clusterSecondaryRangeName"], policy["servicesSecondaryRangeName"]} == secondary
    assert c["workloadIdentityConfig"] == {"workloadPool": f"{spec.project}.svc.id.goog"}
    assert c["enableShieldedNodes"] is True
    assert c["masterAuth"]["clientCertificateConfig"] == {"issueClientCertificate": False}
    assert c["datapathProvider"] == "ADVANCED_DATAPATH"  # NetworkPolicy is enforced
    assert c["addonsConfig"]["gcpFilestoreCsiDriverConfig"] == {"enabled": True}
    # Even the short-lived default pool runs as the node account, shielded, behind GKE_METADATA.
    default_pool = c["nodeConfig"]
    assert default_pool["serviceAccount"] == result.one(ACCOUNT).inputs["accountId"] + (
        f"@{mock_gcp.PROJECT}.iam.gserviceaccount.com"
    )
    assert default_pool["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}


def test_version_is_a_floor_on_the_regular_channel(stack):
    result, spec = stack
    c = result.one(CLUSTER).inputs
    assert c["minMasterVersion"] == spec.kubernetes_version
    assert c["releaseChannel"] == {"channel": "REGULAR"}


def test_gke_autoscaler_profile_and_no_node_auto_provisioning(stack):
    result, _ = stack
    assert result.one(CLUSTER).inputs["clusterAutoscaling"] == {
        "enabled": False,
        "autoscalingProfile": "OPTIMIZE_UTILIZATION",
    }


def test_no_autoscaler_chart_and_no_nvidia_device_plugin(stack):
    # GKE runs its own autoscaler and device plugin; installing either again would fight it.
    result, _ = stack
    for r in result.resources:
        text = f"{r.name} {r.printable}".lower()
        assert "cluster-autoscaler" not in text, r.name
        assert "nvidia-device-plugin" not in text, r.name
        assert not r.type.startswith("kubernetes:helm"), r.name


def test_master_authorized_networks_follow_public_access_cidrs(three_zones):
    result, _ = three_zones
    blocks = result.one(CLUSTER).inputs["masterAuthorizedNetworksConfig"]["cidrBlocks"]
    assert [b["cidrBlock"] for b in blocks] == ["203.0.113.0/24", "198.51.100.7/32"]


def test_cluster_never_blocks_destroy_and_has_a_maintenance_window(stack):
    """Regression (issue 20): deletionProtection followed storage.protect, so `pulumi destroy` failed on
    the cluster and the GPU pools kept billing; and GKE upgraded at any time (GCP review F14)."""
    result, _ = stack
    cluster = result.one(CLUSTER)
    assert cluster.inputs["deletionProtection"] is False
    window = cluster.inputs["maintenancePolicy"]["recurringWindow"]
    assert window["recurrence"] == "FREQ=WEEKLY;BYDAY=SA,SU"
    assert (window["startTime"], window["endTime"]) == ("2026-01-03T02:00:00Z", "2026-01-03T10:00:00Z")


def _window_hours_in_every_32_days(window: dict[str, str]) -> list[int]:
    """Hours of maintenance window in each 32-day span starting at every hour of 2027 (the windows
    start and end on the hour, so hourly steps find the true minimum)."""
    from datetime import datetime, timedelta

    from dateutil import rrule

    start = datetime.fromisoformat(window["start_time"].replace("Z", "+00:00"))
    length = datetime.fromisoformat(window["end_time"].replace("Z", "+00:00")) - start
    rule = rrule.rrulestr(window["recurrence"], dtstart=start)
    opened: set[datetime] = set()
    for begin in rule.between(start, start + timedelta(days=800), inc=True):
        opened.update(begin + timedelta(hours=h) for h in range(int(length.total_seconds() // 3600)))
    first = datetime(2027, 1, 1, tzinfo=start.tzinfo)
    hours = [first + timedelta(hours=h) for h in range(24 * (365 + 32))]
    flags = [1 if h in opened else 0 for h in hours]
    span = 24 * 32
    total = sum(flags[:span])
    out = [total]
    for i in range(span, len(flags)):
        total += flags[i] - flags[i - span]
        out.append(total)
    return out[: 24 * 365]


def test_maintenance_window_has_margin_over_gkes_48_hours_in_any_32_days():
    """Regression (GCP review m3): two 6-hour weekend windows gave exactly 48.0 hours in the worst
    32 days, GKE's floor, with no margin. Each window is also at least GKE's 4 hours."""
    from components.clouds.gcp.cluster import MAINTENANCE_WINDOW

    per_span = _window_hours_in_every_32_days(MAINTENANCE_WINDOW)
    assert min(per_span) == 64 and min(per_span) >= 48 * 1.25
    old = {**MAINTENANCE_WINDOW, "end_time": "2026-01-03T08:00:00Z"}
    assert min(_window_hours_in_every_32_days(old)) == 48  # what the review measured: no margin


def test_cluster_ignores_default_pool_drift(stack):
    result, _ = stack
    assert set(result.one(CLUSTER).options["ignoreChanges"]) == {"nodeConfig", "initialNodeCount", "nodeLocations"}


# ---------------------------------------------------------------- secrets encryption (Cloud KMS)

KEY_RING = "gcp:kms/keyRing:KeyRing"
CRYPTO_KEY = "gcp:kms/cryptoKey:CryptoKey"
KEY_MEMBER = "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember"


def test_secrets_are_encrypted_with_our_kms_key_in_the_cluster_region(stack):
    result, spec = stack
    ring, key = result.one(KEY_RING), result.one(CRYPTO_KEY)
    assert (ring.inputs["location"], ring.inputs["project"]) == (spec.region, spec.project)
    assert key.inputs["keyRing"] == f"{ring.name}-id"
    assert key.inputs["purpose"] == "ENCRYPT_DECRYPT"
    assert key.inputs["rotationPeriod"] == "7776000s"  # 90 days
    assert result.one(CLUSTER).inputs["databaseEncryption"] == {"state": "ENCRYPTED", "keyName": f"{key.name}-id"}


def test_only_the_gke_service_agent_may_use_the_key_and_before_the_cluster(stack):
    result, _ = stack
    key = result.one(CRYPTO_KEY)
    (grant,) = result.of_type(KEY_MEMBER)
    assert grant.inputs == {
        "cryptoKeyId": f"{key.name}-id",
        "role": "roles/cloudkms.cryptoKeyEncrypterDecrypter",
        "member": f"serviceAccount:service-{mock_gcp.MOCK_PROJECT_NUMBER}"
                  "@container-engine-robot.iam.gserviceaccount.com",
    }
    # The agent is made to exist first (a fresh project has none until its first cluster: GCP review F4).
    agent = result.one("gcp:projects/serviceIdentity:ServiceIdentity")
    assert (agent.inputs["service"], agent.inputs["project"]) == ("container.googleapis.com", result.spec.project)
    assert agent.key in result.depends_on(grant)
    # Creating a cluster whose agent cannot use the key fails: the cluster waits for the grant to
    # take effect (a propagation wait that depends on it), not only to exist (GCP review F3).
    cluster = result.one(CLUSTER)
    wait = result.one("pulumi-python:dynamic:Resource")
    assert wait.key in result.depends_on(cluster) and grant.key in result.depends_on(wait)
    assert wait.inputs["seconds"] >= 120 and wait.inputs["triggers"] == [f"{grant.name}-id"]


def test_key_goes_with_the_cluster_on_destroy(stack):
    # The Secrets it encrypted go with the cluster, which depends on it (so it is deleted first).
    result, _ = stack
    for r in (result.one(KEY_RING), result.one(CRYPTO_KEY)):
        assert (r.options["protect"], r.options["retainOnDelete"]) == (False, False)
    assert result.one(CRYPTO_KEY).inputs["deletionPolicy"] == "DELETE"


def test_key_names_are_left_to_pulumi_autonaming(stack):
    # KMS never deletes a key ring or key: a fixed name could not be created again after a destroy.
    result, _ = stack
    assert "name" not in result.one(KEY_RING).inputs and "name" not in result.one(CRYPTO_KEY).inputs


# ---------------------------------------------------------------- node pools


def test_one_gpu_pool_per_gpu_and_zone(stack):
    result, spec = stack
    pools = gpu_pools(result)
    assert sorted(pools) == sorted(p.name for p in spec.gpu_pools)
    for p in spec.gpu_pools:
        r = pools[p.name].inputs
        assert r["nodeLocations"] == [p.zone]
        assert r["autoscaling"] == {"minNodeCount": p.min_nodes, "maxNodeCount": p.max_nodes, "locationPolicy": "ANY"}
        assert r["initialNodeCount"] == p.min_nodes  # scale from zero: no GPU node at creation
        # Upgrades replace nodes in place: no surge node that would need a spare (spot) GPU.
        assert r["upgradeSettings"] == {"strategy": "SURGE", "maxSurge": 0, "maxUnavailable": 1}
        node = r["nodeConfig"]
        assert node["spot"] is p.spot
        assert node["labels"] == p.labels
        assert node["labels"]["torchfleet.io/capacity"] == ("spot" if p.spot else "on-demand")
        assert node["taints"] == [{"key": GPU_TAINT["key"], "value": GPU_TAINT["value"], "effect": "NO_SCHEDULE"}]
        assert node["machineType"] == p.machine_types[0]
        driver = {"gpuDriverVersion": "DEFAULT"}
        assert node["guestAccelerators"] == [
            {"type": p.accelerator, "count": p.gpus_per_node, "gpuDriverInstallationConfig": driver}
        ]


def test_three_zones_two_gpu_types(three_zones):
    result, _ = three_zones
    pools = gpu_pools(result)
    assert sorted(pools) == sorted(
        [f"gpu-t4-europe-west4-{z}" for z in "abc"] + [f"gpu-a100-40gb-europe-west4-{z}" for z in "ab"]
    )
    a100 = pools["gpu-a100-40gb-europe-west4-a"].inputs["nodeConfig"]
    assert a100["spot"] is False and a100["labels"]["torchfleet.io/capacity"] == "on-demand"
    assert a100["machineType"] == "a2-highgpu-2g"
    assert a100["guestAccelerators"][0]["count"] == 2
    t4 = pools["gpu-t4-europe-west4-c"].inputs
    assert t4["nodeConfig"]["spot"] is True
    assert t4["autoscaling"]["minNodeCount"] == 1 and t4["initialNodeCount"] == 1
    assert result.outputs["gpuPools"] == [p for p in result.outputs["gpuPools"] if p in pools]
    assert len(result.outputs["gpuPools"]) == 5
    assert result.outputs["zones"] == ["europe-west4-a", "europe-west4-b", "europe-west4-c"]


@pytest.mark.parametrize("gpu", list(FAMILY))
def test_each_gpu_gets_its_machine_family_and_accelerator(all_gpus, gpu):
    node = gpu_pools(all_gpus)[f"gpu-{gpu}-us-central1-a"].inputs["nodeConfig"]
    offer = catalog.offering(gpu, "gcp")
    assert node["machineType"].startswith(FAMILY[gpu]), node["machineType"]
    assert node["guestAccelerators"][0]["type"] == offer.accelerator
    assert node["guestAccelerators"][0]["count"] == offer.machine(node["machineType"]).gpus
    # A3 needs gVNIC, and pd-standard is refused by G2/A3: every GPU pool gets both right.
    assert node["gvnic"] == {"enabled": True}
    assert node["diskType"] == "pd-balanced"


def test_every_pool_is_shielded_private_and_runs_as_the_node_account(stack):
    result, _ = stack
    account = result.one(ACCOUNT).inputs["accountId"]
    for r in result.of_type(NODE_POOL):
        node = r.inputs["nodeConfig"]
        assert node["serviceAccount"] == f"{account}@{mock_gcp.PROJECT}.iam.gserviceaccount.com", r.name
        assert node["shieldedInstanceConfig"] == {"enableSecureBoot": True, "enableIntegrityMonitoring": True}
        assert node["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}
        assert node["imageType"] == "COS_CONTAINERD"
        assert r.inputs["management"] == {"autoRepair": True, "autoUpgrade": True}
        assert "initialNodeCount" in r.options["ignoreChanges"]
        assert r.options["deleteBeforeReplace"] is True


def test_the_cpu_pool_is_tainted_for_the_clis_cpu_pods_from_zero(stack):
    """torchfleet:cpuPool (issue 30): GKE's own Deployments tolerate neither its label nor its taint, so only the
    CLI's CPU pods land there; the shipped gcp-usc1 stack declares {machineType: e2-standard-4, maxNodes: 2}."""
    result, spec = stack
    pools = [r.inputs for r in result.of_type(NODE_POOL) if r.inputs["name"] == "cpu"]
    if spec.cpu_pool is None:
        assert pools == []
        return
    (c,) = pools
    assert c["nodeLocations"] == sorted(spec.cpu_pool.zones) and c["initialNodeCount"] == 0
    assert c["autoscaling"] == {"totalMinNodeCount": spec.cpu_pool.min_nodes,
                                "totalMaxNodeCount": spec.cpu_pool.max_nodes, "locationPolicy": "BALANCED"}
    node = c["nodeConfig"]
    assert node["taints"] == [{"key": "torchfleet.io/pool", "value": "cpu", "effect": "NO_SCHEDULE"}]
    assert node["labels"] == {"torchfleet.io/pool": "cpu", "torchfleet.io/capacity": "on-demand"}
    assert node["spot"] is False and node["machineType"] == spec.cpu_pool.machine_type
    assert "guestAccelerators" not in node


def test_manager_pool_is_on_demand_tainted_for_gkes_components_over_all_zones(stack):
    """Issue 30: untainted, the manager pool took every pod without a GPU selector (researchers' CPU jobs
    included) beside etcd; GKE's own Deployments tolerate components.gke.io/gke-managed-components."""
    result, spec = stack
    m = next(r.inputs for r in result.of_type(NODE_POOL) if r.inputs["name"] == "manager")
    assert m["nodeLocations"] == sorted(spec.zones)  # a set to the provider: order-free
    assert m["autoscaling"] == {
        "totalMinNodeCount": spec.manager_pool.min_nodes,
        "totalMaxNodeCount": spec.manager_pool.max_nodes,
        "locationPolicy": "BALANCED",
    }
    node = m["nodeConfig"]
    assert node["spot"] is False
    assert node["taints"] == [
        {"key": "components.gke.io/gke-managed-components", "value": "true", "effect": "NO_SCHEDULE"}]
    assert node["labels"] == {"torchfleet.io/pool": "manager"}
    assert node["machineType"] == spec.manager_pool.machine_type
    assert "guestAccelerators" not in node


def test_node_account_has_exactly_the_least_privilege_roles(stack):
    result, spec = stack
    members = result.of_type(IAM_MEMBER)
    email = f"{result.one(ACCOUNT).inputs['accountId']}@{mock_gcp.PROJECT}.iam.gserviceaccount.com"
    assert sorted(m.inputs["role"] for m in members) == sorted(NODE_ROLES)
    assert {m.inputs["member"] for m in members} == {f"serviceAccount:{email}"}
    assert {m.inputs["project"] for m in members} == {spec.project}


def test_pools_wait_for_the_node_roles(stack):
    result, _ = stack
    role_urns = {m.name for m in result.of_type(IAM_MEMBER)}
    for r in result.of_type(NODE_POOL):
        deps = {urn.rsplit("::", 1)[-1] for urn in r.options["dependencies"]}
        assert role_urns <= deps, (r.name, deps)


# ---------------------------------------------------------------- Filestore


def test_filestore_tier_size_network_and_exports(stack):
    result, spec = stack
    fs = result.one(FILESTORE)
    share = fs.inputs["fileShares"]
    assert fs.inputs["tier"] == spec.storage.tier
    assert share["capacityGb"] == spec.storage.size_gb
    vpc = result.one("gcp:compute/network:Network")
    (net,) = fs.inputs["networks"]
    assert (net["network"], net["modes"], net["connectMode"]) == (vpc.inputs["name"], ["MODE_IPV4"], "DIRECT_PEERING")
    # A reserved range inside the stack's CIDR, sized for the tier, overlapping no subnet range.
    reserved = ipaddress.ip_network(net["reservedIpRange"])
    assert net["reservedIpRange"] == filestore.reserved_range(
        str(reserved.supernet(new_prefix=20)), spec.storage.tier, spec.storage.size_gb
    )
    assert reserved.prefixlen in (24, 26, 29)
    assert reserved.subnet_of(ipaddress.ip_network(spec.network.cidr))
    subnet = result.one(SUBNET).inputs
    for r in [subnet["ipCidrRange"]] + [x["ipCidrRange"] for x in subnet["secondaryIpRanges"]]:
        assert not reserved.overlaps(ipaddress.ip_network(r)), r
    node_range = subnet["ipCidrRange"]
    assert [o["ipRanges"] for o in share["nfsExportOptions"]] == [[node_range]]
    expected_location = spec.region if spec.storage.tier == "REGIONAL" else spec.zones[0]
    assert fs.inputs["location"] == expected_location


def test_the_filestore_server_reaches_the_nodes_back(stack):
    """Regression (issue 20, GCP review F9): NFSv3 is bidirectional (NLM locks, statd), and the
    custom-mode VPC denied the server's calls to its clients: blocking locks stalled. The rule
    admits the instance's reserved range only, toward the nodes' service account only."""
    result, _ = stack
    fs = result.one(FILESTORE)
    (net,) = fs.inputs["networks"]
    rule = result.one("gcp:compute/firewall:Firewall", "torchfleet-gcp-filestore-nfs-callbacks")
    assert rule.inputs["direction"] == "INGRESS"
    assert rule.inputs["sourceRanges"] == [net["reservedIpRange"]]
    assert {a["protocol"] for a in rule.inputs["allows"]} == {"tcp", "udp"}
    account = result.one("gcp:serviceaccount/account:Account")
    [target] = rule.inputs["targetServiceAccounts"]
    assert target.startswith(account.inputs["accountId"] + "@")
    assert rule.inputs["network"] == result.one("gcp:compute/network:Network").inputs["name"]


def test_no_pod_is_offered_a_store_route_the_export_refuses(stack):
    """Regression (issue 20, GCP review F10): the training-to-store policy let pods reach the store,
    but the export admits only the node range and pods send from the Pod range (not masqueraded
    toward private ranges), so it opened nothing that works. The class: a policy toward the store
    exists only when the export admits the Pod range."""
    result, _ = stack
    share = result.one(FILESTORE).inputs["fileShares"]
    exported = [ipaddress.ip_network(r) for o in share["nfsExportOptions"] for r in o["ipRanges"]]
    pods = next(
        ipaddress.ip_network(r["ipCidrRange"])
        for r in result.one(SUBNET).inputs["secondaryIpRanges"]
        if r["rangeName"] == PODS_RANGE
    )
    policies = [p for p in result.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")
                if p.inputs["metadata"]["name"] == "training-to-store"]
    admitted = any(pods.subnet_of(e) for e in exported)
    assert bool(policies) == admitted == False  # noqa: E712


def test_filestore_and_its_vpc_kept_on_destroy_when_asked(stack):
    """Kept, never protected (issue 20); the VPC too, since GCP will not delete a network that a kept
    instance is peered to, and the data is reachable again only from it."""
    result, spec = stack
    fs = result.one(FILESTORE)
    vpc = result.one("gcp:compute/network:Network")
    for r in (fs, vpc):
        assert r.options["protect"] is False
        assert r.options["retainOnDelete"] is spec.storage.protect
    assert fs.inputs["name"].startswith("torchfleet-") and vpc.inputs["name"].startswith("torchfleet-")
    # Filestore's own flag exists on ZONAL/REGIONAL/ENTERPRISE only (it fails a BASIC create).
    expected = spec.storage.protect if spec.storage.tier in ("ZONAL", "REGIONAL") else None
    assert fs.inputs.get("deletionProtectionEnabled") == expected


# ---------------------------------------------------------------- outputs, kubeconfig


def test_outputs_match_the_aws_set_plus_the_store(stack):
    result, spec = stack
    out = result.outputs
    assert out["kubeconfig"] == "[secret]"
    assert out["clusterName"] == result.one(CLUSTER).name
    assert out["region"] == spec.region and out["project"] == spec.project
    assert out["zones"] == list(spec.zones)
    assert out["gpuPools"] == [p.name for p in spec.gpu_pools]
    assert out["filestoreInstance"] == f"{result.one(FILESTORE).name}-id"


def test_handle_gives_the_training_layer_a_filestore_csi_volume(handle):
    h, got = handle
    assert h.store.kind == "filestore"
    assert h.store.capacity == "2048Gi"
    assert got["volume_source"] == {
        "csi": {
            "driver": "filestore.csi.storage.gke.io",
            # Zonal tier: the instance lives in the first zone, and the handle names that zone.
            "volumeHandle": "modeInstance/europe-west4-a/torchfleet-handle-store/share",
            # 10.20.0.0/16 keeps 10.20.32.0/20 for the store; ZONAL takes its first /26.
            "volumeAttributes": {"ip": "10.20.32.2", "volume": "share"},
        }
    }
    assert got["nfs_cidrs"] == []  # no in-pod NFS client reaches it (test_no_pod_is_offered_...)
    assert h.manager_selector == {"torchfleet.io/pool": "manager"}
    assert got["kubeconfig_is_secret"] is True
    assert got["outputs"] == {
        "region": "europe-west4",
        "project": "ml-research",
        "filestoreInstance": "h-filestore-instance-id",  # the mock's id
    }
    assert h.zones == ("europe-west4-a", "europe-west4-b", "europe-west4-c")
    assert [p.name for p in h.gpu_pools][:1] == ["gpu-t4-europe-west4-a"]


def test_handle_ready_holds_the_cluster_manager_pool_store_nat_and_webhook_rule(handle):
    h, _ = handle
    kinds = sorted(type(r).__name__ for r in h.ready)
    assert kinds == ["Cluster", "Firewall", "Instance", "NodePool", "RouterNat"]
    pool = next(r for r in h.ready if isinstance(r, gcp.container.NodePool))
    assert pool._name == "h-pools-manager"


def test_webhook_port_open_from_the_control_plane_to_the_nodes(stack):
    """Issue 19 item 9: the training-operator's webhook (9443) was unreachable on private GKE."""
    result, _ = stack
    rule = result.one("gcp:compute/firewall:Firewall", "torchfleet-gcp-webhooks")
    assert rule.inputs["direction"] == "INGRESS"
    assert rule.inputs["allows"] == [{"protocol": "tcp", "ports": ["9443"]}]
    assert rule.inputs["sourceRanges"] == [f"{mock_gcp.MOCK_PRIVATE_ENDPOINT}/32"]
    account = result.one("gcp:serviceaccount/account:Account")
    [target] = rule.inputs["targetServiceAccounts"]
    assert target.startswith(account.inputs["accountId"] + "@")  # the nodes' account only


def test_control_plane_reached_by_dns_endpoint_unless_turned_off(stack):
    """GCP review F1: a private cluster was reachable only from inside its VPC. The DNS endpoint
    (IAM-gated) is on unless network.dnsEndpoint is false, said explicitly either way, and Google
    Cloud's public IPs never bypass the authorized networks."""
    result, spec = stack
    c = result.one(CLUSTER).inputs
    dns = spec.network.dns_endpoint
    assert c["controlPlaneEndpointsConfig"] == {"dnsEndpointConfig": {"allowExternalTraffic": dns}}
    assert c["masterAuthorizedNetworksConfig"]["gcpPublicCidrsAccessEnabled"] is False
    assert [b["cidrBlock"] for b in c["masterAuthorizedNetworksConfig"]["cidrBlocks"]] == list(
        spec.network.public_access_cidrs
    )


def test_kubernetes_provider_uses_exec_auth_against_the_cluster(stack):
    result, spec = stack
    provider = result.one("pulumi:providers:kubernetes")
    config = yaml.safe_load(provider.inputs["kubeconfig"])
    assert provider.printable["kubeconfig"] == "[secret]"
    cluster = config["clusters"][0]["cluster"]
    if spec.network.dns_endpoint:
        # The DNS endpoint serves a publicly trusted certificate: no cluster CA, as gcloud writes it.
        assert cluster == {"server": f"https://{mock_gcp.MOCK_DNS_ENDPOINT}"}
    else:
        assert cluster["server"] == f"https://{mock_gcp.MOCK_ENDPOINT}"
        assert cluster["certificate-authority-data"] == mock_gcp.MOCK_CA
    user = config["users"][0]["user"]
    assert set(user) == {"exec"}  # no token, password or client key in the file
    assert user["exec"]["command"] == kubeconfig_mod.AUTH_PLUGIN
    # Regression (issue 20, GCP review F2): the plugin used gcloud's active account, not the ADC the
    # GCP provider uses.
    assert user["exec"]["args"] == ["--use_application_default_credentials"]


def test_training_layer_runs_on_the_gke_provider(stack):
    result, _ = stack
    provider = result.one("pulumi:providers:kubernetes")
    k8s_objects = [r for r in result.resources if r.custom and r.type.startswith("kubernetes:")]
    assert k8s_objects
    for r in k8s_objects:
        # A provider reference is "<provider urn>::<provider id>".
        assert r.options["provider"].endswith(f"$pulumi:providers:kubernetes::{provider.name}::{provider.name}-id"), (
            r.name,
            r.options["provider"],
        )


def test_gcp_stacks_give_jobs_the_gke_spot_notice():
    # GKE gives non-system pods 15 s of a spot VM's 30 s notice; jobs get that grace period.
    for path in sorted(STACKS_DIR.glob("Pulumi.gcp-*.yaml")):
        _, config, _ = stack_config(path)
        raw = {k: yaml.safe_load(v) if v[:1] in "[{" else v for k, v in config.items()}
        assert parse(raw).training.termination_grace_s == 15, path.name
        # ... and the job builder (torchfleet submit) reads that grace period from the stack.
        stack_name = path.name.removeprefix("Pulumi.").removesuffix(".yaml")
        assert job_target.from_stack(stack_name).grace_s == 15, path.name
