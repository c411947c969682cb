"""The shared store on GCP: one Filestore instance, mounted through GKE's Filestore CSI driver.

Filestore is encrypted at rest with Google-managed keys (always on). The export is limited to
the node range: the CSI node plugin mounts from the node's network namespace, so the NFS
client address is a node address. The Kubernetes layer gets a ReadWriteMany volume source for
the pre-provisioned instance, in the form the CSI driver documents:
https://github.com/kubernetes-sigs/gcp-filestore-csi-driver/blob/master/docs/kubernetes/pre-provisioned-pv.md
"""

from __future__ import annotations

import ipaddress

import pulumi
import pulumi_gcp as gcp

from components.clouds.base import SharedStore
from components.spec import PlatformSpec, StorageSpec

SHARE_NAME = "share"
CSI_DRIVER = "filestore.csi.storage.gke.io"
# Tiers that live in a region; the others live in one zone.
REGIONAL_TIERS = ("REGIONAL", "ENTERPRISE")
# Filestore's own deletion protection exists only for these tiers; asking for it on a Basic
# tier fails the create (hashicorp/terraform-provider-google#20311). Pulumi's `protect` guards
# every tier.
SERVICE_PROTECTION_TIERS = ("ZONAL", "REGIONAL", "ENTERPRISE")


def store_location(spec: PlatformSpec) -> str:
    """A regional tier spans the region; a zonal one sits in the stack's first zone."""
    if spec.storage.tier in REGIONAL_TIERS:
        return spec.region or ""
    return spec.zones[0]


def store_options(storage: StorageSpec, parent: pulumi.Resource) -> pulumi.ResourceOptions:
    """`storage.protect` (default true) makes `pulumi destroy` refuse to delete the data."""
    return pulumi.ResourceOptions(
        parent=parent,
        protect=storage.protect,
        # Also kept if the instance ever leaves the program, as the AWS and Azure stores are.
        retain_on_delete=storage.protect,
        # Filestore creation takes several minutes; larger tiers take longer.
        custom_timeouts=pulumi.CustomTimeouts(create="60m", update="60m", delete="30m"),
    )


def reserved_range(store_block: str, tier: str | None) -> str:
    """The instance's address range: a /29 for Basic tiers, a /26 for the others.

    https://cloud.google.com/filestore/docs/reference/rest/v1/projects.locations.instances#networkconfig
    """
    prefix = 29 if (tier or "").startswith("BASIC_") else 26
    return str(next(ipaddress.ip_network(store_block).subnets(new_prefix=prefix)))


def service_protection(storage: StorageSpec) -> dict:
    """Filestore-side deletion protection, where the tier supports it (a console delete fails too).

    Set explicitly to false when `protect` is turned off, so the next `pulumi up` lifts it.
    """
    if storage.tier not in SERVICE_PROTECTION_TIERS:
        return {}
    if not storage.protect:
        return {"deletion_protection_enabled": False}
    return {"deletion_protection_enabled": True, "deletion_protection_reason": "torchfleet storage.protect"}


def csi_volume_source(location: str, instance: str, ip: str) -> dict:
    return {
        "csi": {
            "driver": CSI_DRIVER,
            "volumeHandle": f"modeInstance/{location}/{instance}/{SHARE_NAME}",
            "volumeAttributes": {"ip": ip, "volume": SHARE_NAME},
        }
    }


class GcpFilestore(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        spec: PlatformSpec,
        network: pulumi.Input[str],
        node_range: str,
        store_block: str,
        labels: dict[str, str],
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("torchfleet:clouds:GcpFilestore", name, None, opts)
        storage = spec.storage
        location = store_location(spec)
        self.instance = gcp.filestore.Instance(
            f"{name}-instance",
            location=location,
            tier=storage.tier,
            file_shares={
                "name": SHARE_NAME,
                "capacity_gb": storage.size_gb,
                "nfs_export_options": [
                    {"ip_ranges": [node_range], "access_mode": "READ_WRITE", "squash_mode": "NO_ROOT_SQUASH"}
                ],
            },
            networks=[
                {
                    "network": network,
                    "modes": ["MODE_IPV4"],
                    "connect_mode": "DIRECT_PEERING",
                    "reserved_ip_range": reserved_range(store_block, storage.tier),
                }
            ],
            **service_protection(storage),
            labels=labels,
            opts=store_options(storage, self),
        )
        ip = self.instance.networks.apply(lambda nets: nets[0].ip_addresses[0])
        self.store = SharedStore(
            kind="filestore",
            volume_source=pulumi.Output.all(self.instance.name, ip).apply(
                lambda args: csi_volume_source(location, args[0], args[1])
            ),
            capacity=f"{storage.size_gb}Gi",
            nfs_cidrs=(ip.apply(lambda a: f"{a}/32"),),
            id=self.instance.id,
        )
        self.register_outputs({"instance": self.instance.id, "ip": ip})
