"""`torchfleet check` lists the quotas and APIs a stack needs before `pulumi up` is useful (issue 20):
with no GPU quota `pulumi up` succeeds (pools start at zero) and every job stays Pending."""

from __future__ import annotations

import pytest

from components.clouds import preflight
from tests.harness import STACKS_DIR
from tests.harness.placeholders import OWN, replaced_file
from torchfleet.cli import main
from torchfleet.preview.runner import stack_spec


def needs_of(stack: str) -> dict[str, int | None]:
    return {n.what: n.amount for n in preflight.needs(stack_spec(STACKS_DIR / f"Pulumi.{stack}.yaml"))}


def test_aws_spot_and_on_demand_gpu_vcpus_at_max_nodes():
    needs = needs_of("aws-usw2")
    # t4: 8 nodes in each of two zones of g4dn.xlarge (4 vCPUs), spot; a10g: 2 x g5.xlarge (4), on-demand.
    assert needs["EC2 quota L-3819A6DF All G and VT Spot Instance Requests (us-west-2)"] == 2 * 8 * 4
    assert needs["EC2 quota L-DB2E81BA Running On-Demand G and VT instances (us-west-2)"] == 2 * 4


def test_gcp_preemptible_gpus_per_type_the_global_cap_and_every_api():
    needs = needs_of("gcp-usc1")
    assert needs["Compute Engine quota PREEMPTIBLE_NVIDIA_T4_GPUS (us-central1)"] == 16
    assert needs["Compute Engine quota PREEMPTIBLE_NVIDIA_L4_GPUS (us-central1)"] == 4
    assert needs["Compute Engine quota GPUS_ALL_REGIONS (global)"] == 20
    # The project lookup and IAM bindings call Cloud Resource Manager (GCP review F4).
    assert "API cloudresourcemanager.googleapis.com" in needs


@pytest.mark.parametrize(("accelerator", "spot", "metric"), [
    ("nvidia-tesla-t4", True, "PREEMPTIBLE_NVIDIA_T4_GPUS"),
    ("nvidia-a100-80gb", False, "NVIDIA_A100_80GB_GPUS"),
    ("nvidia-h100-80gb", True, "PREEMPTIBLE_NVIDIA_H100_GPUS"),
])
def test_gcp_gpu_quota_metric_names(accelerator, spot, metric):
    assert preflight._gcp_metric(accelerator, spot) == metric


def test_azure_spot_vcpus_and_the_on_demand_family():
    needs = needs_of("azure-eus")
    assert needs["Total Regional Spot vCPUs (eastus)"] == 3 * 8 * 8  # three zones x 8 x NC8as_T4_v3
    assert needs["vCPU quota of the Standard_NC24ads_A100_v4 family (eastus; az vm list-usage)"] == 24
    assert "registered: feature Microsoft.Compute/EncryptionAtHost" in needs


def test_azure_check_prints_the_az_commands_that_answer_for_the_subscription():
    """Azure review 14: quotas, the resource providers, the EncryptionAtHost feature and, per size
    with encryption at host, the SKU capability (catalog/host_encryption.yaml says what it recorded)."""
    lines = [w.removeprefix("check: ") for w in needs_of("azure-eus") if w.startswith("check: ")]
    assert lines[0].startswith("az vm list-usage --location eastus --output table")
    assert "az provider show --namespace $ns --query registrationState" in lines[1]
    # The store's NFS encryption in transit needs this feature where it is in preview (Azure review 8).
    assert lines[2].startswith("az feature show --namespace Microsoft.Storage --name AllowEncryptionInTransitNFS4")
    assert lines[3].startswith("az feature show --namespace Microsoft.Compute --name EncryptionAtHost")
    skus = [line for line in lines if line.startswith("az vm list-skus")]
    assert [line.split("--size ")[1].split()[0] for line in skus] == [
        "Standard_D4s_v5", "Standard_NC24ads_A100_v4", "Standard_NC8as_T4_v3"]
    assert all("EncryptionAtHostSupported" in line and "recorded True" in line for line in skus)


