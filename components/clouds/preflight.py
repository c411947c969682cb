"""What a cloud must grant before `pulumi up` is useful: the quotas a stack can reach and the APIs it
calls. `torchfleet check` prints these (issue 20).

Nothing here is checked online. Quotas matter because GPU pools start at zero: with no quota
`pulumi up` succeeds, every scale-up then fails in the autoscaler's events, and jobs stay Pending
(the reviews of 2026-11-25: AWS "account quotas", GCP F5/F15, Azure 14). The figures are what the
stack's pools reach at maxNodes, so a quota of at least that lets every pool scale fully.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from components.catalog import host_encryption, machines
from components.clouds import zone_offers
from components.spec import PlatformSpec

# EC2 vCPU quotas by instance family letter (Service Quotas, service code ec2):
# https://docs.aws.amazon.com/ec2/latest/instancetypes/ec2-instance-quotas.html
_AWS_ON_DEMAND = {"g": "L-DB2E81BA Running On-Demand G and VT instances",
                  "p": "L-417A185B Running On-Demand P instances"}
_AWS_SPOT = {"g": "L-3819A6DF All G and VT Spot Instance Requests", "p": "L-7212CCBC All P Spot Instance Requests"}
_AWS_STANDARD = "L-1216C47A Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances"
_AWS_STANDARD_SPOT = "L-34B43A08 All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests"
# GCP: Spot VMs count against the preemptible quotas when the project has them:
# https://cloud.google.com/compute/resource-usage#gpu_quota ,
# https://cloud.google.com/compute/docs/instances/create-use-spot#quotas
_GCP_GPU_METRIC = {"nvidia-h100-80gb": "NVIDIA_H100_GPUS"}
APIS = {
    # compute/container/file/iam/cloudkms: what the resources are; cloudresourcemanager: the project
    # lookup (the KMS grant's service agent) and the project IAM bindings (GCP review F4).
    # serviceusage: gcp.projects.ServiceIdentity (gcp/kms.py, the GKE service agent) calls Service Usage's
    # generateServiceIdentity (terraform-provider-google-beta services/resourcemanager/
    # resource_project_service_identity.go @93c65b2d60).
    "gcp": ("compute.googleapis.com", "container.googleapis.com", "file.googleapis.com", "iam.googleapis.com",
            "cloudkms.googleapis.com", "cloudresourcemanager.googleapis.com", "serviceusage.googleapis.com"),
    # Resource providers the subscription must have registered, and the host-encryption feature;
    # OperationalInsights and Insights hold the audit logs' workspace and diagnostic setting (azure/audit.py).
    "azure": ("Microsoft.ContainerService", "Microsoft.Compute", "Microsoft.Network", "Microsoft.Storage",
              "Microsoft.ManagedIdentity", "Microsoft.OperationalInsights", "Microsoft.Insights",
              "feature Microsoft.Compute/EncryptionAtHost"),
}


# The IAM roles on the project of whoever runs `pulumi up` on GCP (docs/deploy-gcp.md lists the same), each
# with what needs it. On the first `up` no RBAC binding names the deployer (gcp/access.py binds the listed
# admins, and the deployer may not be one), so its Kubernetes rights come from IAM through GKE's authorizer:
# roles/container.admin is "full management of clusters and their Kubernetes API objects"
# (https://cloud.google.com/iam/docs/roles-permissions/container), roles/container.developer would not
# create the ClusterRoles and bindings.
GCP_DEPLOYER_ROLES = (
    ("roles/container.admin", "the cluster and node pools, container.clusters.connect (the DNS endpoint), and "
     "every Kubernetes object of the first `up`, before any RBAC binding exists"),
    ("roles/compute.networkAdmin", "the VPC, subnet, router and Cloud NAT"),
    ("roles/compute.securityAdmin", "the firewall rules (networkAdmin excludes them)"),
    ("roles/file.editor", "the Filestore instance"),
    ("roles/iam.serviceAccountAdmin", "the node service account"),
    ("roles/iam.serviceAccountUser", "actAs on the node service account (GKE refuses a pool otherwise)"),
    ("roles/resourcemanager.projectIamAdmin", "the node account's and the admins' project IAM bindings"),
    ("roles/cloudkms.admin", "the key ring, the Secrets key and its grant to the GKE service agent"),
    ("roles/serviceusage.serviceUsageAdmin", "the GKE service agent (generateServiceIdentity) and enabling the APIs"),
)
# What the AWS identity running `pulumi up` (and `destroy`) must be allowed, by service, derived from the resource
# types the stack registers (torchfleet/preview/force_new/aws.yaml; the provider's Create/Read/Update/Delete of
# each, terraform-provider-aws internal/service/<service>/). IAM: no managed policy is this narrow, so
# docs/deploy-aws.md gives these as the policy to attach; `check` prints them and the simulate command.
AWS_DEPLOYER_ACTIONS = (
    ("eks", ("CreateCluster", "DescribeCluster", "ListClusters", "UpdateClusterConfig", "UpdateClusterVersion",
             "DeleteCluster", "TagResource", "CreateNodegroup", "DescribeNodegroup", "ListNodegroups",
             "UpdateNodegroupConfig", "UpdateNodegroupVersion", "DeleteNodegroup", "CreateAddon", "DescribeAddon",
             "DescribeAddonVersions", "UpdateAddon", "DeleteAddon", "CreateAccessEntry", "DescribeAccessEntry",
             "DeleteAccessEntry", "AssociateAccessPolicy", "ListAssociatedAccessPolicies",
             "DisassociateAccessPolicy", "CreatePodIdentityAssociation", "DescribePodIdentityAssociation",
             "DeletePodIdentityAssociation"),
     "the cluster, its node groups, add-ons, admins' access entries and the add-ons' Pod Identity associations"),
    ("ec2", ("CreateVpc", "ModifyVpcAttribute", "DeleteVpc", "CreateSubnet", "ModifySubnetAttribute",
             "DeleteSubnet", "CreateInternetGateway", "AttachInternetGateway", "DetachInternetGateway",
             "DeleteInternetGateway", "CreateRouteTable", "CreateRoute", "AssociateRouteTable",
             "DisassociateRouteTable", "DeleteRouteTable", "AllocateAddress", "ReleaseAddress",
             "DisassociateAddress", "CreateNatGateway", "DeleteNatGateway", "CreateVpcEndpoint",
             "ModifyVpcEndpoint", "DeleteVpcEndpoints", "CreateSecurityGroup", "DeleteSecurityGroup",
             "AuthorizeSecurityGroupIngress", "AuthorizeSecurityGroupEgress", "RevokeSecurityGroupEgress",
             "RevokeSecurityGroupIngress", "CreateLaunchTemplate", "CreateLaunchTemplateVersion",
             "ModifyLaunchTemplate", "DeleteLaunchTemplate", "CreateNetworkInterface",
             "CreateTags", "DeleteTags", "Describe*"),
     "the VPC, subnets, NAT, the S3 gateway endpoint, security group rules, the nodes' launch templates "
     "and the network interfaces of EFS mount targets"),
    ("iam", ("CreateRole", "GetRole", "DeleteRole", "TagRole", "UpdateAssumeRolePolicy", "PutRolePolicy",
             "GetRolePolicy", "DeleteRolePolicy", "AttachRolePolicy", "DetachRolePolicy", "ListRolePolicies",
             "ListAttachedRolePolicies", "ListInstanceProfilesForRole", "PassRole", "CreateServiceLinkedRole"),
     "the cluster, node and add-on roles; PassRole to EKS (cluster and node roles) and to pods.eks.amazonaws.com; "
     "EKS's and Auto Scaling's service-linked roles on an account's first cluster"),
    ("kms", ("CreateKey", "DescribeKey", "GetKeyPolicy", "GetKeyRotationStatus", "EnableKeyRotation",
             "ListResourceTags", "TagResource", "CreateGrant", "ScheduleKeyDeletion"),
     "the Secrets key; CreateGrant and DescribeKey for EKS's envelope encryption with it"),
    ("logs", ("CreateLogGroup", "DescribeLogGroups", "PutRetentionPolicy", "ListTagsForResource", "TagResource"),
     "the control plane's log group (kept on destroy)"),
    ("elasticfilesystem", ("CreateFileSystem", "DescribeFileSystems", "DeleteFileSystem", "CreateMountTarget",
                           "DescribeMountTargets", "DescribeMountTargetSecurityGroups", "DeleteMountTarget",
                           "CreateAccessPoint", "DescribeAccessPoints", "DeleteAccessPoint", "PutBackupPolicy",
                           "DescribeBackupPolicy", "PutFileSystemPolicy", "DescribeFileSystemPolicy",
                           "DeleteFileSystemPolicy", "TagResource"),
     "the shared store, its mount targets, access points, backup and file system policies"),
    ("autoscaling", ("CreateOrUpdateTags", "DeleteTags", "DescribeTags", "DescribeAutoScalingGroups"),
     "the cluster autoscaler's node-template tags on each node group's Auto Scaling group"),
    ("sts", ("GetCallerIdentity",), "who runs `pulumi up` (checked against torchfleet:admins)"),
)
GCP_DATASET_ROLES = (
    ("roles/dns.admin", "the private zone for Cloud Storage (datasets)"),
    ("roles/storage.admin", "the dataset buckets' IAM grants (datasets)"),
)


@dataclass(frozen=True)
class Need:
    what: str  # the quota or API, as the cloud's console names it
    amount: int | None  # None for an API or a feature
    unit: str = ""

    def line(self) -> str:
        return f"  {self.what}: {self.amount} {self.unit}".rstrip() if self.amount is not None else f"  {self.what}"


def _biggest(pool):
    return max(pool.machines, key=lambda m: m.vcpus)


def needs(spec: PlatformSpec) -> list[Need]:
    """Quotas (at every pool's maxNodes) and APIs, for the stack's region; then, per GPU pool, the
    command that says whether the account has its machine in its zone (zone_offers.py says why)."""
    if spec.cloud == "aws":
        found = _aws(spec)
    elif spec.cloud == "gcp":
        found = _gcp(spec)
    elif spec.cloud == "azure":
        found = _azure(spec)
    else:
        return []
    return found + [Need(f"offered: {line}", None) for line in zone_offers.zone_checks(spec)]


def _aws(spec: PlatformSpec) -> list[Need]:
    vcpus: dict[str, int] = defaultdict(int)
    for pool in spec.gpu_pools:
        machine = _biggest(pool)
        family = machine.type[0]
        table = _AWS_SPOT if pool.spot else _AWS_ON_DEMAND
        vcpus[table.get(family, _AWS_STANDARD)] += pool.max_nodes * machine.vcpus
    out = [Need(f"EC2 quota {name} ({spec.region})", n, "vCPUs") for name, n in sorted(vcpus.items())]
    m = spec.manager_pool
    out.append(Need(f"EC2 quota {_AWS_STANDARD} ({spec.region}): room for {m.max_nodes} x {m.machine_type}", None))
    out += _cpu_pool_room(spec, _AWS_STANDARD_SPOT if spec.cpu_pool and spec.cpu_pool.spot else _AWS_STANDARD,
                          "EC2 quota")
    out += [Need(f"deployer actions {svc}:{', '.join(actions)}: {why}", None)
            for svc, actions, why in AWS_DEPLOYER_ACTIONS]
    names = " ".join(f"{svc}:{a}" for svc, actions, _ in AWS_DEPLOYER_ACTIONS for a in actions if "*" not in a)
    out.append(Need("check: aws iam simulate-principal-policy --policy-source-arn \"$TORCHFLEET_AWS_CALLER\" "
                    f"--query \"EvaluationResults[?EvalDecision!='allowed'].EvalActionName\" --action-names {names}"
                    "   # lists the deployer actions above your role is denied", None))
    return out


def _cpu_pool_room(spec: PlatformSpec, quota: str, kind: str) -> list[Need]:
    """torchfleet:cpuPool at its maxNodes (issue 30), on top of the lines above: its own line, in vCPUs where the
    catalog knows the machine, so the room it needs is never read as the manager pool's."""
    cpu = spec.cpu_pool
    if cpu is None:
        return []
    shape = machines.shape(spec.cloud, cpu.machine_type)
    what = (f"{kind} {quota} ({spec.region}): room for {cpu.max_nodes} x {cpu.machine_type} more "
            f"(cpuPool, {'spot' if cpu.spot else 'on demand'})")
    return [Need(what, cpu.max_nodes * shape[0], "vCPUs") if shape else Need(what, None)]


def _gcp_metric(accelerator: str, spot: bool) -> str:
    base = _GCP_GPU_METRIC.get(accelerator) or accelerator.replace("nvidia-tesla-", "nvidia-").upper().replace(
        "-", "_"
    ) + "_GPUS"
    return ("PREEMPTIBLE_" if spot else "") + base


def _gcp(spec: PlatformSpec) -> list[Need]:
    gpus: dict[str, int] = defaultdict(int)
    cpus: dict[str, int] = defaultdict(int)
    total = 0
    for pool in spec.gpu_pools:
        machine = _biggest(pool)
        gpus[_gcp_metric(pool.accelerator or "", pool.spot)] += pool.max_nodes * machine.gpus
        cpus["PREEMPTIBLE_CPUS" if pool.spot else "CPUS"] += pool.max_nodes * machine.vcpus
        total += pool.max_nodes * machine.gpus
    out = [Need(f"Compute Engine quota {m} ({spec.region})", n) for m, n in sorted(gpus.items())]
    out += [Need(f"Compute Engine quota {m} ({spec.region})", n) for m, n in sorted(cpus.items())]
    out.append(Need("Compute Engine quota GPUS_ALL_REGIONS (global)", total))
    tier = (spec.storage.tier or "").lower()
    if tier:
        # ZONAL and REGIONAL quotas start at 0 and need a request (Filestore "Create an instance").
        out.append(Need(f"Filestore quota {tier.upper()} capacity ({spec.region})", spec.storage.size_gb, "GiB"))
    m = spec.manager_pool
    out.append(Need(f"Compute Engine quota CPUS ({spec.region}): room for {m.max_nodes} x {m.machine_type}", None))
    out += _cpu_pool_room(spec, "PREEMPTIBLE_CPUS" if spec.cpu_pool and spec.cpu_pool.spot else "CPUS",
                          "Compute Engine quota")
    out += [Need(f"API {api}", None) for api in APIS["gcp"]]
    if spec.datasets:  # clouds/gcp/datasets.py: the private zone for Cloud Storage, the bucket grants
        out += [Need("API dns.googleapis.com", None), Need("API storage.googleapis.com", None)]
    roles = GCP_DEPLOYER_ROLES + (GCP_DATASET_ROLES if spec.datasets else ())
    out += [Need(f"deployer role {role}: {why}", None) for role, why in roles]
    return out + [Need(f"check: {line}", None) for line in gcp_commands(spec)]


def gcp_commands(spec: PlatformSpec) -> list[str]:
    """The `gcloud` commands that answer the lines above for the project: the deployer's roles, and whether
    GKE's REGULAR channel offers kubernetesVersion. Validation knows each minor's standard-support dates
    (catalog/kubernetes.yaml); what the channel offers in the region today only GKE can say, and a minor
    not in its validVersions fails the cluster's creation (min_master_version on the REGULAR channel)."""
    project = spec.project or "PROJECT"
    return [
        f"gcloud projects get-iam-policy {project} --flatten='bindings[].members' "
        "--filter=\"bindings.members:$(gcloud config get-value account)\" --format='value(bindings.role)'"
        "   # the deployer roles above (or their permissions)",
        f"gcloud container get-server-config --region {spec.region} --project {project} --flatten=channels "
        "--filter=channels.channel=REGULAR --format='value(channels.validVersions)'"
        f"   # kubernetesVersion {spec.kubernetes_version} must be offered here (a {spec.kubernetes_version}.x)",
    ]


def _azure(spec: PlatformSpec) -> list[Need]:
    families: dict[str, int] = defaultdict(int)
    spot = 0
    total = 0
    for pool in spec.gpu_pools:
        for machine in pool.machines:  # one agent pool per machine type, each up to maxNodes
            n = pool.max_nodes * machine.vcpus
            if pool.spot:
                spot += n
            else:
                families[machine.type] += n
                total += n
    out = [Need(f"vCPU quota of the {t} family ({spec.region}; az vm list-usage)", n, "vCPUs")
           for t, n in sorted(families.items())]
    if spot:
        out.append(Need(f"Total Regional Spot vCPUs ({spec.region})", spot, "vCPUs"))
    # The on-demand pools every AKS stack has besides the GPU ones (azure/cluster.py, manager_pool.py), each
    # at its maximum plus one upgrade surge node (AKS's default max surge rounds up to at least one node:
    # aks-docs upgrade-aks-cluster.md); the manager pool twice over while a change moves it to a new pool
    # (created before the old one is deleted: docs/day-2-azure.md). Issue 29: these were not counted.
    # Here, not at the top: azure/files.py imports this module, and the azure package imports files.py.
    from components.clouds.azure import cluster as aks

    m = spec.manager_pool
    m_vcpus = (machines.shape("azure", m.machine_type) or (0, 0))[0]
    s_vcpus = (machines.shape("azure", aks.SYSTEM_VM_SIZE) or (0, 0))[0]
    system = (aks.SYSTEM_MAX_NODES + 1) * s_vcpus
    manager = (m.max_nodes + 1) * m_vcpus
    out.append(Need(f"Total Regional vCPUs ({spec.region}): on-demand GPU pools {total}, system pool "
                    f"{aks.SYSTEM_MAX_NODES}+1 x {aks.SYSTEM_VM_SIZE} = {system}, manager pool {m.max_nodes}+1 x "
                    f"{m.machine_type} = {manager}; {m.max_nodes * m_vcpus} more while a managerPool change "
                    "moves it", total + system + manager, "vCPUs"))
    out.append(Need(f"vCPU quota of the {m.machine_type} family ({spec.region}): room for {m.max_nodes}+1", None))
    out += _cpu_pool_room(spec, "Total Regional Spot vCPUs" if spec.cpu_pool and spec.cpu_pool.spot else
                          f"Total Regional vCPUs and the {spec.cpu_pool.machine_type if spec.cpu_pool else ''} family",
                          "vCPU quota")
    at_host = any(p.encryption_at_host for p in (m, *spec.gpu_pools))
    out += [Need(f"registered: {rp}", None) for rp in APIS["azure"] if at_host or "EncryptionAtHost" not in rp]
    # Capacity, not quota: "API Server VNet Integration has limited availability and capacity in certain regions"
    # (create or update fails "currently unavailable in region ... due to high demand"), and "stopping your
    # cluster deallocates the control plane and releases the capacity ... customers may be unable to start a
    # stopped cluster" (aks-docs api-server-vnet-integration.md @0154c991, "Limited availability").
    out.append(Need(f"API Server VNet Integration capacity in {spec.region} (limited in some regions: a failed "
                    "create says 'currently unavailable in region'; retry later or see aka.ms/AksVnetIntegration); "
                    "never `az aks stop` the cluster: a stopped one may not start again (docs/deploy-azure.md)", None))
    return out + [Need(f"check: {line}", None) for line in azure_commands(spec)]


def azure_commands(spec: PlatformSpec) -> list[str]:
    """The `az` commands that answer the lines above for the subscription: quotas, registrations, and
    for every size with encryption at host, whether the region offers it (Azure review 14)."""
    region = spec.region
    providers = " ".join(rp for rp in APIS["azure"] if not rp.startswith("feature"))
    lines = [
        f"az vm list-usage --location {region} --output table   # the vCPU quotas above",
        f"for ns in {providers}; do az provider show --namespace $ns --query registrationState --output tsv; done"
        "   # Registered",
    ]
    # The store's NFS encryption in transit (azure/files.py) is GA except in a few regions, where the
    # subscription must register this feature first (azure-docs encryption-in-transit-for-nfs-shares.md,
    # 2025-06-27: China North3, New Zealand North, West Europe, US East2, US Central, US South, Korea Central).
    lines.append(
        "az feature show --namespace Microsoft.Storage --name AllowEncryptionInTransitNFS4 --query properties.state "
        "--output tsv   # Registered, where NFS encryption in transit is still in preview"
    )
    sizes = {spec.manager_pool.machine_type: spec.manager_pool.encryption_at_host}
    for pool in spec.gpu_pools:
        for m in pool.machines:
            sizes[m.type] = sizes.get(m.type, False) or pool.encryption_at_host
    on = sorted(t for t, enabled in sizes.items() if enabled)
    if on:
        lines.append(
            "az feature show --namespace Microsoft.Compute --name EncryptionAtHost --query properties.state "
            "--output tsv   # Registered; else: az feature register --namespace Microsoft.Compute "
            "--name EncryptionAtHost"
        )
    for t in on:
        recorded = {True: "recorded True", False: "recorded False", None: "not recorded"}[host_encryption.supported(t)]
        lines.append(
            f"az vm list-skus --location {region} --size {t} --query "
            f"\"[].capabilities[?name=='EncryptionAtHostSupported'].value\" --output tsv   # True "
            f"(catalog/host_encryption.yaml: {recorded})"
        )
    return lines


def render(spec: PlatformSpec) -> str:
    found = needs(spec)
    if not found:
        return ""
    head = (f"{spec.stack}: what the cloud must grant first (quotas at every pool's maxNodes; "
            "with less, `pulumi up` succeeds and jobs stay Pending):")
    return "\n".join([head, *(n.line() for n in found)])
