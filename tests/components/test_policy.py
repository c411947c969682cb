"""Each guardrail rule on hand-built resources: one list that breaks it, one that passes.

The resources carry the engine's property names per cloud (as the recording monitor and
CrossGuard see them), so these tests hold whichever cloud module is finished. The same rules on
synthesized stacks are tested end to end in tests/torchfleet/test_check.py.
"""

from __future__ import annotations

import pytest

from components import policy
from components.policy import UNKNOWN, check

GPU_TAINT_EKS = {"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}
GPU_LABELS = {"torchfleet.io/pool": "gpu"}


def res(type_: str, name: str, inputs: dict, kept: bool = False, deps: dict | None = None) -> dict:
    """A resource as the recording monitor gives it; `kept`: the retainOnDelete option."""
    return {"type": type_, "name": name, "inputs": inputs,
            "options": {"protect": False, "retainOnDelete": kept, "propertyDependencies": deps or {}}}


def eks(name="gpu-t4-a", taints=(GPU_TAINT_EKS,), subnets=("subnet-a",), capacity="SPOT", max_size=4,
        types=("g4dn.xlarge",), labels=GPU_LABELS, deps=None, drop=()) -> dict:
    inputs = {"taints": list(taints), "subnetIds": list(subnets), "capacityType": capacity,
              "scalingConfig": {"minSize": 0.0, "maxSize": max_size, "desiredSize": 0.0},
              "instanceTypes": list(types), "labels": dict(labels)}
    for key in drop:
        inputs.pop(key)
    return res("aws:eks/nodeGroup:NodeGroup", name, inputs, deps=deps)


def gke(name="gpu-t4-a", taints=(GPU_TAINT_EKS,), locations=("us-central1-a",), spot=True, max_per_zone=4,
        machine="n1-standard-8", accelerators=1, location="us-central1", labels=GPU_LABELS, **extra) -> dict:
    node = {"machineType": machine, "spot": spot, "taints": list(taints), "labels": dict(labels)}
    if accelerators:
        node["guestAccelerators"] = [{"type": "nvidia-tesla-t4", "count": float(accelerators)}]
    scaling = {"minNodeCount": 0, "maxNodeCount": max_per_zone}
    inputs = {"location": location, "nodeConfig": node, "autoscaling": scaling}
    if locations is not None:
        inputs["nodeLocations"] = list(locations)
    return res("gcp:container/nodePool:NodePool", name, {**inputs, **extra})


def aks(name="gput4z1", taints=("nvidia.com/gpu=present:NoSchedule",), zones=("1",), priority="Spot",
        max_count=4, vm="Standard_NC8as_T4_v3", **extra) -> dict:
    inputs = {"nodeTaints": list(taints), "scaleSetPriority": priority, "enableAutoScaling": True,
              "maxCount": max_count, "minCount": 0, "vmSize": vm, "nodeLabels": dict(GPU_LABELS), **extra}
    if zones is not None:
        inputs["availabilityZones"] = list(zones)
    return res("azure-native:containerservice:AgentPool", name, inputs)


MANAGER = res("aws:eks/nodeGroup:NodeGroup", "manager", {
    "taints": [], "subnetIds": ["a", "b"], "capacityType": "ON_DEMAND", "instanceTypes": ["m6i.large"],
    "scalingConfig": {"maxSize": 3.0}, "labels": {"torchfleet.io/pool": "manager"}})


def rules_of(resources, **limits) -> list[tuple[str, str]]:
    return [(v.rule, v.resource) for v in check(resources, **limits)]


def only(rule: str, resources, **limits) -> list[str]:
    return [v.resource for v in check(resources, **limits) if v.rule == rule]


def test_good_pools_on_every_cloud_pass_every_rule():
    assert rules_of([MANAGER, eks(), gke(), aks()]) == []


# ---------------------------------------------------------------- gpu-pool-tainted


@pytest.mark.parametrize("bad", [
    eks(taints=()),
    eks(taints=({"key": "nvidia.com/gpu", "value": "present", "effect": "PREFER_NO_SCHEDULE"},)),
    eks(taints=({"key": "nvidia.com/gpu", "effect": "NO_SCHEDULE"},)),  # no value: the EKS autoscaler drops it
    eks(labels={}, taints=()),  # found by its GPU machine type, not only by label
    gke(taints=()),
    aks(taints=("kubernetes.azure.com/scalesetpriority=spot:NoSchedule",)),
], ids=["eks-none", "eks-prefer", "eks-no-value", "eks-unlabelled", "gke-none", "aks-only-spot-taint"])
def test_gpu_pool_without_the_gpu_taint_is_reported(bad):
    assert only("gpu-pool-tainted", [bad]) == [bad["name"]]


def test_untainted_manager_pool_is_not_a_gpu_pool():
    assert only("gpu-pool-tainted", [MANAGER]) == []


def test_aks_pool_with_both_taints_passes():
    both = aks(taints=("nvidia.com/gpu=present:NoSchedule", "kubernetes.azure.com/scalesetpriority=spot:NoSchedule"))
    assert only("gpu-pool-tainted", [both]) == []


# ---------------------------------------------------------------- gpu-pool-one-zone


@pytest.mark.parametrize("bad", [
    eks(subnets=("subnet-a", "subnet-b")),
    eks(drop=("subnetIds",)),
    gke(locations=("us-central1-a", "us-central1-b")),
    gke(locations=None),  # a regional cluster's pool without nodeLocations spans every zone
    aks(zones=("1", "2")),
    aks(zones=None),
], ids=["eks-two-subnets", "eks-no-subnets", "gke-two", "gke-regional", "aks-two", "aks-none"])
def test_gpu_pool_not_in_exactly_one_zone_is_reported(bad):
    assert only("gpu-pool-one-zone", [bad]) == [bad["name"]]


def test_gke_pool_of_a_zonal_cluster_is_in_one_zone():
    assert only("gpu-pool-one-zone", [gke(locations=None, location="us-central1-a")]) == []


# ---------------------------------------------------------------- gpu-pool-spot


@pytest.mark.parametrize("bad", [
    eks(capacity="ON_DEMAND"),
    eks(drop=("capacityType",)),  # EKS defaults to ON_DEMAND
    gke(spot=False),
    aks(priority="Regular"),
    aks(priority=None) | {"inputs": {k: v for k, v in aks()["inputs"].items() if k != "scaleSetPriority"}},
], ids=["eks", "eks-default", "gke", "aks", "aks-default"])
def test_on_demand_gpu_pool_needs_the_stack_to_allow_it(bad):
    assert only("gpu-pool-spot", [bad]) == [bad["name"]]
    assert only("gpu-pool-spot", [bad], allow_on_demand_gpus=True) == []


def test_gke_preemptible_counts_as_spot():
    pool = gke(spot=False)
    pool["inputs"]["nodeConfig"]["preemptible"] = True
    assert only("gpu-pool-spot", [pool]) == []


# ---------------------------------------------------------------- gpu-count-cap


def test_gpu_cap_holds_at_the_limit_and_breaks_one_over():
    pools = [eks(name="a", max_size=8.0), eks(name="b", max_size=8.0)]  # the engine sends numbers as floats
    assert only("gpu-count-cap", pools, max_gpus=16) == []
    violations = [v for v in check(pools, max_gpus=15) if v.rule == "gpu-count-cap"]
    assert [v.resource for v in violations] == [policy.STACK]
    assert "16 GPUs" in violations[0].why and "maxGpus=15" in violations[0].why


def test_gpu_cap_counts_the_biggest_machine_of_a_pool():
    pool = eks(types=("g4dn.xlarge", "g4dn.12xlarge"), max_size=4)  # 1 and 4 GPUs: count 4 per node
    assert only("gpu-count-cap", [pool], max_gpus=15) == [policy.STACK]
    assert only("gpu-count-cap", [pool], max_gpus=16) == []


def test_gpu_cap_multiplies_gke_max_per_zone_by_zones():
    pool = gke(locations=("us-central1-a", "us-central1-b"), max_per_zone=4, accelerators=2)  # 2 zones x 4 x 2
    assert only("gpu-count-cap", [pool], max_gpus=15) == [policy.STACK]
    assert only("gpu-count-cap", [pool], max_gpus=16) == []


def test_gpu_cap_uses_gke_total_max_when_set():
    pool = gke(locations=("us-central1-a", "us-central1-b"))
    pool["inputs"]["autoscaling"] = {"totalMaxNodeCount": 3}
    assert only("gpu-count-cap", [pool], max_gpus=2) == [policy.STACK]
    assert only("gpu-count-cap", [pool], max_gpus=3) == []


def test_gpu_cap_counts_built_in_gpus_of_aks_machines():
    assert only("gpu-count-cap", [aks(vm="Standard_NC64as_T4_v3", max_count=2)], max_gpus=7) == [policy.STACK]


def test_gpu_pool_of_an_unknown_machine_cannot_be_counted():
    pool = eks(types=("g99.mystery",))
    assert only("gpu-count-cap", [pool]) == [pool["name"]]


def test_gpu_pool_without_a_maximum_is_reported():
    pool = eks()
    pool["inputs"]["scalingConfig"] = {}
    assert only("gpu-count-cap", [pool]) == [pool["name"]]


# ---------------------------------------------------------------- stores


def efs(encrypted=True, kept=True) -> dict:
    inputs = {"throughputMode": "elastic"} if encrypted is None else {"encrypted": encrypted}
    return res("aws:efs/fileSystem:FileSystem", "efs", inputs, kept=kept)


@pytest.mark.parametrize("bad", [efs(encrypted=False), efs(encrypted=None)], ids=["false", "unset"])
def test_unencrypted_efs_is_reported(bad):
    assert only("store-encrypted", [bad]) == ["efs"]


def test_encrypted_efs_and_platform_encrypted_stores_pass():
    stores = [efs(), res("gcp:filestore/instance:Instance", "fs", {"tier": "BASIC_HDD"}, kept=True),
              res("azure-native:storage:StorageAccount", "sa", {"kind": "FileStorage"}, kept=True)]
    assert rules_of(stores) == []


@pytest.mark.parametrize("type_", list(policy.STORES))
def test_store_not_kept_on_destroy_is_reported(type_):
    store = res(type_, "store", {"encrypted": True}, kept=False)
    assert only("store-protected", [store]) == ["store"]
    assert only("store-protected", [{**store, "options": {"retainOnDelete": True}}]) == []
    # `protect` is not keeping: it makes `pulumi destroy` fail and delete nothing (issue 20).
    assert only("store-protected", [{**store, "options": {"protect": True, "retainOnDelete": False}}]) == ["store"]


def test_store_rule_is_silent_where_retain_on_delete_is_not_known():
    """CrossGuard's PolicyResourceOptions carries protect but not retainOnDelete (policy/guardrails.py)."""
    store = res("aws:efs/fileSystem:FileSystem", "store", {"encrypted": True})
    assert only("store-protected", [{**store, "options": {"protect": False}}]) == []


# ---------------------------------------------------------------- no-public-node-ips

URN = "urn:pulumi:s::torchfleet::torchfleet:clouds:AwsNetwork$aws:ec2/subnet:Subnet::{}"


def subnet(name: str, public: bool) -> dict:
    return res("aws:ec2/subnet:Subnet", name, {"mapPublicIpOnLaunch": public, "availabilityZone": "us-west-2a"})


def test_node_group_in_a_subnet_that_maps_public_ips_is_reported():
    pool = eks(deps={"subnetIds": [URN.format("public-a")]})
    assert only("no-public-node-ips", [subnet("public-a", True), pool]) == ["public-a"]


def test_public_subnet_without_nodes_passes():
    pool = eks(deps={"subnetIds": [URN.format("private-a")]})
    assert only("no-public-node-ips", [subnet("public-a", True), subnet("private-a", False), pool]) == []


@pytest.mark.parametrize("value", [True, "true"])
def test_launch_template_with_a_public_ip_is_reported(value):
    nics = [{"associatePublicIpAddress": value}]
    lt = res("aws:ec2/launchTemplate:LaunchTemplate", "lt", {"networkInterfaces": nics})
    assert only("no-public-node-ips", [lt]) == ["lt"]
    lt["inputs"]["networkInterfaces"][0]["associatePublicIpAddress"] = "false"
    assert only("no-public-node-ips", [lt]) == []


def gke_cluster(private: bool | None) -> dict:
    inputs = {} if private is None else {"privateClusterConfig": {"enablePrivateNodes": private}}
    return res("gcp:container/cluster:Cluster", "gke", inputs)


@pytest.mark.parametrize("private", [False, None])
def test_gke_cluster_without_private_nodes_is_reported(private):
    assert only("no-public-node-ips", [gke_cluster(private)]) == ["gke"]


def test_gke_private_cluster_passes_and_pools_may_opt_in_instead():
    assert only("no-public-node-ips", [gke_cluster(True)]) == []
    cluster_urn = "urn:pulumi:s::torchfleet::gcp:container/cluster:Cluster::gke"
    pool = gke(networkConfig={"enablePrivateNodes": True})
    pool["options"]["propertyDependencies"] = {"cluster": [cluster_urn]}
    assert only("no-public-node-ips", [gke_cluster(None), pool]) == []
    pool["inputs"]["networkConfig"]["enablePrivateNodes"] = False
    assert only("no-public-node-ips", [gke_cluster(True), pool]) == [pool["name"]]


def test_aks_pools_with_public_node_ips_are_reported():
    pool = aks(enableNodePublicIP=True)
    cluster = res("azure-native:containerservice:ManagedCluster", "aks",
                  {"agentPoolProfiles": [{"name": "system", "enableNodePublicIP": True}]})
    assert only("no-public-node-ips", [pool, cluster]) == [pool["name"], "aks/system"]
    assert only("no-public-node-ips", [aks(enableNodePublicIP=False)]) == []


# ---------------------------------------------------------------- pinned-versions


def release(version) -> dict:
    return res("kubernetes:helm.sh/v3:Release", "autoscaler", {"chart": "cluster-autoscaler", "version": version})


@pytest.mark.parametrize("version", [None, "", "latest", "^9.37.0", "~9.37", ">=9.0.0", "9.x", "*", "9.37"])
def test_chart_without_an_exact_version_is_reported(version):
    assert only("pinned-versions", [release(version)]) == ["autoscaler"]


@pytest.mark.parametrize("version", ["9.37.0", "v0.17.0", "1.0.0-rc.1"])
def test_chart_with_an_exact_version_passes(version):
    assert only("pinned-versions", [release(version)]) == []


def pod(image: str) -> dict:
    return res("kubernetes:apps/v1:Deployment", "etcd", {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "spec": {"template": {"spec": {"initContainers": [{"name": "init", "image": "busybox:1.36"}],
                                       "containers": [{"name": "etcd", "image": image}]}}}})


@pytest.mark.parametrize("image", ["nginx", "nginx:latest", "localhost:5000/nginx", "quay.io/coreos/etcd"])
def test_image_without_a_tag_or_with_latest_is_reported(image):
    assert only("pinned-versions", [pod(image)]) == ["etcd"]


@pytest.mark.parametrize("image", ["quay.io/coreos/etcd:v3.5.21", "localhost:5000/etcd:3.5",
                                   "etcd@sha256:" + "a" * 64])
def test_image_with_a_tag_or_digest_passes(image):
    assert only("pinned-versions", [pod(image)]) == []


def test_images_inside_custom_resources_are_checked():
    job = res("kubernetes:elastic.pytorch.org/v1alpha1:ElasticJob", "job", {
        "apiVersion": "elastic.pytorch.org/v1alpha1", "kind": "ElasticJob",
        "spec": {"replicaSpecs": {"Worker": {"template": {"spec": {"containers": [{"image": "trainer:latest"}]}}}}}})
    assert only("pinned-versions", [job]) == ["job"]


@pytest.mark.parametrize(("ref", "bad"), [("v1.9.4", False), ("a" * 40, False), ("master", True), (None, True)])
def test_remote_kustomization_is_pinned_to_a_tag_or_commit(ref, bad):
    url = "https://github.com/kubeflow/training-operator.git//manifests/overlays/standalone"
    directory = res("kubernetes:kustomize/v2:Directory", "kubeflow",
                    {"directory": f"{url}?ref={ref}" if ref else url})
    assert only("pinned-versions", [directory]) == (["kubeflow"] if bad else [])


# ---------------------------------------------------------------- preview unknowns, output, config


def test_rules_never_judge_values_unknown_during_preview():
    pool = eks(capacity=UNKNOWN, max_size=UNKNOWN)
    pool["inputs"].update(taints=UNKNOWN, subnetIds=UNKNOWN)
    unknown = [
        pool,
        res("aws:efs/fileSystem:FileSystem", "efs", {"encrypted": UNKNOWN}, kept=True),
        release(UNKNOWN),
        pod(UNKNOWN),
    ]
    assert rules_of(unknown, max_gpus=1) == []
    # The same pool with known values breaks five rules: the unknowns are what kept it quiet.
    assert len(rules_of([eks(taints=(), subnets=("a", "b"), capacity="ON_DEMAND", max_size=2), efs(False)],
                        max_gpus=1)) == 5


def test_subnet_ids_unknown_in_preview_still_count_zones():
    assert only("gpu-pool-one-zone", [eks(subnets=(UNKNOWN, UNKNOWN))]) == ["gpu-t4-a"]


def test_violation_line_is_rule_resource_why():
    v = policy.Violation("gpu-pool-spot", "gpu-t4-a", "GPU pool is on-demand")
    assert v.line() == "gpu-pool-spot  gpu-t4-a  GPU pool is on-demand"


def test_check_reports_in_rule_order_and_every_rule_is_named_once():
    names = [r.name for r in policy.RULES]
    assert len(set(names)) == len(names) == 10
    found = [v.rule for v in check([eks(taints=(), capacity="ON_DEMAND", subnets=("a", "b")), efs(kept=False)])]
    assert found == ["gpu-pool-tainted", "gpu-pool-one-zone", "gpu-pool-spot", "store-protected"]


def test_pack_config_round_trips_the_limits():
    limits = policy.Limits(max_gpus=12, allow_on_demand_gpus=True)
    assert policy.pack_config(limits) == {"gpu-count-cap": {"maxGpus": 12},
                                          "gpu-pool-spot": {"allowOnDemandGpus": True},
                                          "public-endpoint": {"enforcementLevel": "advisory"}}
    assert policy.limits_from_pack_config(policy.pack_config(limits)) == limits
    restricted = policy.Limits(max_gpus=12, restrict_public_endpoint=True)
    assert policy.pack_config(restricted)["public-endpoint"] == {"enforcementLevel": "mandatory"}
    assert policy.limits_from_pack_config(policy.pack_config(restricted)) == restricted
    assert policy.limits_from_pack_config({}) == policy.Limits() == policy.Limits(64, False, False)


def test_rules_import_only_the_stdlib_and_yaml_so_the_pack_venv_can_run_them():
    """No pulumi (the offline check and the pack share the rules) and nothing policy/requirements.txt lacks."""
    import json
    import subprocess
    import sys

    from tests.harness import REPO

    # Only what importing the rules loads (not the interpreter's own startup hooks).
    code = ("import json, sys; before = set(sys.modules); import components.policy; "
            "print(json.dumps(sorted({m.split('.')[0] for m in set(sys.modules) - before} "
            "- set(sys.stdlib_module_names))))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True,
                          timeout=60)
    # Besides ours: PyYAML and its compiled (Cython) parts.
    loaded = {m for m in json.loads(proc.stdout) if not m.startswith(("_cython", "cython_"))}
    assert loaded <= {"components", "yaml", "_yaml"}


def test_gke_pool_with_zones_unknown_in_preview_is_not_counted_as_unbounded():
    pool = gke()
    pool["inputs"]["nodeLocations"] = UNKNOWN
    assert rules_of([pool], max_gpus=1) == []


# ---------------------------------------------------------------- public-endpoint

OPEN = "0.0.0.0/0"


def eks_cluster(public=True, cidrs=(OPEN,)) -> dict:
    vpc = {"endpointPrivateAccess": True, "subnetIds": ["a", "b"]}
    if public is not None:
        vpc["endpointPublicAccess"] = public
    if cidrs is not None:
        vpc["publicAccessCidrs"] = list(cidrs)
    return res("aws:eks/cluster:Cluster", "eks", {"vpcConfig": vpc})


def gke_control_plane(private_endpoint=False, cidrs=(OPEN,)) -> dict:
    inputs = {"privateClusterConfig": {"enablePrivateNodes": True, "enablePrivateEndpoint": private_endpoint}}
    if cidrs is not None:
        inputs["masterAuthorizedNetworksConfig"] = {
            "cidrBlocks": [{"cidrBlock": c, "displayName": f"n{i}"} for i, c in enumerate(cidrs)]}
    return res("gcp:container/cluster:Cluster", "gke", inputs)


def aks_cluster(profile: dict | None) -> dict:
    inputs = {"agentPoolProfiles": []}
    if profile is not None:
        inputs["apiServerAccessProfile"] = profile
    return res("azure-native:containerservice:ManagedCluster", "aks", inputs)


OPEN_ENDPOINTS = [
    ("eks open", eks_cluster()),
    ("eks default cidrs", eks_cluster(cidrs=None)),
    ("eks public by default", eks_cluster(public=None, cidrs=None)),
    ("eks open among narrow", eks_cluster(cidrs=("203.0.113.0/24", OPEN))),
    ("eks ipv6 open", eks_cluster(cidrs=("::/0",))),
    ("gke open", gke_control_plane()),
    ("gke no authorized networks", gke_control_plane(cidrs=None)),
    ("aks default", aks_cluster(None)),
    ("aks no ranges", aks_cluster({"enablePrivateCluster": False})),
    ("aks open range", aks_cluster({"authorizedIPRanges": ["203.0.113.0/24", OPEN]})),
]
CLOSED_ENDPOINTS = [
    ("eks narrow", eks_cluster(cidrs=("203.0.113.0/24",))),
    ("eks private", eks_cluster(public=False, cidrs=None)),
    ("gke narrow", gke_control_plane(cidrs=("198.51.100.7/32",))),
    ("gke private endpoint", gke_control_plane(private_endpoint=True, cidrs=None)),
    ("gke authorized networks with no block", gke_control_plane(cidrs=())),
    ("aks narrow", aks_cluster({"authorizedIPRanges": ["203.0.113.0/24"]})),
    ("aks private", aks_cluster({"enablePrivateCluster": True})),
]


@pytest.mark.parametrize("cluster", [c for _, c in OPEN_ENDPOINTS], ids=[n for n, _ in OPEN_ENDPOINTS])
def test_api_endpoint_open_to_the_internet_is_advisory_by_default(cluster):
    found = check([cluster])
    assert [(v.rule, v.resource, v.advisory) for v in found] == [("public-endpoint", cluster["name"], True)]
    assert "network.publicAccessCidrs" in found[0].why


@pytest.mark.parametrize("cluster", [c for _, c in OPEN_ENDPOINTS], ids=[n for n, _ in OPEN_ENDPOINTS])
def test_api_endpoint_open_to_the_internet_is_mandatory_when_the_stack_restricts_it(cluster):
    found = check([cluster], restrict_public_endpoint=True)
    assert [(v.rule, v.advisory) for v in found] == [("public-endpoint", False)]


@pytest.mark.parametrize("cluster", [c for _, c in CLOSED_ENDPOINTS], ids=[n for n, _ in CLOSED_ENDPOINTS])
def test_narrowed_or_private_api_endpoint_passes(cluster):
    assert rules_of([cluster], restrict_public_endpoint=True) == []


def test_public_endpoint_never_judges_values_unknown_during_preview():
    clusters = [eks_cluster(cidrs=None), gke_control_plane(), aks_cluster(UNKNOWN)]
    clusters[0]["inputs"]["vpcConfig"]["publicAccessCidrs"] = UNKNOWN
    clusters[1]["inputs"]["privateClusterConfig"]["enablePrivateEndpoint"] = UNKNOWN
    assert rules_of(clusters, restrict_public_endpoint=True) == []


def test_other_rules_stay_mandatory_whatever_the_endpoint_guardrail():
    for restrict in (False, True):
        found = check([eks(taints=()), eks_cluster()], restrict_public_endpoint=restrict)
        assert {v.rule: v.advisory for v in found} == {"gpu-pool-tainted": False, "public-endpoint": not restrict}