def test_azure_check_asks_for_no_feature_where_no_pool_encrypts_at_host():
    from components.spec import parse

    raw = {"torchfleet:cloud": "azure", "azure-native:location": "eastus", "torchfleet:zones": ["1"],
           "torchfleet:managerPool": {"maxNodes": 3, "encryptionAtHost": False},
           "torchfleet:gpuPools": [{"gpu": "h100", "maxNodes": 1, "encryptionAtHost": False}],
           # Required on Azure (issue 29).
           "torchfleet:network": {"publicAccessCidrs": ["203.0.113.0/24"]},
           "torchfleet:admins": ["User:00000000-0000-0000-0000-0000000000b0"]}
    found = [n.what for n in preflight.needs(parse(raw, "noeah"))]
    assert not [w for w in found if "EncryptionAtHost" in w], found
    raw["torchfleet:gpuPools"] = [{"gpu": "h100", "maxNodes": 1, "machineTypes": ["Standard_ND96isr_H100_v5"]}]
    found = [n.what for n in preflight.needs(parse(raw, "eah"))]
    assert any("--size Standard_ND96isr_H100_v5" in w and "not recorded" in w for w in found), found


def test_check_prints_them_on_stderr_and_keeps_stdout_for_violations(capsys, tmp_path):
    code = main(["check", "--stack-file", str(replaced_file("gcp-usc1", tmp_path))])  # no placeholder left
    out, err = capsys.readouterr()
    assert (code, out) == (0, "")
    assert "gcp-usc1: what the cloud must grant first" in err
    assert "  Compute Engine quota PREEMPTIBLE_NVIDIA_T4_GPUS (us-central1): 16" in err


def test_local_needs_nothing():
    assert preflight.needs(stack_spec(STACKS_DIR / "Pulumi.local.yaml")) == []


def test_gcp_lists_service_usage_and_every_deployer_role_with_container_admin():
    """The GKE service agent is made by Service Usage's generateServiceIdentity (gcp/kms.py), and on the first
    `up` the deployer's Kubernetes rights come from IAM only (no RBAC binding names it yet): container.admin."""
    needs = needs_of("gcp-usc1")
    assert "API serviceusage.googleapis.com" in needs
    roles = [w.split(":")[0].removeprefix("deployer role ") for w in needs if w.startswith("deployer role ")]
    assert roles == [r for r, _ in preflight.GCP_DEPLOYER_ROLES]
    assert {"roles/container.admin", "roles/iam.serviceAccountUser", "roles/cloudkms.admin",
            "roles/serviceusage.serviceUsageAdmin", "roles/compute.securityAdmin"} <= set(roles)
    assert "roles/dns.admin" not in roles  # datasets only


def test_gcp_check_prints_the_regular_channel_versions_command_for_the_stacks_minor(capsys, tmp_path):
    code = main(["check", "--stack-file", str(replaced_file("gcp-usc1", tmp_path))])
    err = capsys.readouterr().err
    assert code == 0
    (line,) = [x for x in err.splitlines() if "get-server-config" in x]
    project = OWN["gcp-usc1"]["gcp:project"]
    assert line.startswith(f"  check: gcloud container get-server-config --region us-central1 --project {project} ")
    assert "--flatten=channels --filter=channels.channel=REGULAR" in line
    assert line.endswith("# kubernetesVersion 1.35 must be offered here (a 1.35.x)")
    assert any("deployer role roles/container.admin: " in x for x in err.splitlines())


def test_deploy_gcp_doc_lists_the_same_roles_and_apis_as_check():
    from tests.harness import REPO

    doc = (REPO / "docs" / "deploy-gcp.md").read_text()
    for role, _ in preflight.GCP_DEPLOYER_ROLES + preflight.GCP_DATASET_ROLES:
        assert f"`{role}`" in doc, role
    for api in preflight.APIS["gcp"]:
        assert f"`{api.removesuffix('.googleapis.com')}`" in doc, api


