"""Mock tests of the Azure cloud: what the program registers for real stack configs.

Each fixture synths once (preview=False, all outputs resolved); the tests assert on recorded
inputs and the options the engine received.
"""

import re

import pytest
import yaml

from components.clouds.azure import cluster as aks_cluster
from components.clouds.azure import cpu_pool, device_plugin, manager_pool, naming
from components.spec import parse
from tests.harness import synth_config, synth_stack
from torchfleet.preview import mock_azure

RG = "azure-native:resources:ResourceGroup"
VNET = "azure-native:network:VirtualNetwork"
SUBNET = "azure-native:network:Subnet"
CLUSTER = "azure-native:containerservice:ManagedCluster"
POOL = "azure-native:containerservice:AgentPool"
ROLE = "azure-native:authorization:RoleAssignment"
IDENTITY = "azure-native:managedidentity:UserAssignedIdentity"
ACCOUNT = "azure-native:storage:StorageAccount"
SHARE = "azure-native:storage:FileShare"
ENDPOINT = "azure-native:network:PrivateEndpoint"
ZONE = "azure-native:privatedns:PrivateZone"
ZONE_LINK = "azure-native:privatedns:VirtualNetworkLink"
ZONE_GROUP = "azure-native:network:PrivateDnsZoneGroup"
CONFIGMAP = "kubernetes:core/v1:ConfigMap"
RELEASE = "kubernetes:helm.sh/v3:Release"
K8S_PROVIDER = "pulumi:providers:kubernetes"

# Three zones and two GPU types: T4 spot on two machine types, A100 80GB on demand.
THREE_ZONES = {
    "azure-native:location": "westeurope",
    "torchfleet:cloud": "azure",
    "torchfleet:zones": ["1", "2", "3"],
    "torchfleet:managerPool": {"machineType": "Standard_D8s_v5", "minNodes": 2, "maxNodes": 4},
    "torchfleet:gpuPools": [
        {"gpu": "t4", "maxNodes": 6, "machineTypes": ["Standard_NC4as_T4_v3", "Standard_NC8as_T4_v3"]},
        {"gpu": "a100-80gb", "minNodes": 1, "maxNodes": 2, "spot": False},
    ],
    "torchfleet:storage": {"protect": False, "tier": "Premium_ZRS", "sizeGb": 512},
    "torchfleet:network": {"cidr": "10.20.0.0/16", "publicAccessCidrs": ["203.0.113.0/24"]},
    "torchfleet:autoscaler": {"scaleDownUnneededTime": "3m", "scaleDownDelayAfterAdd": "7m"},
    "torchfleet:guardrails": {"maxGpus": 64, "allowOnDemandGpus": True},
    # As CI runs it: a service principal through ARM_* for both providers.
    "torchfleet:deployerPrincipalType": "ServicePrincipal",
    "torchfleet:kubeLogin": "spn",
    # The deployer (the mocks' client object id) lists itself: no implicit grant (issue 29).
    "torchfleet:admins": [f"ServicePrincipal:{mock_azure.OBJECT_ID}", "Group:00000000-0000-0000-0000-0000000000a9"],
}


@pytest.fixture(scope="module")
def example():
    return synth_stack("azure-eus")


@pytest.fixture(scope="module")
def three():
    return synth_config("azure-three", THREE_ZONES)


def _by_key(result):
    return {r.key: r for r in result.resources}


def _urn_name(urn: str) -> str:
    return urn.rsplit("::", 1)[-1]


def _gpu_pools(result):
    """The GPU AgentPools (the manager and CPU pools are AgentPools too: manager_pool.py, cpu_pool.py)."""
    return [p for p in result.of_type(POOL)
            if p.name not in ("torchfleet-azure-pools-manager", "torchfleet-azure-pools-cpu")]


# ------------------------------------------------------------------ network


def test_network_is_private_and_sized_from_config(three):
    result = three
    vnet = result.one(VNET)
    assert vnet.inputs["addressSpace"] == {"addressPrefixes": ["10.20.0.0/16"]}
    assert vnet.inputs["location"] == "westeurope"
    subnets = {s.name: s.inputs for s in result.of_type(SUBNET)}
    assert subnets["torchfleet-azure-net-nodes"]["addressPrefix"] == "10.20.0.0/17"
    assert subnets["torchfleet-azure-net-endpoints"]["addressPrefix"] == "10.20.128.0/24"
    for s in subnets.values():
        assert s["defaultOutboundAccess"] is False
        assert s["virtualNetworkName"] == "torchfleet-azure-net-vnet"
    assert result.one(VNET).options["ignoreChanges"] == ["subnets"]


# ------------------------------------------------------------------ cluster


