"""Computed outputs and invoke answers of the azure-native provider under mocks.

Each answer has the shape the provider returns (camelCase state keys, as in the provider
schema), so the program's `.apply`s see what they would see in Azure: names as given by the
explicit `*Name` input (the provider's auto-name otherwise), principal ids, the OIDC issuer,
and a kubelogin exec kubeconfig (base64) from listManagedClusterUserCredentials.
"""

from __future__ import annotations

import base64
import uuid
from typing import Any

import yaml

from components.spec import DEFAULT_KUBERNETES_VERSION

SUBSCRIPTION_ID = "00000000-0000-0000-0000-000000000001"
TENANT_ID = "00000000-0000-0000-0000-00000000000a"
OBJECT_ID = "00000000-0000-0000-0000-0000000000b0"
CLIENT_ID = "00000000-0000-0000-0000-0000000000c0"
AKS_AAD_SERVER_ID = "6dae42f8-4368-4678-94ff-3960e28e3630"


def _guid(seed: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, seed))


def _named(key: str):
    """State `name` = the explicit name input when given, else the resource's logical name."""

    def answer(args) -> dict[str, Any]:
        return {"name": args.inputs.get(key) or args.name}

    return answer


def _managed_cluster(args) -> dict[str, Any]:
    name = args.inputs.get("resourceName") or args.name
    location = args.inputs.get("location", "eastus")
    identity = dict(args.inputs.get("identity") or {"type": "SystemAssigned"})
    # The API takes user-assigned identities as a list of ids and answers with a map keyed by id.
    identity["userAssignedIdentities"] = {
        i: {"principalId": _guid(i + "/principal"), "clientId": _guid(i + "/client")}
        for i in identity.get("userAssignedIdentities") or []
    }
    return {
        "name": name,
        "identity": identity,
        "fqdn": f"{args.inputs.get('dnsPrefix', name)}-abcd1234.hcp.{location}.azmk8s.io",
        "nodeResourceGroup": f"MC_{args.inputs.get('resourceGroupName', 'rg')}_{name}_{location}",
        "oidcIssuerProfile": {
            "enabled": True,
            "issuerURL": f"https://{location}.oic.prod-aks.azure.com/{TENANT_ID}/{_guid(name)}/",
        },
        "identityProfile": {
            "kubeletidentity": {"clientId": _guid(name + "/kubelet-client"), "objectId": _guid(name + "/kubelet")}
        },
        "currentKubernetesVersion": f"{args.inputs.get('kubernetesVersion', DEFAULT_KUBERNETES_VERSION)}.5",
        "provisioningState": "Succeeded",
    }


def _identity(args) -> dict[str, Any]:
    name = args.inputs.get("resourceName") or args.name
    return {"name": name, "principalId": _guid(name + "/principal"), "clientId": _guid(name + "/client"),
            "tenantId": TENANT_ID}


def _role_assignment(args) -> dict[str, Any]:
    # The provider auto-names role assignments with a GUID.
    return {"name": args.inputs.get("roleAssignmentName") or _guid(args.name)}


def _private_endpoint(args) -> dict[str, Any]:
    return {
        "name": args.inputs.get("privateEndpointName") or args.name,
        "customDnsConfigs": [{"fqdn": "account.privatelink.file.core.windows.net", "ipAddresses": ["10.0.128.4"]}],
    }


RESOURCES: dict = {
    "azure-native:resources:ResourceGroup": _named("resourceGroupName"),
    "azure-native:network:VirtualNetwork": _named("virtualNetworkName"),
    "azure-native:network:Subnet": _named("subnetName"),
    "azure-native:network:PrivateEndpoint": _private_endpoint,
    "azure-native:network:PrivateDnsZoneGroup": _named("privateDnsZoneGroupName"),
    "azure-native:privatedns:PrivateZone": _named("privateZoneName"),
    "azure-native:privatedns:VirtualNetworkLink": _named("virtualNetworkLinkName"),
    "azure-native:managedidentity:UserAssignedIdentity": _identity,
    "azure-native:authorization:RoleAssignment": _role_assignment,
    "azure-native:containerservice:ManagedCluster": _managed_cluster,
    "azure-native:containerservice:AgentPool": _named("agentPoolName"),
    "azure-native:storage:StorageAccount": _named("accountName"),
    "azure-native:storage:FileShare": _named("shareName"),
    "azure-native:operationalinsights:Workspace": _named("workspaceName"),
    "azure-native:monitor:DiagnosticSetting": _named("name"),
}


