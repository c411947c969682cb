"""Azure Files NFS 4.1: a Premium FileStorage account reachable only through a private endpoint.

Why a private endpoint rather than the subnet's storage service endpoint: the share then has an
address inside the virtual network (the endpoint subnet), public network access can be switched
off entirely, and the training namespace's egress policy can name that subnet.
https://learn.microsoft.com/azure/storage/files/storage-files-networking-endpoints

The store lives in its own resource group so that `pulumi destroy` of the cluster never takes it
along: deleting a resource group deletes everything in it. What `pulumi destroy` does here (issue 20):
- keeps the store's resource group, account and share while storage.protect is true
  (retainOnDelete, never `protect`, which would make the whole destroy fail in its preview);
- deletes the private endpoint, its DNS zone group, the zone and its link: they sit in the
  cluster's virtual network, which could not be deleted while an endpoint lives in it. The next
  `pulumi up` makes a new endpoint to the kept account;
- storage.adopt imports the three kept resources back by their fixed names.
"""

from __future__ import annotations

import pulumi
from pulumi_azure_native import authorization, network, privatedns, resources, storage

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
# The driver reads a handle as rg#account#share#diskName#uuid#namespace#subscription and ignores
# the uuid field (azurefile-csi-driver pkg/azurefile GetFileShareInfo); diskName stays empty (a
# name there means a VHD on the share).
OWNER_HANDLE_SUFFIX = "store-owner"


# NFS encrypted in transit (TLS through the driver's azurefile-proxy and aznfs/stunnel on the node):
# AKS >= 1.33 on Ubuntu 22.04+ (every minor spec.parse accepts for AKS), "By setting
# `encryptInTransit: "true"` in StorageClass parameters or PersistentVolume `volumeAttributes`"
# (MicrosoftDocs/azure-aks-docs articles/aks/create-volume-azure-files.md, "Encryption in transit
# (EiT) for NFS file shares", 44329e92 2026-08-20; azurefile-csi-driver pkg/azurefile/nodeserver.go
# NodeStageVolume mounts as `aznfs` when it is set). Both PVs of the share set it: aznfs refuses to
# mix TLS and plain mounts to one server on a node (azure-docs encryption-in-transit-for-nfs-shares.md).
ENCRYPT_IN_TRANSIT = {"encryptInTransit": "true"}


def volume_source(rg: str, account: str, share: str, unique: str = "") -> dict:
    """The share as a static NFS CSI volume; `unique` makes another handle for the same share."""
    handle = f"{rg}#{account}#{share}" + (f"##{unique}" if unique else "")
    attributes = {
        "resourceGroup": rg,
        "storageAccount": account,
        "shareName": share,
        "protocol": "nfs",
        **ENCRYPT_IN_TRANSIT,
    }
    return {"csi": {"driver": CSI_DRIVER, "volumeHandle": handle, "volumeAttributes": attributes}}
PRIVATE_DNS_ZONE = "privatelink.file.core.windows.net"


def store_options(keep: bool, parent: pulumi.Resource, import_id: str | None = None) -> pulumi.ResourceOptions:
    """Options of the data resource group, the account and the share: kept by `pulumi destroy`
    while storage.protect is true, adopted back by id with storage.adopt."""
    return pulumi.ResourceOptions(parent=parent, retain_on_delete=keep, import_=import_id)


def import_ids(subscription_id: str, resource_group: str, account: str) -> dict[str, str]:
    """ARM ids of the kept resource group, account and share (what `import` takes)."""
    rg = f"/subscriptions/{subscription_id}/resourceGroups/{resource_group}"
    acct = f"{rg}/providers/Microsoft.Storage/storageAccounts/{account}"
    return {"rg": rg, "account": acct, "share": f"{acct}/fileServices/default/shares/{SHARE_NAME}"}