def test_cluster_security_settings(example):
    c = example.one(CLUSTER).inputs
    assert c["disableLocalAccounts"] is True
    assert c["enableRBAC"] is True
    assert c["aadProfile"] == {"managed": True, "enableAzureRBAC": True, "tenantID": mock_azure.TENANT_ID}
    assert c["oidcIssuerProfile"] == {"enabled": True}
    assert c["securityProfile"] == {"workloadIdentity": {"enabled": True}}
    assert c["storageProfile"]["fileCSIDriver"] == {"enabled": True}
    net = c["networkProfile"]
    assert (net["networkPlugin"], net["networkPluginMode"], net["networkPolicy"], net["networkDataplane"]) == (
        "azure", "overlay", "cilium", "cilium")
    assert net["serviceCidr"] == "172.16.0.0/16" and net["dnsServiceIP"] == "172.16.0.10"
    assert c["kubernetesVersion"] == "1.35"
    assert c["location"] == "eastus"
    # Issue 29: public but only to the listed ranges (the example's documentation range), through API Server
    # VNet Integration in the delegated subnet; never the private cluster the same `up` could not reach.
    assert c["apiServerAccessProfile"] == {
        "enableVnetIntegration": True, "subnetId": "torchfleet-azure-net-apiserver-id",
        "enablePrivateCluster": False, "authorizedIPRanges": ["203.0.113.0/24"]}


def test_cluster_identity_is_user_assigned_with_network_rights_first(example):
    keyed = _by_key(example)
    c = example.one(CLUSTER)
    identity = example.one(IDENTITY)
    assert c.inputs["identity"] == {"type": "UserAssigned", "userAssignedIdentities": [f"{identity.name}-id"]}
    subnet_role = example.one(ROLE, "torchfleet-azure-cluster-subnet-role")
    assert subnet_role.inputs["scope"] == "torchfleet-azure-net-nodes-id"
    assert subnet_role.inputs["principalType"] == "ServicePrincipal"
    assert subnet_role.inputs["principalId"] == mock_azure._identity(_Args(identity)).get("principalId")
    assert subnet_role.inputs["roleDefinitionId"].endswith(aks_cluster.NETWORK_CONTRIBUTOR)
    assert subnet_role.inputs["roleDefinitionId"].startswith(f"/subscriptions/{mock_azure.SUBSCRIPTION_ID}/")
    # "The cluster identity needs permissions to both the API server subnet and the node subnet"
    # (aks-docs api-server-vnet-integration.md).
    api_role = example.one(ROLE, "torchfleet-azure-cluster-apiserver-subnet-role")
    assert api_role.inputs["scope"] == "torchfleet-azure-net-apiserver-id"
    assert api_role.inputs["principalId"] == subnet_role.inputs["principalId"]
    assert api_role.inputs["roleDefinitionId"] == subnet_role.inputs["roleDefinitionId"]
    # The cluster waits for the role assignments (ARM cannot infer it) and for them to take effect (issue 29).
    deps = {_urn_name(u) for u in c.options["dependencies"]}
    assert {"torchfleet-azure-cluster-subnet-role", "torchfleet-azure-cluster-apiserver-subnet-role",
            "torchfleet-azure-cluster-subnet-roles-propagation"} <= deps
    wait = example.one("pulumi-python:dynamic:Resource", "torchfleet-azure-cluster-subnet-roles-propagation")
    assert wait.inputs["seconds"] >= 300 and subnet_role.key in example.depends_on(wait)
    parent = keyed[f"{ROLE}::torchfleet-azure-cluster-subnet-role"].parent
    assert parent == "torchfleet:clouds:AksCluster::torchfleet-azure-cluster"


class _Args:
    """A MockResourceArgs look-alike, to compute what the mock answered for a recorded resource."""

    def __init__(self, recorded):
        self.name, self.inputs, self.typ = recorded.name, recorded.inputs, recorded.type


def test_the_fixed_system_pool_is_the_only_inline_pool(three):
    """Issue 29: nothing of the inline pool comes from managerPool, so no update AKS refuses is sent for it;
    CriticalAddonsOnly and two nodes per aks-docs use-system-pools.md."""
    result = three
    profiles = result.one(CLUSTER).inputs["agentPoolProfiles"]
    assert len(profiles) == 1, "the manager and GPU pools must be separate AgentPool resources, never inline"
    m = profiles[0]
    assert (m["name"], m["mode"], m["vmSize"]) == ("system", "System", "Standard_D4s_v5")
    assert (m["enableAutoScaling"], m["minCount"], m["maxCount"], m["count"]) == (True, 2, 3, 2)
    assert m["nodeTaints"] == ["CriticalAddonsOnly=true:NoSchedule"]
    assert m["availabilityZones"] == ["1", "2", "3"]
    assert "nodeLabels" not in m
    assert m["enableNodePublicIP"] is False
    assert m["vnetSubnetID"] == "torchfleet-azure-net-nodes-id"
    assert "scaleSetPriority" not in m  # on-demand


