"""What each cloud can and cannot do, as data (SkyPilot's `_CLOUD_UNSUPPORTED_FEATURES` idea).

The one validator in spec/ reads this table; no cloud module branches on another cloud's
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
    # Where the cluster the cloud module creates can only start on a minor in the service's
    # standard support: each minor the service offers (catalog/kubernetes.yaml) -> the last day of
    # its standard support. A minor whose day is before the catalog's `checked` day is refused,
    # with standard_support_why saying why (empty: the service's whole list is accepted).
    standard_support_until: dict[str, str] = field(default_factory=dict)
    standard_support_why: str = ""
    # Most zones the cloud module's network layout holds (None: no limit of ours).
    max_zones: int | None = None
    # Fewest zones the cluster accepts (EKS: subnets in two zones at least).
    min_zones: int = 1
    # AWS: network.privateAccessCidrs and network.clusterZones exist (clouds/aws/cluster.py).
    eks_network_keys: bool = False
    # Values of torchfleet:kubernetesSupport (empty: the key is refused on this cloud).
    support_types: tuple[str, ...] = ()
    # Machine types one GPU pool may list (None: any number). A GKE node pool has one machine type.
    machine_types_per_pool: int | None = None
    # Whether autoscaler.scaleDown* can be applied; GKE's built-in autoscaler has a profile instead.
    autoscaler_timings: bool = True
    # The cloud's own ceilings (each cited below): nodes one pool may scale to (per zone), a node's
    # root disk in GiB, the shared store's size per tier in GiB.
    max_nodes_per_pool: int | None = None
    max_disk_gb: int | None = None
    storage_max_gb: dict[str, int] = field(default_factory=dict)
    # Storage tiers that live in one zone (storage.zone says which); a store cannot move zones.
    zonal_storage_tiers: tuple[str, ...] = ()
    # The most CIDRs the cluster's API endpoint allow-list takes (network.publicAccessCidrs), cited below.
    max_public_access_cidrs: int | None = None
    # Whether network.publicAccessCidrs must be listed unless network.privateOnly is true: the same
    # `pulumi up` that creates a private cluster cannot reach it to create the training layer (issue 29).
    public_access_required: bool = False
    # Whether the cluster has an IAM-gated DNS control-plane endpoint (network.dnsEndpoint): GKE only.
    dns_endpoint: bool = False
    # Prefix lengths the cloud accepts for the VPC/VNet (AWS: /16 to /28).
    network_prefix_range: tuple[int, int] = (8, 29)
    # Provider config namespaces of this cloud: keys of another cloud's namespace are errors.
    config_namespaces: tuple[str, ...] = ()
    # Candidate service and pod ranges the cloud module picks from (the first free of the
    # network): a network.cidr overlapping every candidate leaves the cluster no room.
    service_range_candidates: tuple[str, ...] = ()
    pod_range_candidates: tuple[str, ...] = ()


# https://etcd.io/docs/v3.5/faq/#what-is-maximum-cluster-size: "an etcd cluster probably should
# have no more than seven nodes"; more members slow every write (a quorum must ack it).
MAX_ETCD_MEMBERS = 7


CLOUD_TRAITS: dict[str, CloudTraits] = {
    "aws": CloudTraits(
        region_key="aws:region",
        zone_pattern=r"^{region}[a-z]$",
        zone_example="us-west-2a",
        # https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instance-termination-notices.html
        spot_notice_s=120,
        # EKS offers 1.31-1.36 (catalog/kubernetes.yaml); aws/autoscaling.py pins an autoscaler
        # image for each. EKS starts a cluster past standard support too (extended support, billed
        # per cluster-hour), so no standard_support_until here.
        kubernetes_versions=("1.31", "1.32", "1.33", "1.34", "1.35", "1.36"),
        # aws/layout.py gives each zone a quarter of the VPC's private half.
        max_zones=4,
        # "You must specify at least two subnets that are in different Availability Zones" (one zone:
        # CreateCluster fails "Subnets specified must be in at least two different AZs"):
        # https://docs.aws.amazon.com/eks/latest/userguide/network-reqs.html
        min_zones=2,
        eks_network_keys=True,
        # https://docs.aws.amazon.com/eks/latest/APIReference/API_UpgradePolicyRequest.html
        support_types=("STANDARD", "EXTENDED"),
        # "Nodes per managed node group: 450": https://docs.aws.amazon.com/eks/latest/userguide/service-quotas.html
        max_nodes_per_pool=450,
        # "Public endpoint access CIDR ranges per cluster: 40", not adjustable (quota L-93A74D60):
        # https://docs.aws.amazon.com/eks/latest/userguide/service-quotas.html (read 2026-11-25)
        max_public_access_cidrs=40,
        # A private-only EKS endpoint answers only inside the VPC (API_VpcConfigRequest: "your cluster's
        # Kubernetes API server can only receive requests from within the cluster VPC"), which the same
        # `up` creates (issue 29).
        public_access_required=True,
        # gp3 volumes up to 16 TiB: https://docs.aws.amazon.com/ebs/latest/userguide/ebs-volume-types.html
        max_disk_gb=16384,
        # "the allowed block size is between a /16 netmask and /28 netmask":
        # https://docs.aws.amazon.com/vpc/latest/userguide/vpc-cidr-blocks.html
        network_prefix_range=(16, 28),
        config_namespaces=("aws",),
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
        # End of standard support per minor, from GKE's release schedule
        # (https://cloud.google.com/kubernetes-engine/docs/release-schedule, read 2026-11-23 through
        # the sources in catalog/kubernetes.yaml). gcp/cluster.py enrolls the cluster in the REGULAR
        # channel; past standard support a minor is offered only on the Extended channel
        # (https://cloud.google.com/kubernetes-engine/versioning).
        standard_support_until={
            "1.32": "2026-04-11", "1.33": "2026-08-03", "1.34": "2026-10-01", "1.35": "2027-04-11",
            "1.36": "2027-08-09",
        },
        standard_support_why=(
            "Torchfleet enrolls the cluster in GKE's REGULAR release channel, which offers a minor only "
            "in standard support (extended support is on the Extended channel: "
            "https://cloud.google.com/kubernetes-engine/versioning)"
        ),
        # "Nodes per node pool zone: 1,000": https://cloud.google.com/kubernetes-engine/quotas
        max_nodes_per_pool=1000,
        # "Public clusters can have up to 50 authorized network CIDR ranges; private clusters can have
        # up to 100": https://cloud.google.com/kubernetes-engine/docs/how-to/authorized-networks
        # (Limitations, read 2026-11-25). gcp/cluster.py always makes nodes private (a private cluster).
        max_public_access_cidrs=100,
        # GKE's DNS-based control-plane endpoint (gcp/cluster.py control_plane_endpoints).
        dns_endpoint=True,
        # Persistent Disk up to 64 TiB: https://cloud.google.com/compute/docs/disks#introduction
        max_disk_gb=65536,
        # Basic tiers up to 63.9 TiB, zonal and regional up to 100 TiB (the same service-tiers page).
        storage_max_gb={"BASIC_HDD": 65433, "BASIC_SSD": 65433, "ZONAL": 102400, "REGIONAL": 102400},
        # Basic and Zonal instances are zonal resources, Regional ones span the region (same page).
        zonal_storage_tiers=("BASIC_HDD", "BASIC_SSD", "ZONAL"),
        # Subnet primary ranges: the largest is /8 (components/clouds/gcp/network.py cuts it in 16ths).
        # https://cloud.google.com/vpc/docs/subnets#valid-ranges
        network_prefix_range=(8, 20),
        config_namespaces=("gcp", "google-beta"),
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
        # "Maximum nodes per node pool: 1,000": https://learn.microsoft.com/azure/aks/quotas-skus-regions
        max_nodes_per_pool=1000,
        # "You can specify up to 200 authorized IP ranges":
        # https://learn.microsoft.com/azure/aks/api-server-authorized-ip-ranges (read 2026-11-25)
        max_public_access_cidrs=200,
        # A private AKS cluster is reachable only from its VNet, a peered one or a private endpoint
        # (aks-docs access-private-cluster.md), none of which the stack's first `up` runs in.
        public_access_required=True,
        # osDiskSizeGB maximum 2048: https://learn.microsoft.com/rest/api/aks/agent-pools/create-or-update
        max_disk_gb=2048,
        # A premium file share holds up to 100 TiB:
        # https://learn.microsoft.com/azure/storage/files/storage-files-scale-targets
        storage_max_gb={"Premium_LRS": 102400, "Premium_ZRS": 102400},
        network_prefix_range=(8, 29),
        config_namespaces=("azure-native", "azure"),
        # End of AKS community (standard) support per minor
        # (https://learn.microsoft.com/azure/aks/supported-kubernetes-versions, read 2026-11-23 through
        # the sources in catalog/kubernetes.yaml, whose dates are the end of long-term support).
        # azure/cluster.py creates a Standard-tier cluster; a minor past community support needs
        # the Premium tier with the AKSLongTermSupport plan
        # (https://learn.microsoft.com/azure/aks/long-term-support), so AKS refuses it here.
        standard_support_until={
            "1.31": "2025-11-01", "1.32": "2026-03-31", "1.33": "2026-07-31", "1.34": "2026-11-30",
            "1.35": "2027-03-31", "1.36": "2027-06-30",
        },
        standard_support_why=(
            "Torchfleet creates a Standard-tier AKS cluster, which AKS starts only on a minor in community "
            "support (long-term support needs the Premium tier: https://learn.microsoft.com/azure/aks/long-term-support)"
        ),
        # AKS's service range and Azure CNI Overlay's pod range must overlap neither the VNet nor
        # each other (https://learn.microsoft.com/azure/aks/azure-cni-overlay#ip-address-planning);
        # azure/naming.py cluster_ranges takes the first free of each.
        service_range_candidates=("172.16.0.0/16", "10.250.0.0/16", "192.168.0.0/16"),
        # /14 leaves room for 1,024 nodes at one /24 per node.
        pod_range_candidates=("10.244.0.0/14", "100.64.0.0/14", "172.20.0.0/14"),
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
