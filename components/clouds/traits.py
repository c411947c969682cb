"""What each cloud can and cannot do, as data (SkyPilot's `_CLOUD_UNSUPPORTED_FEATURES` idea).

The one validator in spec.py reads this table; no cloud module branches on another cloud's
limits. Pure Python: no pulumi import.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class CloudTraits:
    # Provider config key that names the region ("aws:region"); None: the cloud has no region.
    region_key: str | None
    # Regex a zone must match; "{region}" is replaced by the escaped region.
    zone_pattern: str | None
    zone_example: str
    gpu_pools: bool = True
    # Seconds between the spot notice and the node going away; jobs get this grace period.
    spot_notice_s: int = 120
    # Minimum shared-store size in GiB per storage tier (empty: the store grows by itself, as EFS).
    storage_tiers: dict[str, int] = field(default_factory=dict)
    default_storage_tier: str | None = None
    required_keys: tuple[str, ...] = ()
    # Default etcd members for rendezvous: three spread over zones; one where there is one node.
    etcd_members: int = 3
    # Kubernetes minors the cloud module can build (empty: any). On AWS the cluster autoscaler
    # image must match the minor, so only minors with a known autoscaler release are accepted.
    kubernetes_versions: tuple[str, ...] = ()
    # Most zones the cloud module's network layout holds (None: no limit of ours).
    max_zones: int | None = None
    # Machine types one GPU pool may list (None: any number). A GKE node pool has one machine type.
    machine_types_per_pool: int | None = None
    # Whether autoscaler.scaleDown* can be applied; GKE's built-in autoscaler has a profile instead.
    autoscaler_timings: bool = True


CLOUD_TRAITS: dict[str, CloudTraits] = {
    "aws": CloudTraits(
        region_key="aws:region",
        zone_pattern=r"^{region}[a-z]$",
        zone_example="us-west-2a",
        # https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instance-termination-notices.html
        spot_notice_s=120,
        kubernetes_versions=("1.30", "1.31", "1.32", "1.33", "1.34"),
        # aws/network.py gives each zone a quarter of the VPC's private half.
        max_zones=4,
    ),
    "gcp": CloudTraits(
        region_key="gcp:region",
        zone_pattern=r"^{region}-[a-z]$",
        zone_example="us-central1-a",
        # GKE graceful node shutdown gives non-system pods 15 s of the 30 s spot notice:
        # https://cloud.google.com/kubernetes-engine/docs/concepts/spot-vms#termination-graceful-shutdown
        spot_notice_s=15,
        # https://cloud.google.com/filestore/docs/service-tiers (minimum capacity per tier, GiB)
        storage_tiers={"BASIC_HDD": 1024, "BASIC_SSD": 2560, "ZONAL": 1024, "REGIONAL": 1024},
        default_storage_tier="BASIC_HDD",
        required_keys=("gcp:project",),
        machine_types_per_pool=1,
        autoscaler_timings=False,
    ),
    "azure": CloudTraits(
        region_key="azure-native:location",
        zone_pattern=r"^[123]$",
        zone_example='"1"',
        # https://learn.microsoft.com/azure/virtual-machines/spot-vms#eviction-policy (30 s notice)
        spot_notice_s=30,
        # Premium (FileStorage) NFS shares start at 100 GiB:
        # https://learn.microsoft.com/azure/storage/files/understanding-billing#provisioned-v1-model
        storage_tiers={"Premium_LRS": 100, "Premium_ZRS": 100},
        default_storage_tier="Premium_LRS",
    ),
    "local": CloudTraits(
        region_key=None,
        zone_pattern=None,
        zone_example="(none: the local stack uses the current kubeconfig context)",
        gpu_pools=False,
        spot_notice_s=30,
        etcd_members=1,
    ),
}