def test_the_manager_pool_is_an_agent_pool_named_by_its_immutable_settings(three):
    (m,) = [p for p in three.of_type(POOL) if p.name == "torchfleet-azure-pools-manager"]
    i = m.inputs
    assert re.fullmatch(r"mgr[0-9a-f]{8}", i["agentPoolName"])
    assert (i["mode"], i["vmSize"], i["minCount"], i["maxCount"], i["count"]) == ("User", "Standard_D8s_v5", 2, 4, 2)
    assert i["availabilityZones"] == ["1", "2", "3"]
    assert i["nodeLabels"] == {"torchfleet.io/pool": "manager"}
    assert i["nodeTaints"] == ["torchfleet.io/pool=manager:NoSchedule"]  # issue 30: platform pods only
    assert i["enableNodePublicIP"] is False and "scaleSetPriority" not in i
    # Create the new pool, then delete the old (the names differ, so no delete-before-replace).
    assert m.options["deleteBeforeReplace"] is False and m.options["ignoreChanges"] == []


def test_the_cpu_pool_is_a_tainted_user_pool_from_zero_after_the_manager_pool(example):
    """torchfleet:cpuPool (issue 30): the shipped azure-eus stack's {machineType: Standard_D4s_v5, maxNodes: 2}."""
    (c,) = [p for p in example.of_type(POOL) if p.name == "torchfleet-azure-pools-cpu"]
    i = c.inputs
    assert re.fullmatch(r"cpu[0-9a-f]{8}", i["agentPoolName"])
    assert (i["mode"], i["vmSize"], i["minCount"], i["maxCount"]) == ("User", "Standard_D4s_v5", 0, 2)
    assert i["nodeLabels"] == {"torchfleet.io/pool": "cpu", "torchfleet.io/capacity": "on-demand"}
    assert i["nodeTaints"] == ["torchfleet.io/pool=cpu:NoSchedule"]
    assert "scaleSetPriority" not in i and i["enableNodePublicIP"] is False
    # AKS runs one agent pool operation at a time: the CPU pool after the manager pool
    assert "torchfleet-azure-pools-manager" in {_urn_name(u) for u in c.options["dependencies"]}


def test_a_spot_cpu_pool_declares_aks_spot_taint_and_gets_another_name():
    spec = parse({**THREE_ZONES, "torchfleet:cpuPool": {"maxNodes": 2}}, stack="azure-three")
    spot = parse({**THREE_ZONES, "torchfleet:cpuPool": {"maxNodes": 2, "spot": True}}, stack="azure-three")
    on_demand, args = cpu_pool.cpu_pool_args(spec, spec.cpu_pool), cpu_pool.cpu_pool_args(spot, spot.cpu_pool)
    assert args["node_taints"] == ["torchfleet.io/pool=cpu:NoSchedule",
                                   "kubernetes.azure.com/scalesetpriority=spot:NoSchedule"]
    assert (args["scale_set_priority"], args["scale_set_eviction_policy"], args["spot_max_price"]) == (
        "Spot", "Delete", -1)
    assert args["agent_pool_name"] != on_demand["agent_pool_name"]  # priority is immutable: a new pool


# Label prefixes AKS reserves: "The following prefixes are reserved for AKS use and can't be used for
# any node: kubernetes.azure.com/, kubernetes.io/" (Azure Architecture Center, AKS for Amazon EKS
# professionals, node pools, "Reserved system labels":
# https://learn.microsoft.com/azure/architecture/aws-professional/eks-to-aks/node-pools).
AKS_RESERVED_LABEL_PREFIXES = ("kubernetes.azure.com/", "kubernetes.io/")


@pytest.mark.parametrize("fixture", ["example", "three"])
def test_no_pool_declares_a_label_aks_reserves(request, fixture):
    """Azure review 15 proposed declaring the spot label kubernetes.azure.com/scalesetpriority on spot
    pools against drift; AKS refuses any label under its prefixes, so that would fail the pool's
    create, and there is no drift to avoid (azure-native's refresh moves into the inputs only what
    changed between the old and new outputs: provider.go Read, steps 2-5). The class: no pool, inline
    or separate, declares a label AKS reserves."""
    result = request.getfixturevalue(fixture)
    pools = [*result.one(CLUSTER).inputs["agentPoolProfiles"], *(p.inputs for p in result.of_type(POOL))]
    assert len(pools) > 1
    for pool in pools:
        reserved = [k for k in pool.get("nodeLabels") or {} if k.startswith(AKS_RESERVED_LABEL_PREFIXES)]
        assert reserved == [], pool.get("name") or pool.get("agentPoolName")