def test_aws_lists_the_deployers_actions_for_every_service_the_stack_registers():
    """Review: deploy-aws.md's permissions named VPCs, EKS, IAM, KMS and EFS, not the Auto Scaling tags, launch
    templates, VPC endpoints, logs, PassRole, Pod Identity or the key grant the `up` also needs."""
    import yaml

    from tests.harness import REPO

    needs = needs_of("aws-usw2")
    listed = {w.split(":")[0].removeprefix("deployer actions ") for w in needs if w.startswith("deployer actions ")}
    assert listed == {svc for svc, _, _ in preflight.AWS_DEPLOYER_ACTIONS}
    # every provider module of a type the stack registers (force_new/aws.yaml) maps to a listed service
    iam_prefix = {"eks": "eks", "ec2": "ec2", "vpc": "ec2", "iam": "iam", "kms": "kms", "cloudwatch": "logs",
                  "efs": "elasticfilesystem", "autoscaling": "autoscaling"}
    types = yaml.safe_load((REPO / "torchfleet/preview/force_new/aws.yaml").read_text())["types"]
    assert {iam_prefix[t.split(":")[1].split("/")[0]] for t in types} <= listed
    actions = {f"{svc}:{a}" for svc, acts, _ in preflight.AWS_DEPLOYER_ACTIONS for a in acts}
    assert {"autoscaling:CreateOrUpdateTags", "ec2:CreateLaunchTemplate", "ec2:CreateVpcEndpoint",
            "logs:PutRetentionPolicy", "iam:PassRole", "eks:CreatePodIdentityAssociation", "kms:CreateGrant",
            "kms:DescribeKey"} <= actions
    [simulate] = [w for w in needs if "simulate-principal-policy" in w]
    assert "autoscaling:CreateOrUpdateTags" in simulate and "iam:PassRole" in simulate
    doc = (REPO / "docs" / "deploy-aws.md").read_text()
    for svc, acts, _ in preflight.AWS_DEPLOYER_ACTIONS:
        row = next(line for line in doc.splitlines() if line.startswith(f"| `{svc}` |"))
        assert all(f"`{a}`" in row for a in acts), svc


def test_azure_check_names_the_vnet_integration_capacity_and_never_stop():
    """Review (day 2): API Server VNet Integration has limited capacity in some regions, and a stopped cluster
    gives its control plane's capacity back (aks-docs api-server-vnet-integration.md @0154c991)."""
    (line,) = [w for w in needs_of("azure-eus") if w.startswith("API Server VNet Integration capacity")]
    assert "eastus" in line and "currently unavailable in region" in line and "never `az aks stop`" in line


@pytest.mark.parametrize(("stack", "line", "vcpus"), [
    ("aws-usw2", "EC2 quota L-1216C47A Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances (us-west-2): "
                 "room for 2 x m6i.large more (cpuPool, on demand)", 4),
    ("gcp-usc1", "Compute Engine quota CPUS (us-central1): room for 2 x e2-standard-4 more (cpuPool, on demand)", 8),
    ("azure-eus", "vCPU quota Total Regional vCPUs and the Standard_D4s_v5 family (eastus): room for 2 x "
                  "Standard_D4s_v5 more (cpuPool, on demand)", 8),
])
def test_the_cpu_pool_is_counted_apart_from_the_manager_pool(stack, line, vcpus):
    """Issue 30: the shipped stacks' cpuPool {maxNodes: 2} needs room of its own."""
    assert needs_of(stack)[line] == vcpus


def test_a_spot_cpu_pool_asks_for_the_standard_spot_quota():
    from components.spec import parse
    from tests.components.spec.configs import config

    spec = parse(config("aws", cpuPool={"machineType": "m6i.xlarge", "maxNodes": 3, "spot": True}), "spot")
    found = {n.what: n.amount for n in preflight.needs(spec)}
    assert found["EC2 quota L-34B43A08 All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests (us-west-2): "
                 "room for 3 x m6i.xlarge more (cpuPool, spot)"] == 12