def _client_config(args) -> dict[str, Any]:
    return {"clientId": CLIENT_ID, "objectId": OBJECT_ID, "subscriptionId": SUBSCRIPTION_ID, "tenantId": TENANT_ID}


def user_kubeconfig(cluster: str) -> str:
    """The kubeconfig AKS returns for an Entra ID cluster in `exec` format (kubelogin devicecode)."""
    server = f"https://{cluster}-abcd1234.hcp.eastus.azmk8s.io:443"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": cluster, "cluster": {"certificate-authority-data": "LS0tLS1CRUdJTg==", "server": server}}
        ],
        "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": f"clusterUser_{cluster}"}}],
        "current-context": cluster,
        "users": [
            {
                "name": f"clusterUser_{cluster}",
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1beta1",
                        "command": "kubelogin",
                        "args": [
                            "get-token", "--login", "devicecode", "--server-id", AKS_AAD_SERVER_ID,
                            "--client-id", "80faf920-1908-4b52-b5ef-a8e7bedfc67a", "--tenant-id", TENANT_ID,
                            "--environment", "AzurePublicCloud",
                        ],
                        "env": None,
                        "installHint": "kubelogin is not installed",
                        "provideClusterInfo": False,
                    }
                },
            }
        ],
    }
    return yaml.safe_dump(config)


def _user_credentials(args) -> dict[str, Any]:
    cluster = args.args.get("resourceName", "cluster")
    value = base64.b64encode(user_kubeconfig(cluster).encode()).decode()
    return {"kubeconfigs": [{"name": "clusterUser", "value": value}]}


# Agent pools that exist in the mocked cluster: pool name -> live node count. Empty, as on a first
# `pulumi up`: getAgentPool answers 404 as ARM does. Day-2 tests set counts to stand for a running stack.
LIVE_AGENT_POOLS: dict[str, int] = {}


def _get_agent_pool(args):
    """An invoke failure, as the engine hands a provider's error back: the program sees an exception it
    can catch (a Python exception raised here would instead crash the program as an RPC error)."""
    pool = args.args.get("agentPoolName")
    if pool not in LIVE_AGENT_POOLS:
        return {}, [("agentPoolName", f"status code 404, NotFound: agent pool {pool} not found")]
    return {"name": pool, "count": LIVE_AGENT_POOLS[pool]}


# Managed clusters that run (live.py reads one at preview): name -> {"resourceGroup", "version" (the
# control plane's currentKubernetesVersion), "pools": {AKS pool name: scaleSetPriority}}. Empty, as before the
# first `pulumi up`: getManagedCluster answers 404 as ARM does.
LIVE_MANAGED_CLUSTERS: dict[str, dict[str, Any]] = {}


def _get_managed_cluster(args):
    name, group = args.args.get("resourceName"), args.args.get("resourceGroupName")
    live = LIVE_MANAGED_CLUSTERS.get(name)
    if live is None or live["resourceGroup"] != group:
        return {}, [("resourceName", f"status code 404, ResourceNotFound: managed cluster {name} not found")]
    return {
        "name": name,
        "location": "eastus",
        "currentKubernetesVersion": live["version"],
        "kubernetesVersion": live["version"],
        "agentPoolProfiles": [
            {"name": pool, "scaleSetPriority": priority, "currentOrchestratorVersion": live["version"]}
            for pool, priority in live.get("pools", {}).items()
        ],
    }


CALLS: dict = {
    "azure-native:containerservice:getAgentPool": _get_agent_pool,
    "azure-native:containerservice:getManagedCluster": _get_managed_cluster,
    "azure-native:authorization:getClientConfig": _client_config,
    "azure-native:containerservice:listManagedClusterUserCredentials": _user_credentials,
}
