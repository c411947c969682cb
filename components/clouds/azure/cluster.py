"""The AKS cluster with its fixed system pool, its identity, its admins, and the kubeconfig to reach it."""

from __future__ import annotations

import base64

import pulumi
import pulumi_kubernetes as k8s
import yaml
from pulumi_azure_native import authorization, containerservice, managedidentity

from components.clouds import offline_preview
from components.clouds.azure import naming
from components.clouds.azure.network import AzureNetwork
from components.clouds.propagation import AZURE_RBAC_SECONDS, PropagationWait
from components.spec import LABEL_POOL, MANAGER_POOL_NAME, PlatformSpec

# Built-in role ids (the same in every tenant):
# https://learn.microsoft.com/azure/role-based-access-control/built-in-roles
NETWORK_CONTRIBUTOR = "4d97b98b-1d4f-4787-a291-c67834d212e7"
AKS_RBAC_CLUSTER_ADMIN = "b1ff04bb-8a4e-4dc4-8eb5-8693973ce19b"
# "Azure Kubernetes Service Cluster User Role": listClusterUserCredential only, the kubeconfig of
# `az aks get-credentials`; with Azure RBAC for Kubernetes it grants nothing inside the cluster.
AKS_CLUSTER_USER = "4abbcc35-e782-43d8-92c5-2d3f1bd2253f"
# Planned maintenance: AKS's own schedules for cluster (patch) and node-image upgrades, weekend
# nights UTC. Without them the weekly node-image rollout reimages GPU and etcd nodes at any time
# (Azure review 5); AKS asks for windows of four hours or more.
# https://learn.microsoft.com/azure/aks/planned-maintenance
MAINTENANCE_CONFIGS = {
    "aksManagedAutoUpgradeSchedule": {"day_of_week": "Saturday", "start_time": "02:00"},
    "aksManagedNodeOSUpgradeSchedule": {"day_of_week": "Sunday", "start_time": "02:00"},
}
MAINTENANCE_HOURS = 6
# The AKS AAD server application every Entra-integrated cluster's kubeconfig names.
AKS_AAD_SERVER_ID = "6dae42f8-4368-4678-94ff-3960e28e3630"
MANAGER_SELECTOR = {LABEL_POOL: MANAGER_POOL_NAME}
# The inline System pool AKS needs to create a cluster and keeps needing ("System pools must contain at
# least two nodes", "at least 4 vCPUs and 4 GB of memory"; CriticalAddonsOnly keeps everything else off it:
# aks-docs use-system-pools.md). Two nodes is the documented minimum, and the figure taken (two D4s_v5:
# about $0.38/h at list price, `torchfleet check` prints it); three is the recommendation, declined for cost.
# Nothing about it comes from config: its settings never change, so no update AKS would refuse is ever sent
# for it. The manager pool is a separate AgentPool (manager_pool.py). How the two kinds interplay: a
# ManagedCluster PUT neither deletes the separate pools nor adds pools ("A new agent pool was introduced.
# Adding agent pools to an existing cluster is not allowed through managed cluster operations":
# pulumi/pulumi-azure-native#2719, #579), and a change to an inline entry puts every pool of the cluster into
# Scaling (#4264); so the inline pool is never renamed, removed or changed, and every other pool is separate.
SYSTEM_POOL = "system"
SYSTEM_VM_SIZE = "Standard_D4s_v5"
SYSTEM_NODES = 2
SYSTEM_MAX_NODES = 3
SYSTEM_DISK_GB = 128
CRITICAL_ADDONS_ONLY = "CriticalAddonsOnly=true:NoSchedule"


def role_definition_id(subscription_id: str, role: str) -> str:
    return f"/subscriptions/{subscription_id}/providers/Microsoft.Authorization/roleDefinitions/{role}"


def cluster_options(parent: pulumi.Resource, depends_on: list[pulumi.Resource]) -> pulumi.ResourceOptions:
    return pulumi.ResourceOptions(
        parent=parent,
        depends_on=depends_on,
        # The system pool autoscales (its live node count is not drift); its zones and encryption at host
        # are set when it is made and AKS refuses to change them (manager_pool.py cites the docs): a later
        # zones or managerPool.encryptionAtHost change moves the manager pool and leaves this one as made.
        ignore_changes=[
            "agentPoolProfiles[0].count",
            "agentPoolProfiles[0].availabilityZones",
            "agentPoolProfiles[0].enableEncryptionAtHost",
        ],
        # AKS creation routinely takes 10-20 minutes, upgrades longer.
        custom_timeouts=pulumi.CustomTimeouts(create="60m", update="90m", delete="60m"),
    )


