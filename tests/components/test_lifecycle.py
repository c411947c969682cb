"""Destroy, day 2 and the first run, on every stack, read from the recorded resource options (issue 20).

- destroy: nothing is protected (a protected resource fails the whole `pulumi destroy` in its
  preview: the cluster and GPUs would keep billing); every billable compute resource is deleted;
  exactly what components/clouds/lifecycle.py lists is kept.
- storage.adopt imports exactly what a destroy kept.
- day 2: no resource with a fixed cloud name (or identified by its inputs) would be created again
  while the old one exists (torchfleet/preview/plans.py), and every cloud type is classified.
- first run: what needs a grant, a role or nodes waits for it, through the recorded dependencies
  (a component's depends_on does not reach its children, so each child is checked).
"""

from __future__ import annotations

import pytest
import yaml

from components.clouds import lifecycle
from tests.harness import STACKS, STACKS_DIR, synth_config, synth_stack
from torchfleet.preview import mock_aws, mock_azure, plans

# The resources that bill by the hour whatever runs on them: destroy must delete every one.
BILLABLE = {
    "aws": ["aws:eks/cluster:Cluster", "aws:eks/nodeGroup:NodeGroup", "aws:ec2/natGateway:NatGateway",
            "aws:ec2/eip:Eip"],
    "gcp": ["gcp:container/cluster:Cluster", "gcp:container/nodePool:NodePool", "gcp:compute/routerNat:RouterNat"],
    "azure": ["azure-native:containerservice:ManagedCluster", "azure-native:containerservice:AgentPool",
              "azure-native:network:PrivateEndpoint"],
    "local": [],
}
ADMINS = {
    "aws": ["arn:aws:iam::123456789012:role/platform"],
    "gcp": ["user:alice@example.com"],
    # The deployer lists itself on Azure (issue 29: no implicit grant follows the caller).
    "azure": ["Group:11111111-2222-3333-4444-555555555555", f"ServicePrincipal:{mock_azure.OBJECT_ID}"],
}


def _config(stack: str) -> dict:
    return yaml.safe_load((STACKS_DIR / f"Pulumi.{stack}.yaml").read_text())["config"]


def _variant(stack: str, **changes) -> dict:
    config = _config(stack)
    for key, value in changes.items():
        config[key] = value
    return config


CLOUD_STACK = {"aws": "aws-usw2", "gcp": "gcp-usc1", "azure": "azure-eus"}


@pytest.fixture(scope="module")
def results():
    """Every shipped stack, each cloud's stack without kept data, and each adopting with admins."""
    out = {s: synth_stack(s) for s in STACKS}
    for cloud, stack in CLOUD_STACK.items():
        storage = _config(stack)["torchfleet:storage"]
        out[f"{cloud}-nokeep"] = synth_config(f"{stack}-nokeep", _variant(
            stack, **{"torchfleet:storage": {**storage, "protect": False}}))
        extra = {"torchfleet:deployerPrincipalType": "ServicePrincipal"} if cloud == "azure" else {}
        out[f"{cloud}-adopt"] = synth_config(stack, _variant(
            stack, **{"torchfleet:storage": {**storage, "adopt": True}, "torchfleet:admins": ADMINS[cloud]},
            **extra))
    return out


NAMES = [*STACKS, *(f"{c}-{v}" for c in CLOUD_STACK for v in ("nokeep", "adopt"))]


@pytest.mark.parametrize("name", NAMES)
def test_destroy_deletes_every_billable_resource_and_keeps_only_the_listed(results, name):
    result = results[name]
    spec = result.spec
    plan = plans.destroy_plan(result.resources)
    assert plan.blocked == [], "protect makes `pulumi destroy` fail and delete nothing"
    kept = {key.split("::")[0] for key in plan.kept}
    assert kept == lifecycle.kept_types(spec.cloud, spec.storage.protect)
    deleted = {key.split("::")[0] for key in plan.deleted}
    for type_ in BILLABLE[spec.cloud]:
        assert type_ in deleted, type_


@pytest.mark.parametrize("name", NAMES)
def test_no_replacement_collides_and_every_type_is_classified(results, name):
    """Regression (issue 20): node groups, the log group, ASG tags, role assignments... were
    created again under a name the old one still held (Pulumi replaces by creating first)."""
    result = results[name]
    assert plans.unclassified(result.resources) == []
    assert plans.replace_collisions(result.resources) == []


def test_the_collision_check_finds_a_fixed_name_without_delete_before_replace(results):
    """The check above can fail: a node group with a fixed name, as before issue 20, is reported."""
    group = next(r for r in results["aws-usw2"].resources if r.type == "aws:eks/nodeGroup:NodeGroup")
    fixed = type(group)(**{**group.__dict__, "inputs": {**group.inputs, "nodeGroupName": "manager"}})
    assert plans.replace_collisions([fixed]) == [f"{group.key} (manager)"]


@pytest.mark.parametrize("cloud", CLOUD_STACK)
def test_adopt_imports_exactly_what_destroy_kept(results, cloud):
    result = results[f"{cloud}-adopt"]
    imported = {r.key: r.options["import"] for r in result.resources if r.options.get("import")}
    assert set(imported) == set(plans.destroy_plan(result.resources).kept)
    ids = sorted(imported.values())
    if cloud == "aws":
        # fs: found by creation token; its backup and file system policies (kept with it since issue 29)
        # import by the same id
        assert ids == ["/aws/eks/torchfleet-aws-usw2/cluster", "fs-0adopted", "fs-0adopted", "fs-0adopted"]
    elif cloud == "gcp":
        assert ids == ["projects/my-ml-project/global/networks/torchfleet-gcp-usc1-vpc",
                       "projects/my-ml-project/locations/us-central1-a/instances/torchfleet-gcp-usc1-store"]
    else:
        rg = f"/subscriptions/{mock_azure.SUBSCRIPTION_ID}/resourceGroups/torchfleet-azure-eus-store"
        assert ids[0] == rg and ids[1].startswith(f"{rg}/providers/Microsoft.Storage/storageAccounts/tfazureeus")
        assert ids[2] == ids[1] + "/fileServices/default/shares/shared"


