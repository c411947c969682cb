"""Azure's pure parts: pool and account names, address ranges, the kubeconfig rewrite, the
priority expander config and the resource-option helpers (options are invisible to mocks)."""

import base64
import ipaddress
import re

import pytest
import yaml

from components import catalog
from components.clouds.azure import cluster, files, naming, network, pools
from components.spec import GpuPoolSpec, parse
from components.spec.access import KUBE_LOGIN_MODES
from torchfleet.preview import mock_azure


def _pool(gpu: str, zone: str, spot: bool = True, machines: int = 1) -> GpuPoolSpec:
    offer = catalog.offering(gpu, "azure")
    return GpuPoolSpec(gpu, zone, offer.machines[:machines], 0, 4, spot)


AZURE_GPUS = catalog.offered_on("azure")


@pytest.mark.parametrize("gpu", AZURE_GPUS)
def test_every_azure_gpu_gets_valid_distinct_pool_names(gpu):
    offer = catalog.offering(gpu, "azure")
    names = set()
    for zone in ("1", "2", "3"):
        pool = _pool(gpu, zone, machines=len(offer.machines))
        for i in range(len(offer.machines)):
            name = naming.agent_pool_name(pool, i)
            # AKS: lowercase alphanumeric, starts with a letter, <= 12 characters for Linux pools.
            assert re.fullmatch(r"[a-z][a-z0-9]{0,11}", name), name
            names.add(name)
    assert len(names) == 3 * len(offer.machines)


@pytest.mark.parametrize(
    "gpu,zone,index,expected",
    [("t4", "1", 0, "t4z1"), ("t4", "3", 1, "t4z36693"), ("a100-80gb", "2", 0, "a10080gbz2"),
     ("a100-40gb", "1", 0, "a10040gbz1"), ("h100", "3", 2, "h100z3dbc6")],
)
def test_pool_name_mapping_is_documented_and_stable(gpu, zone, index, expected):
    assert naming.agent_pool_name(_pool(gpu, zone, machines=index + 1), index) == expected
    # The mapping is documented where the names are made.
    assert "gpu-t4-1        -> agent pool t4z1" in naming.__doc__


def test_a_pool_name_follows_its_vm_size_not_its_place_in_machine_types():
    """Review (day 2): the second type was `t4z1m1`, so reordering machineTypes or dropping the first one renamed
    pools, and a pool whose name stays but whose vmSize changes is replaced delete-first (its spot nodes die)."""
    offer = catalog.offering("t4", "azure")
    forward = GpuPoolSpec("t4", "1", offer.machines[:2], 0, 4, True)
    backward = GpuPoolSpec("t4", "1", tuple(reversed(offer.machines[:2])), 0, 4, True)
    names = lambda pool: {pool.machines[i].type: naming.agent_pool_name(pool, i) for i in range(2)}  # noqa: E731
    assert names(forward) == names(backward)
    only_second = GpuPoolSpec("t4", "1", offer.machines[1:2], 0, 4, True)
    assert naming.agent_pool_name(only_second, 0) == names(forward)[offer.machines[1].type]


def test_the_manager_pool_name_is_valid_too():
    assert re.fullmatch(r"[a-z][a-z0-9]{0,11}", naming.MANAGER_AGENT_POOL)


@pytest.mark.parametrize("stack", ["azure-eus", "A_Very-Long.Stack.Name-with-many-parts-0123456789", "x"])
def test_storage_account_names_follow_azure_rules(stack):
    name = naming.storage_account_name("sub-1", stack, "torchfleet-azure-files")
    assert re.fullmatch(r"[a-z0-9]{3,24}", name), name
    assert name == naming.storage_account_name("sub-1", stack, "torchfleet-azure-files")  # deterministic
    assert name != naming.storage_account_name("sub-2", stack, "torchfleet-azure-files")  # salted


@pytest.mark.parametrize("stack", ["azure-eus", "Prod_West.2", "-weird-"])
def test_dns_prefix_rules(stack):
    prefix = naming.dns_prefix(stack)
    assert re.fullmatch(r"[a-z][a-z0-9-]{0,52}[a-z0-9]", prefix), prefix