def api_server_access(spec: PlatformSpec, apiserver_subnet_id: pulumi.Input[str]) -> dict:
    """Who reaches the API server: `network.publicAccessCidrs` (required on Azure unless
    `network.privateOnly`; spec/sections.py) through API Server VNet Integration.

    A list: a public endpoint open to those ranges only (authorized IP ranges); 0.0.0.0/0 in it: open
    to all. privateOnly: no public endpoint (reached from a bastion or a peered network).
    https://learn.microsoft.com/azure/aks/api-server-authorized-ip-ranges

    VNet Integration puts the API server's internal load balancer in the delegated subnet
    (network.py), so nodes reach it privately either way, and it is what lets an existing cluster
    switch between public and private: "AKS clusters configured with API Server VNet Integration can
    have public network access/private cluster mode enabled or disabled without redeploying the
    cluster" (aks-docs api-server-vnet-integration.md; `--disable-private-cluster`, private to public,
    is marked preview there). Without it AKS documents no such switch. enablePrivateCluster is always
    sent, so a switch is an explicit false or true, never an omission.
    """
    profile: dict = {"enable_vnet_integration": True, "subnet_id": apiserver_subnet_id}
    if spec.network.private_only:
        return {**profile, "enable_private_cluster": True}
    cidrs = spec.network.public_access_cidrs
    ranges = [c for c in cidrs if c != "0.0.0.0/0"]
    # 0.0.0.0/0 anywhere in the list means open. Sent as an empty list, which is how AKS documents
    # turning authorized ranges off: omitting the field may leave a narrower earlier list in place
    # (Azure review 10; api-server-authorized-ip-ranges "Disable").
    allowed = ranges if len(ranges) == len(cidrs) else []
    return {**profile, "enable_private_cluster": False, "authorized_ip_ranges": allowed}


def system_profile(spec: PlatformSpec, subnet_id: pulumi.Input[str]) -> dict:
    """The inline System pool (SYSTEM_* above): the only pool declared inline, because AKS cannot create
    a cluster without one. The manager and GPU pools are separate AgentPool resources, never inline.

    Its orchestratorVersion follows kubernetesVersion, so the ManagedCluster update that moves the control
    plane moves this on-demand pool with it, as `az aks upgrade` does; the separate pools follow in their own
    updates afterwards (they depend on the cluster). With spot pools AKS does not take the two together ("You
    can't upgrade the control plane and node pools at the same time. You must upgrade them separately":
    aks-docs spot-node-pool.md), so `torchfleet plan` and the program itself (preview and `up`, from the running
    cluster: live.py) refuse such a minor upgrade and give the steps (the control plane, then this pool, with
    `az`; then the `up`): azure/day2.py minor_with_spot_pools says why the program cannot split the PUT itself.
    """
    return {
        "name": SYSTEM_POOL,
        "mode": "System",
        "vm_size": SYSTEM_VM_SIZE,
        "os_type": "Linux",
        "os_sku": "Ubuntu",
        "type": "VirtualMachineScaleSets",
        "enable_auto_scaling": True,
        "min_count": SYSTEM_NODES,
        "max_count": SYSTEM_MAX_NODES,
        "count": SYSTEM_NODES,
        "availability_zones": sorted(spec.zones),
        "vnet_subnet_id": subnet_id,
        "enable_node_public_ip": False,
        "enable_encryption_at_host": spec.manager_pool.encryption_at_host,
        "os_disk_size_gb": SYSTEM_DISK_GB,
        "node_taints": [CRITICAL_ADDONS_ONLY],
        "orchestrator_version": spec.kubernetes_version,
    }