@pytest.mark.parametrize("fixture", ["example", "three"])
def test_every_pool_encrypts_at_host(request, fixture):
    """Temp disks and caches encrypted on the host, on the system pool and every GPU (spot) pool."""
    result = request.getfixturevalue(fixture)
    (manager,) = result.one(CLUSTER).inputs["agentPoolProfiles"]
    pools = result.of_type(POOL)
    assert pools and any(p.inputs.get("scaleSetPriority") == "Spot" for p in pools)
    assert manager["enableEncryptionAtHost"] is True
    assert {p.name: p.inputs["enableEncryptionAtHost"] for p in pools} == {p.name: True for p in pools}


def test_a_pool_with_encryption_at_host_off_is_created_without_it():
    """Azure review 14: gpuPools[].encryptionAtHost / managerPool.encryptionAtHost false reach the
    AgentPool and the system pool; the others keep it."""
    from components.clouds.azure.pools import pool_args
    from components.spec import parse

    raw = {**THREE_ZONES, "torchfleet:managerPool": {"maxNodes": 3, "encryptionAtHost": False}}
    raw["torchfleet:gpuPools"] = [{"gpu": "t4", "maxNodes": 2, "encryptionAtHost": False},
                                  {"gpu": "a100-80gb", "maxNodes": 1, "zones": ["1"]}]
    spec = parse(raw, "eah")
    assert manager_pool.manager_pool_args(spec)["enable_encryption_at_host"] is False
    assert aks_cluster.system_profile(spec, "subnet")["enable_encryption_at_host"] is False
    assert {p.name: pool_args(p, 0, spec)["enable_encryption_at_host"] for p in spec.gpu_pools} == {
        "gpu-t4-1": False, "gpu-t4-2": False, "gpu-t4-3": False, "gpu-a100-80gb-1": True}


def test_builtin_autoscaler_profile(three):
    result = three
    profile = result.one(CLUSTER).inputs["autoScalerProfile"]
    assert profile["expander"] == "priority"
    # Pulumi's names; the provider sends ARM's kebab-case ("balance-similar-node-groups").
    # Off: a job keeps its pods in one zone; a scale-up split over zones wastes nodes (Azure review 9).
    assert profile["balanceSimilarNodeGroups"] == "false"
    assert profile["scaleDownUnneededTime"] == "3m"
    assert profile["scaleDownDelayAfterAdd"] == "7m"


def test_api_server_allow_list_from_config(three):
    result = three
    assert result.one(CLUSTER).inputs["apiServerAccessProfile"]["authorizedIPRanges"] == ["203.0.113.0/24"]


def test_cluster_options_reach_the_engine(example):
    opts = example.one(CLUSTER).options
    assert opts["ignoreChanges"] == ["agentPoolProfiles[0].count", "agentPoolProfiles[0].availabilityZones",
                                     "agentPoolProfiles[0].enableEncryptionAtHost"]
    assert opts["customTimeouts"]["create"] == "60m"


def test_admins_get_aks_rbac_cluster_admin_before_the_provider(example):
    """Issue 29: torchfleet:admins is the one source; nothing follows the caller (mocks' OBJECT_ID)."""
    admin = aks_cluster.AKS_RBAC_CLUSTER_ADMIN
    roles = [r for r in example.of_type(ROLE) if r.inputs["roleDefinitionId"].endswith(admin)]
    assert [r.name for r in roles] == ["torchfleet-azure-cluster-admin-00000000-0000-0000-0000-000000000000"]
    assert all(r.inputs["principalId"] != mock_azure.OBJECT_ID for r in roles)
    role = roles[0]
    assert role.inputs["scope"] == "torchfleet-azure-cluster-aks-id" and role.inputs["principalType"] == "User"
    # The provider waits for the grant to take effect, not only to exist (Azure review 2).
    provider = example.one(K8S_PROVIDER)
    wait = example.one("pulumi-python:dynamic:Resource", "torchfleet-azure-cluster-rbac-propagation")
    assert wait.key in example.depends_on(provider) and role.key in example.depends_on(wait)
    assert wait.inputs["seconds"] >= 300