@pytest.mark.parametrize("cidr", ["10.0.0.0/16", "10.0.0.0/20", "172.16.0.0/12", "192.168.0.0/16", "10.240.0.0/12"])
def test_address_ranges_never_overlap(cidr):
    vnet = ipaddress.ip_network(cidr)
    nodes = ipaddress.ip_network(naming.node_subnet_cidr(cidr))
    endpoints = ipaddress.ip_network(naming.endpoint_subnet_cidr(cidr))
    assert nodes.subnet_of(vnet) and endpoints.subnet_of(vnet)
    assert not nodes.overlaps(endpoints)
    assert nodes.prefixlen == vnet.prefixlen + 1
    ranges = naming.cluster_ranges(cidr)
    service, pods = ipaddress.ip_network(ranges["service_cidr"]), ipaddress.ip_network(ranges["pod_cidr"])
    for a, b in [(service, vnet), (pods, vnet), (service, pods)]:
        assert not a.overlaps(b), (a, b)
    assert ipaddress.ip_address(ranges["dns_service_ip"]) in service


def test_a_vnet_covering_every_candidate_range_is_a_clear_error():
    with pytest.raises(ValueError, match=r"network.cidr 0.0.0.0/0 leaves no room"):
        naming.cluster_ranges("0.0.0.0/0")


def test_default_network_avoids_aks_default_service_range():
    # Regression: AKS's default service CIDR 10.0.0.0/16 equals our default vnet; AKS rejects that.
    assert naming.cluster_ranges("10.0.0.0/16")["service_cidr"] != "10.0.0.0/16"


# torchfleet:kubeLogin -> the arguments after --server-id, and where kubelogin then finds the
# credential: the same variables Pulumi's azure-native provider reads (Azure/kubelogin
# pkg/internal/token/options.go; pulumi-azure-native docs, "Authenticate using a service principal").
KUBE_LOGIN_ARGS = {
    "azurecli": [],  # the `az` session
    "spn": ["--use-azurerm-env-vars"],  # ARM_CLIENT_ID, ARM_CLIENT_SECRET, ARM_TENANT_ID
    "workloadidentity": [],  # AZURE_CLIENT_ID, AZURE_TENANT_ID, AZURE_FEDERATED_TOKEN_FILE
}


def test_every_login_mode_the_spec_accepts_has_its_arguments():
    assert set(KUBE_LOGIN_ARGS) == set(KUBE_LOGIN_MODES)


@pytest.mark.parametrize("mode", KUBE_LOGIN_ARGS)
def test_kubeconfig_is_rewritten_to_a_non_interactive_login(mode):
    """Regression (issue 20, Azure review 11): the login was fixed to azurecli, so a `pulumi up` run as
    a service principal (ARM_* variables) whose `az` was logged in as someone else, or not at all,
    got 403 or "run az login" on every Kubernetes resource."""
    encoded = base64.b64encode(mock_azure.user_kubeconfig("aks1").encode()).decode()
    config = yaml.safe_load(cluster.kubelogin_kubeconfig(encoded, mode))
    exec_ = config["users"][0]["user"]["exec"]
    assert exec_["command"] == "kubelogin"
    server = ["--server-id", cluster.AKS_AAD_SERVER_ID]
    assert exec_["args"] == ["get-token", "--login", mode, *server, *KUBE_LOGIN_ARGS[mode]]
    # No credential of the Azure CLI's app (--client-id) and no secret ride along in the file.
    assert "--client-id" not in exec_["args"] and "--client-secret" not in exec_["args"] and "env" not in exec_
    assert "devicecode" not in yaml.safe_dump(config)
    assert config["clusters"][0]["cluster"]["server"].startswith("https://aks1-")


def _spec(**extra):
    raw = {
        "azure-native:location": "eastus",
        "torchfleet:cloud": "azure",
        "torchfleet:zones": ["1", "2"],
        "torchfleet:gpuPools": [
            {"gpu": "t4", "maxNodes": 4, "machineTypes": ["Standard_NC4as_T4_v3", "Standard_NC8as_T4_v3"]},
            {"gpu": "h100", "maxNodes": 1, "spot": False, "zones": ["2"]},
        ],
        "torchfleet:storage": {"sizeGb": 200},
        # Required on Azure (issue 29).
        "torchfleet:network": {"publicAccessCidrs": ["203.0.113.0/24"]},
        "torchfleet:admins": ["User:00000000-0000-0000-0000-0000000000b0"],
        **extra,
    }
    return parse(raw, stack="azure-test")


def test_priority_expander_prefers_spot_pools():
    priorities = yaml.safe_load(pools.expander_priorities(_spec()))
    assert list(priorities) == [50, 10, 1]
    assert priorities[50] == [".*aks-t4z1-.*", ".*aks-t4z17634-.*", ".*aks-t4z2-.*", ".*aks-t4z28fae-.*"]
    assert priorities[10] == [".*aks-h100z2-.*"]
    assert priorities[1] == [".*"]
    # The scale set names AKS gives: aks-<pool>-<digits>-vmss. t4z1's regex must not take t4z17634.
    assert re.fullmatch(priorities[50][0], "aks-t4z1-12345678-vmss")
    assert re.fullmatch(priorities[50][0], "/subscriptions/s/resourceGroups/mc/providers/"
                        "Microsoft.Compute/virtualMachineScaleSets/aks-t4z1-12345678-vmss")
    assert not re.fullmatch(priorities[50][0], "aks-t4z17634-12345678-vmss")
    assert not re.fullmatch(priorities[50][0], "aks-manager-12345678-vmss")