def account_args(spec: PlatformSpec) -> dict:
    """The storage account's settings, as plain data (tests assert on every line)."""
    return {
        # NFS shares exist only on Premium FileStorage accounts.
        # https://learn.microsoft.com/azure/storage/files/files-nfs-protocol#support-for-azure-storage-features
        "kind": "FileStorage",
        "sku": {"name": spec.storage.tier},
        # Secure transfer required: with NFS encryption in transit (GA, 2025-06) it makes every NFS
        # mount of the account TLS, and a plain one is refused ("By enabling the Secure transfer
        # required setting on the storage account, you can ensure that all the mounts to the NFS
        # volumes in the storage account are encrypted", MicrosoftDocs/azure-docs
        # articles/storage/files/encryption-in-transit-for-nfs-shares.md, 2025-06-27; Azure review 8).
        # The PVs ask for TLS (ENCRYPT_IN_TRANSIT above). Its preview regions need a subscription
        # feature first (`torchfleet check` prints it, clouds/preflight.py).
        "enable_https_traffic_only": True,
        "minimum_tls_version": "TLS1_2",
        # No account keys: nothing here uses one. The share and the account are made through ARM
        # (the management plane, Entra ID), and the CSI driver mounts an NFS share by its name
        # without a key ("nfs protocol does not need account key, return directly":
        # azurefile-csi-driver pkg/azurefile/azurefile.go GetAccountInfo). Datasets are blob
        # containers in the user's own accounts (azure/datasets.py), never this one.
        "allow_shared_key_access": False,
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
        # Squashing root would protect nothing here (Azure review 8, GCP review F11 on Filestore's
        # NO_ROOT_SQUASH): NFS on Azure Files is AUTH_SYS, "Authentication for NFS shares is based
        # on the configured network security rules" (azure-docs articles/storage/files/
        # files-nfs-protocol.md), so a client that can mount asserts any uid it likes, and every
        # checkpoint belongs to uid 10001, not to root: such a client reads and rewrites them as
        # 10001 whatever the squash mode. RootSquash would only stop the chown of the share's root
        # (kube/store_owner.py), and Azure maps a squashed root to an anonymous uid, not 10001.
        # What decides who can mount is the network and admission: the endpoint subnet's NSG takes
        # 2049 from the node subnet only (network.py), and no pod may declare an inline nfs volume
        # (k8s/base/cluster/validatingadmissionpolicy-no-inline-nfs.yaml); docs/training-layer.md.
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
        keep = spec.storage.protect
        rg_name = naming.store_resource_group(spec.stack)
        adopt: dict[str, str | None] = {"rg": None, "account": None, "share": None}
        if keep and spec.storage.adopt:
            # Import ids must be known while the program runs: ask for the subscription now.
            subscription = authorization.get_client_config().subscription_id
            adopt = import_ids(subscription, rg_name, naming.storage_account_name(subscription, spec.stack, name))
        self.resource_group = resources.ResourceGroup(
            f"{name}-rg",
            resource_group_name=rg_name,
            location=spec.region,
            tags=naming.tags(spec.stack),
            opts=store_options(keep, self, adopt["rg"]),
        )
        account_name = client.apply(lambda c: naming.storage_account_name(c.subscription_id, spec.stack, name))
        self.account = storage.StorageAccount(
            f"{name}-account",
            account_name=account_name,
            resource_group_name=self.resource_group.name,
            location=spec.region,
            tags=naming.tags(spec.stack),
            **account_args(spec),
            opts=store_options(keep, self, adopt["account"]),
        )
        self.share = storage.FileShare(
            f"{name}-share",
            account_name=self.account.name,
            resource_group_name=self.resource_group.name,
            **share_args(spec),
            opts=store_options(keep, self, adopt["share"]),
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
            # A fixed name: a replacement must delete the old zone first.
            opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True),
        )
        # The share resolves to the endpoint only once the link and the zone group exist: the
        # training layer waits for both (Azure review 6).
        self.dns_link = privatedns.VirtualNetworkLink(
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
        self.dns_records = network.PrivateDnsZoneGroup(
            f"{name}-endpoint-dns",
            private_endpoint_name=endpoint.name,
            resource_group_name=self.resource_group.name,
            private_dns_zone_configs=[{"name": "file", "private_dns_zone_id": zone.id}],
            # One zone group per endpoint: delete before replace.
            opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True),
        )
        return endpoint

    def shared_store(self, spec: PlatformSpec, endpoint_cidr: str) -> SharedStore:
        """The store as the Kubernetes layer needs it: a static ReadWriteMany CSI volume."""
        rg, account, share = self.resource_group.name, self.account.name, self.share.name
        names = pulumi.Output.all(rg, account, share)
        return SharedStore(
            kind="azurefiles",
            # Static provisioning of an existing NFS share; volumeHandle must be unique per
            # cluster, documented form "{resource-group}#{account}#{share}".
            # https://learn.microsoft.com/azure/aks/azure-csi-files-storage-provision#create-a-persistent-volume
            volume_source=names.apply(lambda v: volume_source(*v)),
            owner_volume_source=names.apply(lambda v: volume_source(*v, unique=OWNER_HANDLE_SUFFIX)),
            mount_options=NFS_MOUNT_OPTIONS,
            capacity=f"{spec.storage.size_gb}Gi",
            nfs_cidrs=(endpoint_cidr,),
            id=pulumi.Output.concat(account, "/", share),
        )