@pytest.mark.parametrize("fixture", ["example", "three"])
def test_no_two_role_assignments_share_principal_role_and_scope(request, fixture):
    """Issue 29: the deployer's implicit grant and its admins entry were two assignments of one role to one
    principal at one scope, which ARM refuses (409 RoleAssignmentExists). `three` lists the deployer."""
    result = request.getfixturevalue(fixture)
    triples = [(r.inputs["principalId"], r.inputs["roleDefinitionId"], r.inputs["scope"]) for r in result.of_type(ROLE)]
    assert len(triples) == len(set(triples)), triples
    assert not [r for r in result.of_type(ROLE) if "deployer" in r.name]


def test_kubeconfig_is_a_secret_with_kubelogin_azurecli(example):
    provider = example.one(K8S_PROVIDER)
    assert provider.printable["kubeconfig"] == "[secret]"
    config = yaml.safe_load(provider.inputs["kubeconfig"])
    exec_ = config["users"][0]["user"]["exec"]
    assert exec_["args"][:3] == ["get-token", "--login", "azurecli"]
    # listManagedClusterUserCredentials was asked about this very cluster.
    assert config["clusters"][0]["name"] == "torchfleet-azure-cluster-aks"
    assert example.outputs["kubeconfig"] == "[secret]"


def test_a_service_principal_deploy_logs_the_kubeconfig_in_as_that_principal(three):
    """Regression (issue 20, Azure review 11): the kubeconfig logged in through `az` whatever identity
    the azure-native provider used; with torchfleet:kubeLogin spn both read ARM_CLIENT_ID/SECRET/TENANT_ID."""
    config = yaml.safe_load(three.one(K8S_PROVIDER).inputs["kubeconfig"])
    exec_ = config["users"][0]["user"]["exec"]
    assert exec_["args"][:3] == ["get-token", "--login", "spn"] and "--use-azurerm-env-vars" in exec_["args"]
    role = three.one(ROLE, f"torchfleet-azure-cluster-admin-{mock_azure.OBJECT_ID}")
    assert role.inputs["principalType"] == "ServicePrincipal"


# ------------------------------------------------------------------ GPU pools


def test_one_agent_pool_per_gpu_zone_and_machine(three):
    result = three
    pools = {p.inputs["agentPoolName"]: p for p in _gpu_pools(result)}
    assert sorted(pools) == sorted(
        # The second T4 type's pools are named by its VM size (naming.agent_pool_name), not its index.
        ["t4z1", "t4z17634", "t4z2", "t4z28fae", "t4z3", "t4z36693", "a10080gbz1", "a10080gbz2", "a10080gbz3"]
    )
    for name, p in pools.items():
        i = p.inputs
        zone = re.search(r"z(\d)", name).group(1)
        assert i["availabilityZones"] == [zone]
        assert i["mode"] == "User"
        assert i["resourceName"] == "torchfleet-azure-cluster-aks"
        assert i["resourceGroupName"] == "torchfleet-azure-net-rg"
        assert i["vnetSubnetID"] == "torchfleet-azure-net-nodes-id"
        assert i["enableAutoScaling"] is True and i["enableNodePublicIP"] is False
        assert i["gpuProfile"] == {"driver": "Install"}
        assert i["nodeLabels"]["torchfleet.io/pool"] == "gpu"
        assert i["nodeLabels"]["nvidia.com/gpu.present"] == "true"
        assert "nvidia.com/gpu=present:NoSchedule" in i["nodeTaints"]
        assert i["orchestratorVersion"] == "1.35"
    assert pools["t4z28fae"].inputs["vmSize"] == "Standard_NC8as_T4_v3"
    assert pools["t4z2"].inputs["tags"]["torchfleet-pool-name"] == "gpu-t4-2"
    assert pools["t4z28fae"].inputs["tags"] == {"torchfleet-stack": "azure-three", "torchfleet-pool-name": "gpu-t4-2"}


def test_pools_of_one_gpu_have_identical_labels_across_zones(three):
    # Regression guard: a per-zone label would stop balance-similar-node-groups from treating the
    # zonal pools of one GPU as similar. The zone itself is topology.kubernetes.io/zone (AKS's).
    by_gpu: dict = {}
    for p in _gpu_pools(three):
        by_gpu.setdefault(p.inputs["nodeLabels"]["torchfleet.io/gpu"], []).append(p.inputs["nodeLabels"])
    assert set(by_gpu) == {"t4", "a100-80gb"}
    for labels in by_gpu.values():
        assert all(lab == labels[0] for lab in labels)
    assert by_gpu["t4"][0] == {"torchfleet.io/pool": "gpu", "torchfleet.io/gpu": "t4",
                               "torchfleet.io/capacity": "spot", "nvidia.com/gpu.present": "true"}


