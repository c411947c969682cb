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
from components.clouds.gcp.names import gcp_name
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
    """A regional tier spans the region; a zonal one sits in storage.zone, else the stack's first zone.

    The fallback is the location every store made before storage.zone existed has, so upgrading moves
    nothing; from then on the instance's own location is kept (STORE_IDENTITY, refuse_store_move), so
    reordering torchfleet:zones or dropping its first zone never moves the checkpoints (GCP review B1).
    """
    if spec.storage.tier in REGIONAL_TIERS:
        return spec.region or ""
    return spec.storage.zone or spec.zones[0]


# What identifies the instance beyond its name: terraform-provider-google-beta
# services/filestore/resource_filestore_instance.go marks `location`, `tier` and the whole `networks`
# block (reserved_ip_range included) ForceNew, and Filestore names are unique per project *and
# location* (projects.locations.instances.create), so a change would create a second, empty instance
# next to the first. The provider is told to ignore them; refuse_store_move says what to do instead.
STORE_IDENTITY = ("location", "tier", "networks")
MOVE_WHY = "a Filestore instance cannot move or change tier (the provider would create a new, empty one)"
MOVE_STEPS = (
    "`pulumi destroy` (storage.protect keeps the instance and the VPC), back the share up (gcloud filestore "
    "backups create), delete the old instance, create the new one under the same name and reserved range from "
    "the backup, then `pulumi up` with the new value and storage.adopt: true (docs/day-2-gcp.md, the store rows)"
)
MOVE_HOW = f"{MOVE_WHY}: keep the deployed value, or move the data: {MOVE_STEPS}"


def refuse_store_move(deployed: dict, wanted: dict) -> list[str]:
    """The problems, each naming its key, when the config asks for another location, tier or range
    than the deployed instance has. `deployed` and `wanted`: {"location", "tier", "reserved_ip_range"}."""
    keys = {
        "location": "torchfleet:storage.zone",
        "tier": "torchfleet:storage.tier",
        "reserved_ip_range": "torchfleet:storage.sizeGb",  # a ZONAL store across the 10 TiB band
    }
    why = {"reserved_ip_range": " (the range follows network.cidr and, for ZONAL, the 10 TiB band)"}
    return [
        f"{key}: the store is {field.replace('_', ' ')} {deployed[field]!r}, the config says {wanted[field]!r}"
        + why.get(field, "") + "; "
        + (f"set {key}: {deployed[field]}; " if field == "location" else "")
        + MOVE_HOW
        for field, key in keys.items()
        if deployed.get(field) and wanted.get(field) and deployed[field] != wanted[field]
    ]


def store_plan(spec: PlatformSpec) -> dict:
    """What the config asks of the instance's identity (refuse_store_move's `wanted`)."""
    return {"location": store_location(spec), "tier": spec.storage.tier}


def store_options(
    storage: StorageSpec, parent: pulumi.Resource, import_id: str | None = None
) -> pulumi.ResourceOptions:
    """`storage.protect` (default true): `pulumi destroy` keeps the instance (retainOnDelete, never
    `protect`, which would make the whole destroy fail); `storage.adopt` imports it back. The
    instance's identity is never changed by Pulumi (STORE_IDENTITY): a change is refused instead."""
    return pulumi.ResourceOptions(
        parent=parent,
        retain_on_delete=storage.protect,
        import_=import_id,
        ignore_changes=list(STORE_IDENTITY),
        # Filestore creation takes several minutes; larger tiers take longer.
        custom_timeouts=pulumi.CustomTimeouts(create="60m", update="60m", delete="30m"),
    )


def instance_name(stack: str) -> str:
    """One fixed name per stack (RFC 1035, at most 63): a `pulumi up` after a destroy that kept the
    store fails "already exists" instead of creating an empty twin, and storage.adopt finds it."""
    return gcp_name(stack, "store")


def import_id(project: str | None, location: str, name: str) -> str:
    # The provider's import form: https://www.pulumi.com/registry/packages/gcp/api-docs/filestore/instance/#import
    return f"projects/{project}/locations/{location}/instances/{name}"


# The zonal tier's higher capacity band (10-100 TiB) replaces High Scale SSD ("The zonal (10 TiB to
# 100 TiB) service tier replaces the high scale SSD", https://cloud.google.com/filestore/docs/service-tiers).
HIGH_SCALE_BAND_GB = 10 * 1024


def reserved_range(store_block: str, tier: str | None, size_gb: int = 0) -> str:
    """The instance's address range: "a /29 CIDR block for Basic tier, a /24 CIDR block for High
    Scale tier, or a /26 CIDR block for Enterprise tier"
    (https://cloud.google.com/filestore/docs/reference/rest/v1/projects.locations.instances#networkconfig):
    a /24 for ZONAL in High Scale's capacity band (GCP review F15: it got a /26), a /26 for the
    other non-Basic tiers. The store block is a /20, which holds any of them."""
    if (tier or "").startswith("BASIC_"):
        prefix = 29
    elif tier == "ZONAL" and size_gb >= HIGH_SCALE_BAND_GB:
        prefix = 24
    else:
        prefix = 26
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