def autoscaler_profile(spec: PlatformSpec) -> dict:
    """AKS's built-in cluster autoscaler (no chart): strings, as the API wants them.

    https://learn.microsoft.com/azure/aks/cluster-autoscaler#use-the-cluster-autoscaler-profile
    """
    return {
        # No balancing across the zonal pools of one GPU: a job keeps all its pods in one zone, so
        # a scale-up split over zones adds nodes it cannot use (Azure review 9: the pool-name tag
        # also made the pools dissimilar to the autoscaler, azure_template.go).
        "balance_similar_node_groups": "false",
        # Reads the cluster-autoscaler-priority-expander ConfigMap (pools.py): spot first.
        "expander": "priority",
        "scale_down_unneeded_time": spec.autoscaler.scale_down_unneeded_time,
        "scale_down_delay_after_add": spec.autoscaler.scale_down_delay_after_add,
        # Training pods mount /dev/shm as a memory-backed emptyDir, which the autoscaler counts
        # as local storage; idle GPU nodes must still be removable.
        "skip_nodes_with_local_storage": "false",
    }


def network_profile(spec: PlatformSpec) -> dict:
    ranges = naming.cluster_ranges(spec.network.cidr)
    return {
        # Azure CNI overlay powered by Cilium: pods get overlay addresses (the vnet only holds
        # nodes) and Cilium enforces NetworkPolicy.
        # https://learn.microsoft.com/azure/aks/azure-cni-powered-by-cilium
        "network_plugin": "azure",
        "network_plugin_mode": "overlay",
        "network_dataplane": "cilium",
        "network_policy": "cilium",
        "pod_cidr": ranges["pod_cidr"],
        "service_cidr": ranges["service_cidr"],
        "dns_service_ip": ranges["dns_service_ip"],
        "load_balancer_sku": "standard",
        "outbound_type": "loadBalancer",
    }


def cluster_args(spec: PlatformSpec, subnet_id: pulumi.Input[str], identity_id: pulumi.Input[str],
                 tenant_id: pulumi.Input[str], apiserver_subnet_id: pulumi.Input[str] = "") -> dict:
    """Every setting of the ManagedCluster, as plain data."""
    return {
        "location": spec.region,
        "dns_prefix": naming.dns_prefix(spec.stack),
        "kubernetes_version": spec.kubernetes_version,
        # Standard tier: the financially backed API server SLA; Free is for dev/test.
        # https://learn.microsoft.com/azure/aks/free-standard-pricing-tiers
        # It starts only on a minor in community support (long-term support needs Premium), so
        # spec.parse refuses an older kubernetesVersion (traits.py standard_support_until).
        "sku": {"name": "Base", "tier": "Standard"},
        "identity": {"type": "UserAssigned", "user_assigned_identities": [identity_id]},
        "enable_rbac": True,
        # Entra ID authentication with Azure RBAC for Kubernetes authorization; no static
        # admin credentials (local accounts disabled), so kubeconfigs need kubelogin.
        # https://learn.microsoft.com/azure/aks/manage-local-accounts-managed-azure-ad
        "aad_profile": {"managed": True, "enable_azure_rbac": True, "tenant_id": tenant_id},
        "disable_local_accounts": True,
        "oidc_issuer_profile": {"enabled": True},
        "security_profile": {"workload_identity": {"enabled": True}},
        # Blob CSI (blobfuse2) only where a stack declares datasets (datasets.py).
        "storage_profile": {
            "file_csi_driver": {"enabled": True},
            "disk_csi_driver": {"enabled": True},
            **({"blob_csi_driver": {"enabled": True}} if spec.datasets else {}),
        },
        "network_profile": network_profile(spec),
        "api_server_access_profile": api_server_access(spec, apiserver_subnet_id),
        "auto_scaler_profile": autoscaler_profile(spec),
        "auto_upgrade_profile": {"upgrade_channel": "patch", "node_os_upgrade_channel": "NodeImage"},
        "agent_pool_profiles": [system_profile(spec, subnet_id)],
        "tags": naming.tags(spec.stack),
    }


def kubelogin_args(mode: str, server_id: str) -> list[str]:
    """kubelogin's arguments for a login mode of spec/access.py KUBE_LOGIN_MODES, each reading the
    credential Pulumi's azure-native provider uses, so both providers act as one identity.

    `spn --use-azurerm-env-vars` reads ARM_CLIENT_ID/ARM_CLIENT_SECRET/ARM_TENANT_ID, the provider's
    own variables, rather than kubelogin's AAD_SERVICE_PRINCIPAL_* (Azure/kubelogin
    pkg/internal/token/options.go UpdateFromEnv); `workloadidentity` reads AZURE_CLIENT_ID,
    AZURE_TENANT_ID and AZURE_FEDERATED_TOKEN_FILE; `azurecli` the `az` session. No secret is
    written into the kubeconfig (kubelogin docs, login-modes/sp.md: a --client-secret flag "will
    leave the secret in the kubeconfig").
    """
    extra = {"azurecli": [], "spn": ["--use-azurerm-env-vars"], "workloadidentity": []}[mode]
    return ["get-token", "--login", mode, "--server-id", server_id, *extra]