def test_spot_and_on_demand_pool_args():
    spec = _spec()
    spot, on_demand = spec.gpu_pools[0], spec.gpu_pools[-1]
    a = pools.pool_args(spot, 1, spec)
    assert (a["agent_pool_name"], a["vm_size"], a["availability_zones"]) == ("t4z17634", "Standard_NC8as_T4_v3", ["1"])
    assert (a["scale_set_priority"], a["scale_set_eviction_policy"], a["spot_max_price"]) == ("Spot", "Delete", -1)
    assert a["node_taints"] == [
        "nvidia.com/gpu=present:NoSchedule",
        "kubernetes.azure.com/scalesetpriority=spot:NoSchedule",
    ]
    b = pools.pool_args(on_demand, 0, spec)
    assert "scale_set_priority" not in b and "spot_max_price" not in b
    assert b["node_taints"] == ["nvidia.com/gpu=present:NoSchedule"]
    assert b["node_labels"]["torchfleet.io/capacity"] == "on-demand"


@pytest.mark.parametrize("keep", [True, False])
def test_store_options_keep_but_never_protect(keep):
    opts = files.store_options(keep, parent=None, import_id="x")
    assert (bool(opts.protect), opts.retain_on_delete, opts.import_) == (False, keep, "x")


def test_kept_store_names_are_fixed_per_stack_and_fit():
    from components import limits

    assert naming.store_resource_group("azure-eus") == "torchfleet-azure-eus-store"
    for stack in ("azure-eus", "a" * 100, "x." * 40):
        name = naming.store_resource_group(stack)
        assert limits.NAME_RULES["azure-resource-group"].problem(name) is None, name
    ids = files.import_ids("sub", "rg", "acct")
    assert ids["share"] == "/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Storage/storageAccounts/acct" \
        "/fileServices/default/shares/shared"


def test_pool_options_let_the_autoscaler_own_the_count_and_replace_safely():
    opts = pools.pool_options(parent=None, depends_on=[])
    assert opts.ignore_changes is None  # the live count is sent instead (live_count.py, issue 29)
    assert opts.delete_before_replace is True  # fixed agent pool names
    assert opts.custom_timeouts.create == "30m"


def test_cluster_and_vnet_options():
    opts = cluster.cluster_options(parent=None, depends_on=[])
    assert opts.ignore_changes == ["agentPoolProfiles[0].count", "agentPoolProfiles[0].availabilityZones",
                                   "agentPoolProfiles[0].enableEncryptionAtHost"]
    assert opts.custom_timeouts.create == "60m"
    assert network.vnet_options(parent=None).ignore_changes == ["subnets"]


_VNET = {"enable_vnet_integration": True, "subnet_id": "apiserver"}


@pytest.mark.parametrize(
    "network,expected",
    [
        # Public, no allow-list: sent as an empty list, which turns earlier ranges off (Azure review 10).
        ({"publicAccessCidrs": ["0.0.0.0/0"]}, {**_VNET, "enable_private_cluster": False, "authorized_ip_ranges": []}),
        ({"publicAccessCidrs": ["203.0.113.0/24", "198.51.100.7/32"]},
         {**_VNET, "enable_private_cluster": False, "authorized_ip_ranges": ["203.0.113.0/24", "198.51.100.7/32"]}),
        # no public endpoint at all, on purpose (issue 29: an empty list is refused on Azure)
        ({"privateOnly": True}, {**_VNET, "enable_private_cluster": True}),
    ],
)
def test_api_server_access_follows_public_access_cidrs(network, expected):
    spec = _spec(**{"torchfleet:network": network})
    assert cluster.api_server_access(spec, "apiserver") == expected
    args = cluster.cluster_args(spec, "subnet", "identity", "tenant", "apiserver")
    assert args["api_server_access_profile"] == expected


def test_storage_account_is_nfs_capable_and_private():
    a = files.account_args(_spec())
    assert (a["kind"], a["sku"], a["enable_https_traffic_only"]) == ("FileStorage", {"name": "Premium_LRS"}, True)
    assert a["allow_shared_key_access"] is False
    assert a["public_network_access"] == "Disabled"
    assert a["network_rule_set"]["default_action"] == "Deny"
    assert files.share_args(_spec())["share_quota"] == 200
