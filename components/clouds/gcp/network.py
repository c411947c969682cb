"""The GKE network: one VPC, one regional subnet with secondary ranges (VPC-native), Cloud NAT.

GCP subnets are regional, so one subnet serves every zone of the stack. `network.cidr` is split
by `address_plan` into the node range (the subnet's primary range), the Pod range and the
Service range (secondary ranges GKE uses for alias IPs). Nodes are private: they reach the
internet through Cloud NAT and Google APIs through Private Google Access.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from components.clouds.gcp.names import gcp_name
from components.spec import PlatformSpec

PODS_RANGE = "pods"
SERVICES_RANGE = "services"
# GKE reserves twice the max pods per node for each node's Pod range, rounded to a power of two:
# https://cloud.google.com/kubernetes-engine/docs/how-to/flexible-pod-cidr
MAX_PODS_PER_NODE = 64  # a /25 of the Pod range per node


@dataclass(frozen=True)
class AddressPlan:
    nodes: str  # the subnet's primary range
    pods: str
    services: str
    # Kept out of every subnet for the Filestore instance's reserved range (DIRECT_PEERING
    # ranges must not overlap a subnet): known before the instance exists, never auto-picked.
    store: str

    @property
    def max_nodes(self) -> int:
        """Nodes the Pod range can hold at MAX_PODS_PER_NODE (each node takes 2x, as a power of two)."""
        per_node = 1 << (2 * MAX_PODS_PER_NODE - 1).bit_length()
        return ipaddress.ip_network(self.pods).num_addresses // per_node


def address_plan(cidr: str) -> AddressPlan:
    """Split the stack's CIDR: nodes, Services and the store a sixteenth each, Pods the upper half.

    10.0.0.0/16 -> nodes 10.0.0.0/20, Services 10.0.16.0/20, store 10.0.32.0/20, Pods
    10.0.128.0/17 (256 nodes at 64 pods per node). spec.parse guarantees /20 or larger.
    """
    net = ipaddress.ip_network(cidr)
    sixteenths = list(net.subnets(prefixlen_diff=4))
    halves = list(net.subnets(prefixlen_diff=1))
    return AddressPlan(
        nodes=str(sixteenths[0]), services=str(sixteenths[1]), store=str(sixteenths[2]), pods=str(halves[1])
    )


class GcpNetwork(pulumi.ComponentResource):
    """VPC + subnet + Cloud Router/NAT for a private, VPC-native GKE cluster."""

    def __init__(self, name: str, spec: PlatformSpec, opts: pulumi.ResourceOptions | None = None):
        super().__init__("torchfleet:clouds:GcpNetwork", name, None, opts)
        self.plan = address_plan(spec.network.cidr)
        self.vpc = self._create_vpc(name, spec)
        self.subnet = self._create_subnet(name, spec.region)
        self.nat = self._create_nat(name, spec.region)
        self.register_outputs({"network": self.vpc.name, "subnetwork": self.subnet.name})

    def _create_vpc(self, name: str, spec: PlatformSpec) -> gcp.compute.Network:
        """Kept by `pulumi destroy` with the store: a Filestore instance is peered to this VPC
        (DIRECT_PEERING), and GCP refuses to delete a network with a peering, so the destroy would
        fail there; the kept store is reachable again only from this network. A fixed name and
        storage.adopt import both back. The subnet, router and NAT go."""
        keep = spec.storage.protect
        vpc_name = gcp_name(spec.stack, "vpc")
        adopt = f"projects/{spec.project}/global/networks/{vpc_name}" if keep and spec.storage.adopt else None
        return gcp.compute.Network(
            f"{name}-vpc",
            name=vpc_name,
            # Custom mode: auto mode would add a subnet in every region with overlapping ranges.
            auto_create_subnetworks=False,
            routing_mode="REGIONAL",
            opts=pulumi.ResourceOptions(parent=self, retain_on_delete=keep, import_=adopt),
        )

    def _create_subnet(self, name: str, region: str | None) -> gcp.compute.Subnetwork:
        return gcp.compute.Subnetwork(
            f"{name}-nodes",
            network=self.vpc.id,
            region=region,
            ip_cidr_range=self.plan.nodes,
            secondary_ip_ranges=[
                {"range_name": PODS_RANGE, "ip_cidr_range": self.plan.pods},
                {"range_name": SERVICES_RANGE, "ip_cidr_range": self.plan.services},
            ],
            # Private nodes pull images from Artifact Registry and write logs without public IPs:
            # https://cloud.google.com/vpc/docs/private-google-access
            private_ip_google_access=True,
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _create_nat(self, name: str, region: str | None) -> gcp.compute.RouterNat:
        router = gcp.compute.Router(
            f"{name}-router",
            network=self.vpc.id,
            region=region,
            opts=pulumi.ResourceOptions(parent=self),
        )
        # Cloud NAT is a regional, managed service (no per-zone gateways to choose between), so
        # `network.natGateways` has no effect on GCP.
        return gcp.compute.RouterNat(
            f"{name}-nat",
            router=router.name,
            region=region,
            nat_ip_allocate_option="AUTO_ONLY",
            source_subnetwork_ip_ranges_to_nat="LIST_OF_SUBNETWORKS",
            subnetworks=[{"name": self.subnet.id, "source_ip_ranges_to_nats": ["ALL_IP_RANGES"]}],
            log_config={"enable": True, "filter": "ERRORS_ONLY"},
            opts=pulumi.ResourceOptions(parent=self),
        )