def test_spot_pools_scale_from_zero_with_aks_spot_settings(three):
    result = three
    for p in result.of_type(POOL):
        i = p.inputs
        if not i["agentPoolName"].startswith("t4"):
            continue
        assert (i["scaleSetPriority"], i["scaleSetEvictionPolicy"], i["spotMaxPrice"]) == ("Spot", "Delete", -1)
        assert (i["minCount"], i["maxCount"], i["count"]) == (0, 6, 0)
        assert i["nodeTaints"] == [
            "nvidia.com/gpu=present:NoSchedule", "kubernetes.azure.com/scalesetpriority=spot:NoSchedule"]
        assert i["nodeLabels"]["torchfleet.io/capacity"] == "spot"
        assert i["nodeLabels"]["torchfleet.io/gpu"] == "t4"


def test_on_demand_pools_have_no_spot_settings(three):
    result = three
    a100 = [p.inputs for p in result.of_type(POOL) if p.inputs["agentPoolName"].startswith("a100")]
    assert len(a100) == 3
    for i in a100:
        assert not {"scaleSetPriority", "scaleSetEvictionPolicy", "spotMaxPrice"} & set(i)
        assert i["nodeTaints"] == ["nvidia.com/gpu=present:NoSchedule"]
        assert i["nodeLabels"]["torchfleet.io/capacity"] == "on-demand"
        assert (i["minCount"], i["maxCount"], i["vmSize"]) == (1, 2, "Standard_NC24ads_A100_v4")


def test_pool_options_reach_the_engine(three):
    pools = _gpu_pools(three)
    previous = "torchfleet-azure-pools-manager"  # AKS runs one pool operation at a time: the manager's first
    for p in pools:
        # Issue 29: the count is the live one within the bounds (live_count.py), not the stored one.
        assert p.options["ignoreChanges"] == []
        assert p.options["deleteBeforeReplace"] is True
        # issue 20 review R6, issue 29: set when the pool's VMs are made, refused in place by AKS
        assert p.options["replaceOnChanges"] == ["enableEncryptionAtHost", "osDiskSizeGB", "availabilityZones"]
        deps = {_urn_name(u) for u in p.options["dependencies"]}
        assert "torchfleet-azure-cluster-aks" in deps
        # Pools are created one after another (AKS allows one pool operation at a time).
        assert previous in deps, (p.name, deps)
        previous = p.name


def test_priority_expander_configmap_prefers_spot(three):
    result = three
    recorded = result.one(CONFIGMAP, "torchfleet-azure-gpu-priority-expander")
    cm = recorded.inputs
    assert cm["metadata"] == {"name": "cluster-autoscaler-priority-expander", "namespace": "kube-system"}
    priorities = yaml.safe_load(cm["data"]["priorities"])
    spot = priorities[50]
    assert len(spot) == 6 and all(r.startswith(".*aks-t4z") for r in spot)
    assert priorities[10] == [".*aks-a10080gbz1-.*", ".*aks-a10080gbz2-.*", ".*aks-a10080gbz3-.*"]
    assert "::torchfleet-azure-cluster-k8s::" in recorded.options["provider"]


def test_the_builtin_autoscaler_not_a_chart(example):
    # AKS runs the cluster autoscaler itself; the only chart on Azure is the device plugin.
    assert [r.inputs["chart"] for r in example.of_type(RELEASE)] == ["nvidia-device-plugin"]


