"""Azure Files NFS 4.1: a Premium FileStorage account reachable only through a private endpoint.

Why a private endpoint rather than the subnet's storage service endpoint: the share then has an
address inside the virtual network (the endpoint subnet), public network access can be switched
off entirely, and the training namespace's egress policy can name that subnet.
https://learn.microsoft.com/azure/storage/files/storage-files-networking-endpoints

The store lives in its own resource group so that `pulumi destroy` of an unprotected cluster
never takes it along: deleting a resource group deletes everything in it.
"""

from __future__ import annotations

import pulumi
from pulumi_azure_native import network, privatedns, resources, storage

from components.clouds.azure import naming
from components.clouds.azure.network import AzureNetwork
from components.clouds.base import SharedStore
from components.spec import PlatformSpec

CSI_DRIVER = "file.csi.azure.com"
SHARE_NAME = "shared"
# Azure's recommended NFS mount options for AKS:
# https://learn.microsoft.com/troubleshoot/azure/azure-kubernetes/storage/mountoptions-settings-azure-files
# nconnect=4 spreads I/O over four TCP connections; actimeo=30 caches attributes for checkpoint
# listings; noresvport lets the client reconnect from any port after a network blip.
NFS_MOUNT_OPTIONS = ("nconnect=4", "actimeo=30", "noresvport")
PRIVATE_DNS_ZONE = "privatelink.file.core.windows.net"


def store_options(protect: bool, parent: pulumi.Resource) -> pulumi.ResourceOptions:
    """Options of the data resource group, the account and the share: protected, and retained if
    ever deleted from the stack, unless the stack says storage.protect: false (as on AWS)."""
    return pulumi.ResourceOptions(parent=parent, protect=protect, retain_on_delete=protect)


def account_args(spec: PlatformSpec) -> dict:
    """The storage account's settings, as plain data (tests assert on every line)."""
    return {
        # NFS shares exist only on Premium FileStorage accounts.
        # https://learn.microsoft.com/azure/storage/files/files-nfs-protocol#support-for-azure-storage-features
        "kind": "FileStorage",
        "sku": {"name": spec.storage.tier},
        # Azure refuses NFS mounts while "secure transfer required" (HTTPS/SMB encryption) is on;
        # the NFS traffic stays inside the virtual network, on the private endpoint.
        # https://learn.microsoft.com/azure/storage/files/files-nfs-protocol#security-and-networking
        "enable_https_traffic_only": False,
        "minimum_tls_version": "TLS1_2",
        "allow_blob_public_access": False,
        # Only the private endpoint: no public route at all, not even from the node subnet.
        "public_network_access": "Disabled",
        "network_rule_set": {"default_action": "Deny", "bypass": "None"},
        # Encrypted at rest always; infrastructure encryption adds a second layer (set at creation).
        "encryption": {
            "key_source": "Microsoft.Storage",
            "require_infrastructure_encryption": True,
            "services": {"file": {"enabled": True, "key_type": "Account"}},
        },
    }


def share_args(spec: PlatformSpec) -> dict:
    return {
        "share_name": SHARE_NAME,
        "enabled_protocols": "NFS",
        # The training layer's one-shot ownership job runs as root to hand the share's root to
        # the training user (spec.TRAINING_UID); training pods themselves run as that user.
        "root_squash": "NoRootSquash",
        # Premium shares are provisioned: the quota is what is billed and what sets IOPS.
        "share_quota": spec.storage.size_gb,
    }


class AzureFilesStore(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        spec: PlatformSpec,
        net: AzureNetwork,
        client: pulumi.Output,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("torchfleet:clouds:AzureFilesStore", name, None, opts)
        protect = spec.storage.protect
        self.resource_group = resources.ResourceGroup(
            f"{name}-rg", location=spec.region, tags=naming.tags(spec.stack), opts=store_options(protect, self)
        )
        account_name = client.apply(lambda c: naming.storage_account_name(c.subscription_id, spec.stack, name))
        self.account = storage.StorageAccount(
            f"{name}-account",
            account_name=account_name,
            resource_group_name=self.resource_group.name,
            location=spec.region,
            tags=naming.tags(spec.stack),
            **account_args(spec),
            opts=store_options(protect, self),
        )
        self.share = storage.FileShare(
            f"{name}-share",
            account_name=self.account.name,
            resource_group_name=self.resource_group.name,
            **share_args(spec),
            opts=store_options(protect, self),
        )
        self.endpoint = self._create_private_endpoint(name, spec, net)
        self.register_outputs({"storageAccount": self.account.name, "shareName": self.share.name})

    def _create_private_endpoint(self, name: str, spec: PlatformSpec, net: AzureNetwork) -> network.PrivateEndpoint:
        # Nodes resolve <account>.file.core.windows.net to the endpoint's private address
        # through this zone, linked to the cluster's virtual network.
        # https://learn.microsoft.com/azure/private-link/private-endpoint-dns#storage
        zone = privatedns.PrivateZone(
            f"{name}-dns",
            private_zone_name=PRIVATE_DNS_ZONE,
            resource_group_name=self.resource_group.name,
            location="global",
            opts=pulumi.ResourceOptions(parent=self),
        )
        privatedns.VirtualNetworkLink(
            f"{name}-dns-link",
            private_zone_name=zone.name,
            resource_group_name=self.resource_group.name,
            location="global",
            virtual_network={"id": net.vnet.id},
            registration_enabled=False,
            opts=pulumi.ResourceOptions(parent=self),
        )
        endpoint = network.PrivateEndpoint(
            f"{name}-endpoint",
            resource_group_name=self.resource_group.name,
            location=spec.region,
            subnet={"id": net.endpoint_subnet.id},
            tags=naming.tags(spec.stack),
            private_link_service_connections=[
                {"name": f"{name}-file", "private_link_service_id": self.account.id, "group_ids": ["file"]}
            ],
            opts=pulumi.ResourceOptions(parent=self),
        )
        network.PrivateDnsZoneGroup(
            f"{name}-endpoint-dns",
            private_endpoint_name=endpoint.name,
            resource_group_name=self.resource_group.name,
            private_dns_zone_configs=[{"name": "file", "private_dns_zone_id": zone.id}],
            opts=pulumi.ResourceOptions(parent=self),
        )
        return endpoint

    def shared_store(self, spec: PlatformSpec, endpoint_cidr: str) -> SharedStore:
        """The store as the Kubernetes layer needs it: a static ReadWriteMany CSI volume."""
        rg, account, share = self.resource_group.name, self.account.name, self.share.name
        return SharedStore(
            kind="azurefiles",
            # Static provisioning of an existing NFS share; volumeHandle must be unique per
            # cluster, documented form "{resource-group}#{account}#{share}".
            # https://learn.microsoft.com/azure/aks/azure-csi-files-storage-provision#create-a-persistent-volume
            volume_source=pulumi.Output.all(rg, account, share).apply(
                lambda v: {
                    "csi": {
                        "driver": CSI_DRIVER,
                        "volumeHandle": f"{v[0]}#{v[1]}#{v[2]}",
                        "volumeAttributes": {
                            "resourceGroup": v[0],
                            "storageAccount": v[1],
                            "shareName": v[2],
                            "protocol": "nfs",
                        },
                    }
                }
            ),
            mount_options=NFS_MOUNT_OPTIONS,
            capacity=f"{spec.storage.size_gb}Gi",
            nfs_cidrs=(endpoint_cidr,),
            id=pulumi.Output.concat(account, "/", share),
        )