@pytest.mark.parametrize("cloud", CLOUD_STACK)
def test_shipped_stacks_do_not_adopt(results, cloud):
    result = results[CLOUD_STACK[cloud]]
    assert [r.key for r in result.resources if r.options.get("import")] == []


# ---------------------------------------------------------------- first run: what waits for what


def _keys(result, type_: str) -> set[str]:
    return {r.key for r in result.of_type(type_)}


def test_aws_addons_and_releases_wait_for_every_node_group(results):
    """Regression (issue 20, AWS review m1): the CSI add-ons and Helm releases raced the node
    groups; the component's depends_on did not reach them."""
    result = results["aws-usw2"]
    groups = _keys(result, "aws:eks/nodeGroup:NodeGroup")
    waiting = [a for a in result.of_type("aws:eks/addon:Addon") if a.inputs["addonName"].endswith("csi-driver")]
    waiting += result.of_type("kubernetes:helm.sh/v3:Release")
    assert len(waiting) == 4
    for r in waiting:
        assert groups <= result.depends_on(r), r.name


def test_aws_node_groups_wait_for_the_nat_routes(results):
    result = results["aws-usw2"]
    egress = _keys(result, "aws:ec2/natGateway:NatGateway") | {
        k for k in _keys(result, "aws:ec2/routeTableAssociation:RouteTableAssociation") if "-private-" in k
    }
    for group in result.of_type("aws:eks/nodeGroup:NodeGroup"):
        assert egress <= result.depends_on(group), group.name


def test_aws_provider_waits_for_the_admins_access(results):
    result = results["aws-adopt"]
    provider = result.one("pulumi:providers:kubernetes")
    assert _keys(result, "aws:eks/accessPolicyAssociation:AccessPolicyAssociation") <= result.depends_on(provider)


def test_gcp_cluster_waits_for_the_key_grant_to_take_effect(results):
    result = results["gcp-usc1"]
    cluster = result.one("gcp:container/cluster:Cluster")
    wait = result.one("pulumi-python:dynamic:Resource")
    grant = result.one("gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember")
    assert wait.key in result.depends_on(cluster) and grant.key in result.depends_on(wait)
    assert _keys(result, "gcp:projects/iAMMember:IAMMember") <= result.depends_on(cluster)


def test_azure_kubernetes_resources_wait_for_rbac_to_take_effect(results):
    """Regression (issue 20, Azure review 2): the priority ConfigMap and the device plugin release went
    out seconds after the cluster-admin grant, which takes up to five minutes to apply."""
    result = results["azure-adopt"]
    wait = result.one("pulumi-python:dynamic:Resource", "torchfleet-azure-cluster-rbac-propagation")
    roles = {r.key for r in result.of_type("azure-native:authorization:RoleAssignment") if "admin" in r.name}
    assert len(roles) == 2 and roles <= result.depends_on(wait)  # the two admins', the deployer among them
    expander = result.one("kubernetes:core/v1:ConfigMap", "torchfleet-azure-gpu-priority-expander")
    for r in [expander, *result.of_type("kubernetes:helm.sh/v3:Release")]:
        assert wait.key in result.depends_on(r), r.name


def test_azure_role_assignments_carry_their_principal_type(results):
    """Regression (issue 20, Azure review 1): the SDK's default principalType User failed for CI."""
    result = results["azure-adopt"]
    types = {r.inputs["principalId"]: r.inputs["principalType"]
             for r in result.of_type("azure-native:authorization:RoleAssignment")}
    assert types[mock_azure.OBJECT_ID] == "ServicePrincipal"
    assert types["11111111-2222-3333-4444-555555555555"] == "Group"


def test_mock_answers_stand_for_real_lookups():
    # The adoption test above reads these: a drift here would hide a broken import id.
    assert mock_aws.CALLS["aws:efs/getFileSystem:getFileSystem"](type("A", (), {"args": {}})())["id"] == "fs-0adopted"


@pytest.mark.parametrize("cloud", sorted(CLOUD_STACK))
def test_the_kubernetes_provider_is_replaced_only_with_its_cluster(results, cloud):
    """Review of issue 20 (R2): turning GKE's network.dnsEndpoint on or off moves the kubeconfig's
    server; pulumi-kubernetes replaced its provider on that, and every Kubernetes resource with it.
    The cluster's own id is the provider's clusterIdentifier, so only a new cluster replaces them."""
    result = results[CLOUD_STACK[cloud]]
    provider = result.one("pulumi:providers:kubernetes")
    cluster_type = {"aws": "aws:eks/cluster:Cluster", "gcp": "gcp:container/cluster:Cluster",
                    "azure": "azure-native:containerservice:ManagedCluster"}[cloud]
    cluster = result.one(cluster_type)
    identifier = provider.inputs.get("clusterIdentifier")
    # the mocks answer a resource's id as "<name>-id" and an EKS cluster's ARN as ".../cluster/<name>"
    expected = f"cluster/{cluster.inputs['name']}" if cloud == "aws" else f"{cluster.name}-id"
    assert identifier and identifier.endswith(expected), identifier