def test_device_plugin_chart_pinned_and_tolerating_our_taints(example):
    release = example.one(RELEASE).inputs
    assert release["chart"] == "nvidia-device-plugin"
    assert release["version"] == device_plugin.CHART_VERSION == "0.20.0"
    assert release["repositoryOpts"] == {"repo": "https://nvidia.github.io/k8s-device-plugin"}
    tolerations = release["values"]["tolerations"]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in tolerations
    assert {"key": "kubernetes.azure.com/scalesetpriority", "operator": "Equal", "value": "spot",
            "effect": "NoSchedule"} in tolerations
    assert release["values"]["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    # Installed through the AKS cluster's provider, not the ambient kubeconfig.
    assert "::torchfleet-azure-cluster-k8s::" in example.one(RELEASE).options["provider"]
    assert release["namespace"] == device_plugin.NAMESPACE


# ------------------------------------------------------------------ Azure Files


def test_store_is_premium_nfs_behind_a_private_endpoint(example):
    account = example.one(ACCOUNT).inputs
    assert (account["kind"], account["sku"]) == ("FileStorage", {"name": "Premium_LRS"})
    # Azure review 8: secure transfer makes every NFS mount TLS (encryption in transit); no keys.
    assert account["enableHttpsTrafficOnly"] is True
    assert account["allowSharedKeyAccess"] is False
    assert account["publicNetworkAccess"] == "Disabled"
    assert account["networkRuleSet"]["defaultAction"] == "Deny"
    assert account["encryption"]["requireInfrastructureEncryption"] is True
    assert account["allowBlobPublicAccess"] is False
    assert re.fullmatch(r"[a-z0-9]{3,24}", account["accountName"])
    assert account["accountName"] == naming.storage_account_name(
        mock_azure.SUBSCRIPTION_ID, "azure-eus", "torchfleet-azure-files")
    share = example.one(SHARE).inputs
    assert (share["enabledProtocols"], share["shareQuota"], share["rootSquash"]) == ("NFS", 1024, "NoRootSquash")
    assert share["accountName"] == account["accountName"]
    endpoint = example.one(ENDPOINT).inputs
    assert endpoint["subnet"] == {"id": "torchfleet-azure-net-endpoints-id"}
    (conn,) = endpoint["privateLinkServiceConnections"]
    assert conn["groupIds"] == ["file"] and conn["privateLinkServiceId"] == "torchfleet-azure-files-account-id"
    assert example.one(ZONE).inputs["privateZoneName"] == "privatelink.file.core.windows.net"
    assert example.one(ZONE_LINK).inputs["virtualNetwork"] == {"id": "torchfleet-azure-net-vnet-id"}
    group = example.one(ZONE_GROUP).inputs
    assert group["privateDnsZoneConfigs"] == [{"name": "file", "privateDnsZoneId": "torchfleet-azure-files-dns-id"}]


def test_the_endpoint_subnet_takes_nfs_from_the_node_subnet_only(three):
    """Azure review 8: no NSG let every address of the network (a later peering or subnet) reach the
    share on 2049; an NSG binds a private endpoint only with the subnet's network policies on."""
    from components.clouds.azure.network import endpoint_security_rules

    subnets = {s.name: s.inputs for s in three.of_type(SUBNET)}
    endpoints = subnets["torchfleet-azure-net-endpoints"]
    nsg = three.one("azure-native:network:NetworkSecurityGroup")
    assert endpoints["networkSecurityGroup"] == {"id": f"{nsg.name}-id"}
    assert endpoints["privateEndpointNetworkPolicies"] == "NetworkSecurityGroupEnabled"
    assert "networkSecurityGroup" not in subnets["torchfleet-azure-net-nodes"]
    allow, deny = nsg.inputs["securityRules"]
    assert (allow["access"], allow["protocol"], allow["destinationPortRange"]) == ("Allow", "Tcp", "2049")
    assert (allow["sourceAddressPrefix"], allow["destinationAddressPrefix"]) == ("10.20.0.0/17", "10.20.128.0/24")
    # Before the defaults' AllowVnetInBound (65000), so nothing else of the network gets through.
    assert (deny["access"], deny["sourceAddressPrefix"], deny["destinationPortRange"]) == ("Deny", "*", "*")
    assert allow["priority"] < deny["priority"] < 65000
    assert len(endpoint_security_rules("10.0.0.0/17", "10.0.128.0/24")) == 2


def test_both_store_volumes_ask_for_nfs_encryption_in_transit(example):
    """Azure review 8: with secure transfer required a plain NFS mount is refused, and aznfs will not
    mix TLS and plain mounts to one server on a node: the training PV and the owner PV both set it."""
    pvs = [o for o in example.kubernetes_objects() if o["kind"] == "PersistentVolume"]
    stores = [pv for pv in pvs if pv["spec"]["csi"]["driver"] == "file.csi.azure.com"]
    assert len(stores) == 2, [pv["metadata"]["name"] for pv in pvs]
    for pv in stores:
        attrs = pv["spec"]["csi"]["volumeAttributes"]
        assert (attrs["protocol"], attrs["encryptInTransit"]) == ("nfs", "true"), pv["metadata"]["name"]


def test_store_size_and_tier_from_config(three):
    result = three
    assert result.one(ACCOUNT).inputs["sku"] == {"name": "Premium_ZRS"}
    assert result.one(SHARE).inputs["shareQuota"] == 512


@pytest.mark.parametrize("fixture,kept", [("example", True), ("three", False)])
def test_store_kept_only_when_asked_never_protected(request, fixture, kept):
    result = request.getfixturevalue(fixture)
    store = [result.one(ACCOUNT), result.one(SHARE), result.one(RG, "torchfleet-azure-files-rg")]
    assert [r.options["protect"] for r in store] == [False] * 3
    assert [r.options["retainOnDelete"] for r in store] == [kept] * 3
    # The endpoint sits in the cluster's network: kept, it would stop the network's deletion.
    assert result.one("azure-native:network:PrivateEndpoint").options["retainOnDelete"] is False
    # The cluster side is never protected: `pulumi destroy` removes it.
    assert result.one(RG, "torchfleet-azure-net-rg").options["protect"] is False
    assert result.one(CLUSTER).options["protect"] is False


# ------------------------------------------------------------------ outputs


def test_outputs_match_aws_and_name_the_store(example):
    out = example.outputs
    assert out["cloud"] == "azure" and out["region"] == "eastus"
    assert out["clusterName"] == "torchfleet-azure-cluster-aks"
    assert out["zones"] == ["1", "2", "3"]
    assert out["gpuPools"] == ["gpu-t4-1", "gpu-t4-2", "gpu-t4-3", "gpu-a100-80gb-1"]
    assert out["storageAccount"] == example.one(ACCOUNT).inputs["accountName"]
    assert out["shareName"] == "shared"
    assert out["topologyZones"] == ["eastus-1", "eastus-2", "eastus-3"]
    assert out["agentPools"]["gpu-a100-80gb-1"] == ["a10080gbz1"]
    assert out["oidcIssuerUrl"].startswith("https://eastus.oic.prod-aks.azure.com/")


def test_tags_are_valid_azure_tag_names(example):
    # Regression: ARM rejects tag names containing '/', which Kubernetes-style keys have.
    tagged = [r for r in example.resources if r.type.startswith("azure-native:") and "tags" in r.inputs]
    assert {r.type for r in tagged} >= {RG, VNET, CLUSTER, POOL, ACCOUNT, ENDPOINT, IDENTITY}
    for r in tagged:
        for key in r.inputs["tags"]:
            assert not set(key) & set("<>%&\\?/"), (r.key, key)
        assert r.inputs["tags"]["torchfleet-stack"] == "azure-eus"


def test_component_tree(example):
    keyed = _by_key(example)
    top = "torchfleet:clouds:AzureCluster::torchfleet-azure"
    assert keyed[top].parent == "torchfleet:platform:TrainingPlatform::torchfleet"
    for sub in ("AzureNetwork::torchfleet-azure-net", "AksCluster::torchfleet-azure-cluster",
                "AksGpuPools::torchfleet-azure-gpu", "AzureFilesStore::torchfleet-azure-files"):
        assert keyed[f"torchfleet:clouds:{sub}"].parent == top
    for r in example.resources:
        if r.type.startswith("azure-native:"):
            assert r.parent.startswith("torchfleet:clouds:"), r.key
            assert r.name.startswith("torchfleet-azure-"), r.key


def test_on_demand_gpu_pools_upgrade_without_a_surge_gpu(three):
    """Azure review 13: the default 10% surge added a GPU VM (an A100) on every upgrade."""
    on_demand = [p for p in _gpu_pools(three) if p.inputs.get("scaleSetPriority") != "Spot"]
    assert on_demand  # the A100 pools
    for pool in _gpu_pools(three):
        expected = {"maxSurge": "0", "maxUnavailable": "1"} if pool in on_demand else None
        assert pool.inputs.get("upgradeSettings") == expected, pool.name


def test_maintenance_windows_for_cluster_and_node_image_upgrades(example):
    """Azure review 5: NodeImage upgrades reimaged GPU and etcd nodes at any time."""
    configs = {m.inputs["configName"]: m.inputs["maintenanceWindow"]
               for m in example.of_type("azure-native:containerservice:MaintenanceConfiguration")}
    assert set(configs) == {"aksManagedAutoUpgradeSchedule", "aksManagedNodeOSUpgradeSchedule"}
    for window in configs.values():
        assert window["durationHours"] >= 4 and window["schedule"]["weekly"]["intervalWeeks"] == 1


def test_control_plane_audit_logs_go_to_a_workspace(example):
    """Issue 29: AKS keeps no resource logs until a diagnostic setting exists (aks-docs monitor-aks.md)."""
    from components.clouds.azure import audit

    workspace = example.one("azure-native:operationalinsights:Workspace")
    assert workspace.inputs["retentionInDays"] == audit.RETENTION_DAYS <= 31  # inside the free retention
    assert workspace.inputs["sku"] == {"name": "PerGB2018"}
    setting = example.one("azure-native:monitor:DiagnosticSetting")
    assert setting.inputs["resourceUri"] == "torchfleet-azure-cluster-aks-id"
    assert setting.inputs["workspaceId"] == f"{workspace.name}-id"
    assert {log["category"] for log in setting.inputs["logs"] if log["enabled"]} == {"kube-audit-admin", "guard"}
    assert setting.inputs["logAnalyticsDestinationType"] == "Dedicated"
    assert setting.options["deleteBeforeReplace"] is True  # its name is fixed per cluster