def kubelogin_kubeconfig(encoded: str, mode: str = "azurecli") -> str:
    """The user kubeconfig AKS returns (exec format, kubelogin device-code login), rewritten to a
    non-interactive kubelogin login (torchfleet:kubeLogin, default `azurecli`).

    This is what `kubelogin convert-kubeconfig -l <mode>` does; the device-code flow would
    block every update on a browser prompt (pulumi/pulumi-azure-native#2399, Azure/AKS#4990).
    Users need kubelogin on PATH (v0.0.18 or later for --use-azurerm-env-vars).
    https://azure.github.io/kubelogin/concepts/login-modes.html
    """
    config = yaml.safe_load(base64.b64decode(encoded).decode())
    for user in config.get("users") or []:
        exec_ = (user.get("user") or {}).get("exec")
        if not exec_:
            continue
        args = exec_.get("args") or []
        server_id = AKS_AAD_SERVER_ID
        if "--server-id" in args:
            server_id = args[args.index("--server-id") + 1]
        exec_["args"] = kubelogin_args(mode, server_id)
        exec_.pop("env", None)
    return yaml.safe_dump(config, sort_keys=False)


class AksCluster(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        spec: PlatformSpec,
        net: AzureNetwork,
        client: pulumi.Output,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("torchfleet:clouds:AksCluster", name, None, opts)
        rg = net.resource_group.name
        identity, self.network_roles = self._create_identity(name, spec, net, client)
        # The control-plane identity's subnet grants must have taken effect before AKS checks them at
        # create ("Lack of permissions at the API server subnet can cause a provisioning failure":
        # aks-docs api-server-vnet-integration.md); new Azure role assignments take up to five minutes.
        self.network_roles_effective = PropagationWait(
            f"{name}-subnet-roles-propagation", AZURE_RBAC_SECONDS, self.network_roles,
            pulumi.ResourceOptions(parent=self),
        )
        self.cluster = containerservice.ManagedCluster(
            f"{name}-aks",
            resource_group_name=rg,
            **cluster_args(spec, net.node_subnet.id, identity.id, client.tenant_id, net.apiserver_subnet.id),
            opts=cluster_options(self, depends_on=[*self.network_roles, self.network_roles_effective]),
        )
        # torchfleet:admins is the one source of cluster admins, the deployer among them (spec/access.py
        # requires the list on Azure): no grant follows whoever runs `pulumi up`, which moved to the last
        # one to run it and, for a listed deployer, was a second assignment of the same role at the same
        # scope, refused by ARM with 409 RoleAssignmentExists (issue 29).
        self.admin_roles = self._create_admin_roles(name, client, spec.access.admins)
        self.researcher_roles = self._create_researcher_roles(name, client, spec.access.researchers)
        self.maintenance = self._create_maintenance(name, rg)
        creds = containerservice.list_managed_cluster_user_credentials_output(
            resource_group_name=rg, resource_name=self.cluster.name, format="exec"
        )
        self.kubeconfig = pulumi.Output.secret(
            creds.kubeconfigs[0].value.apply(lambda c: kubelogin_kubeconfig(c, spec.access.kube_login))
        )
        # Azure RBAC must grant us cluster admin, and the grant must have taken effect (up to five
        # minutes: Azure review 2), before the provider talks to the cluster.
        self.rbac_effective = PropagationWait(
            f"{name}-rbac-propagation", AZURE_RBAC_SECONDS, self.admin_roles, pulumi.ResourceOptions(parent=self)
        )
        self.provider = k8s.Provider(
            f"{name}-k8s",
            # A loopback kubeconfig only in a preview asked to run without the cluster (offline_preview.py).
            kubeconfig=offline_preview.provider_kubeconfig(self.kubeconfig),
            cluster_identifier=self.cluster.id,  # components/clouds/lifecycle.py, "clusterIdentifier"
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.rbac_effective]),
        )
        self.register_outputs({"clusterName": self.cluster.name, "kubeconfig": self.kubeconfig})

    def _create_identity(self, name: str, spec: PlatformSpec, net: AzureNetwork, client: pulumi.Output):
        # A user-assigned control-plane identity, so it can be granted Network Contributor on the
        # node subnet *before* the cluster exists (a system-assigned one only exists after).
        # https://learn.microsoft.com/azure/aks/configure-azure-cni#prerequisites
        identity = managedidentity.UserAssignedIdentity(
            f"{name}-identity",
            resource_group_name=net.resource_group.name,
            location=spec.region,
            tags=naming.tags(spec.stack),
            opts=pulumi.ResourceOptions(parent=self),
        )
        roles = [
            authorization.RoleAssignment(
                f"{name}-{suffix}",
                principal_id=identity.principal_id,
                principal_type="ServicePrincipal",
                role_definition_id=client.subscription_id.apply(lambda s: role_definition_id(s, NETWORK_CONTRIBUTOR)),
                scope=subnet.id,
                # ARM refuses a second assignment of one role to one principal at one scope
                # ("RoleAssignmentExists"): every role assignment here is delete-before-replace.
                opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True),
            )
            # "The cluster identity needs permissions to both the API server subnet and the node subnet"
            # (aks-docs api-server-vnet-integration.md).
            for suffix, subnet in (("subnet-role", net.node_subnet), ("apiserver-subnet-role", net.apiserver_subnet))
        ]
        return identity, roles

    def _create_admin_roles(
        self, name: str, client: pulumi.Output, admins: tuple[str, ...]
    ) -> list[authorization.RoleAssignment]:
        """torchfleet:admins ("<principalType>:<object id>"): cluster admin through Azure RBAC."""
        return self._assign_on_cluster(f"{name}-admin", client, admins, AKS_RBAC_CLUSTER_ADMIN)

    def _create_researcher_roles(
        self, name: str, client: pulumi.Output, researchers: tuple[str, ...]
    ) -> list[authorization.RoleAssignment]:
        """torchfleet:researchers ("Group:<object id>"): the cluster user role, to fetch the kubeconfig. What
        they may do inside is Kubernetes RBAC: with Azure RBAC for Kubernetes on, AKS still honours RoleBindings
        to Entra groups (https://learn.microsoft.com/azure/aks/manage-azure-rbac: "you can use Microsoft Entra
        users, groups, or service principals as subjects in Kubernetes RBAC"), and the training layer binds
        each group to the namespace's torchfleet-researcher Role (components/kube/researchers.py). No Azure
        RBAC role fits: "Azure Kubernetes Service RBAC Writer" on the namespace reads its Secrets and cannot
        create the operators' custom resources (https://learn.microsoft.com/azure/aks/manage-azure-rbac)."""
        return self._assign_on_cluster(f"{name}-researcher", client, researchers, AKS_CLUSTER_USER)

    def _assign_on_cluster(
        self, prefix: str, client: pulumi.Output, identities: tuple[str, ...], role: str
    ) -> list[authorization.RoleAssignment]:
        """One role assignment on the cluster per "<principalType>:<object id>", named by identity, not position."""
        made = []
        for identity in identities:
            principal_type, object_id = identity.split(":", 1)
            made.append(
                authorization.RoleAssignment(
                    f"{prefix}-{object_id}",
                    principal_id=object_id,
                    principal_type=principal_type,
                    role_definition_id=client.subscription_id.apply(lambda s: role_definition_id(s, role)),
                    scope=self.cluster.id,
                    opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True),
                )
            )
        return made

    def _create_maintenance(self, name: str, rg: pulumi.Input[str]) -> list[containerservice.MaintenanceConfiguration]:
        return [
            containerservice.MaintenanceConfiguration(
                f"{name}-{config}",
                config_name=config,  # AKS's fixed names: delete before replace
                resource_group_name=rg,
                resource_name_=self.cluster.name,
                maintenance_window={
                    "schedule": {"weekly": {"day_of_week": when["day_of_week"], "interval_weeks": 1}},
                    "duration_hours": MAINTENANCE_HOURS,
                    "start_time": when["start_time"],
                    "utc_offset": "+00:00",
                },
                opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True),
            )
            for config, when in MAINTENANCE_CONFIGS.items()
        ]