def nfs_callback_allows() -> list[dict]:
    """What the Filestore instance may open toward the nodes (GCP review F9).

    NFSv3 "supports bidirectional communication between the client and server" and "uses multiple
    ports"; its locks are the Network Lock Manager's
    (https://cloud.google.com/filestore/docs/about-supported-protocols): the server calls back the
    client's rpcbind (111), lockd and statd. A custom-mode VPC denies all ingress by default and
    GKE's own rules admit only cluster traffic, so without this rule blocking fcntl locks and lock
    recovery stall. lockd's and statd's ports are chosen at boot on GKE's node images (not pinned),
    so every TCP and UDP port is open, but only from the instance's reserved range, which holds
    nothing but the Filestore instance.
    """
    return [{"protocol": "tcp"}, {"protocol": "udp"}]


def csi_volume_source(location: str, instance: str, ip: str) -> dict:
    return {
        "csi": {
            "driver": CSI_DRIVER,
            "volumeHandle": f"modeInstance/{location}/{instance}/{SHARE_NAME}",
            "volumeAttributes": {"ip": ip, "volume": SHARE_NAME},
        }
    }


def _deployed_location(location: str, tier: str, networks: list, wanted: dict) -> str:
    # networks: the provider's typed outputs (InstanceNetwork), as the ip above reads them.
    reserved = getattr(networks[0], "reserved_ip_range", None) if networks else None
    deployed = {"location": location, "tier": tier, "reserved_ip_range": reserved}
    problems = refuse_store_move(deployed, wanted)
    if problems:
        raise pulumi.RunError("\n".join(problems))
    return location


class GcpFilestore(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        spec: PlatformSpec,
        network: pulumi.Input[str],
        node_range: str,
        store_block: str,
        labels: dict[str, str],
        node_service_account: pulumi.Input[str],
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("torchfleet:clouds:GcpFilestore", name, None, opts)
        storage = spec.storage
        location = store_location(spec)
        fixed = instance_name(spec.stack)
        adopt = import_id(spec.project, location, fixed) if storage.protect and storage.adopt else None
        self.instance = gcp.filestore.Instance(
            f"{name}-instance",
            name=fixed,
            location=location,
            tier=storage.tier,
            file_shares={
                "name": SHARE_NAME,
                "capacity_gb": storage.size_gb,
                # Root is not squashed: the store-owner Job chowns the share's root (kube/store_owner.py),
                # and squashing would protect nothing, since NFS AUTH_SYS lets a client that can mount
                # act as uid 10001, who owns every checkpoint; the export's node range and the admission
                # policy against inline nfs volumes decide who mounts (GCP review F11; the reasoning:
                # components/clouds/azure/files.py share_args, docs/training-layer.md).
                "nfs_export_options": [
                    {"ip_ranges": [node_range], "access_mode": "READ_WRITE", "squash_mode": "NO_ROOT_SQUASH"}
                ],
            },
            networks=[
                {
                    "network": network,
                    "modes": ["MODE_IPV4"],
                    "connect_mode": "DIRECT_PEERING",
                    "reserved_ip_range": reserved_range(store_block, storage.tier, storage.size_gb),
                }
            ],
            **service_protection(storage),
            labels=labels,
            opts=store_options(storage, self, adopt),
        )
        self.callbacks = gcp.compute.Firewall(
            f"{name}-nfs-callbacks",
            network=network,
            direction="INGRESS",
            description="Filestore NFSv3 server to its clients on the nodes (NLM locks, statd)",
            source_ranges=[reserved_range(store_block, storage.tier, storage.size_gb)],
            target_service_accounts=[node_service_account],
            allows=nfs_callback_allows(),
            opts=pulumi.ResourceOptions(parent=self),
        )
        ip = self.instance.networks.apply(lambda nets: nets[0].ip_addresses[0])
        wanted = {**store_plan(spec), "reserved_ip_range": reserved_range(store_block, storage.tier, storage.size_gb)}
        # The deployed instance's identity (its state, in a preview too, as the provider ignores the
        # config's): a config that asks for another fails the preview in register_outputs below, naming
        # the key, before anything changes. The volume names the location the instance really has.
        self.location = pulumi.Output.all(self.instance.location, self.instance.tier, self.instance.networks).apply(
            lambda args: _deployed_location(args[0], args[1], args[2], wanted)
        )
        self.store = SharedStore(
            kind="filestore",
            volume_source=pulumi.Output.all(self.instance.location, self.instance.name, ip).apply(
                lambda args: csi_volume_source(args[0], args[1], args[2])
            ),
            capacity=f"{storage.size_gb}Gi",
            # No training-to-store policy (GCP review F10): the export admits the node range only,
            # and a pod's own NFS client sends from its Pod address, which GKE does not masquerade
            # toward private ranges, so Filestore refuses it; the volume is mounted by the node.
            nfs_cidrs=(),
            id=self.instance.id,
        )
        self.register_outputs({"instance": self.instance.id, "ip": ip, "location": self.location})
