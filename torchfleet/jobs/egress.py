"""`--allow-egress CIDR`: the networks a job may reach, never the clouds' metadata endpoints.

What each endpoint hands a pod that reaches it differs by cloud (GCP review F18: this said "the
node's credentials" everywhere):
- EKS: IMDS (169.254.169.254, fd00:ec2::254) hands out the node role's credentials. Our node groups
  require IMDSv2 with a hop limit of 1 (components/clouds/aws/nodegroups.py), so a pod off the host
  network gets no session token already; the except is a second wall (a node group launched from
  another template, or with IMDSv1 back on). A pod's own AWS identity comes from the EKS Pod Identity agent on
  169.254.170.23 / fd00:ec2::23 (https://docs.aws.amazon.com/eks/latest/userguide/pod-id-agent-setup.html),
  which serves only the role of the pod's service account and is not excepted here.
- AKS: IMDS hands any pod a token of the node's managed identities (the kubelet identity), since AKS
  lets pods with hostNetwork=false reach it "without restriction" unless the pool's podLinkLocalAccess
  is None (ARM's PodLinkLocalAccess, default IMDS: https://learn.microsoft.com/dotnet/api/azure.resourcemanager.containerservice.models.podlinklocalaccess);
  WireServer (168.63.129.16) carries the VM agent's channel and extension settings. AKS workload
  identity needs neither: a pod exchanges its projected service-account token with Microsoft Entra ID
  (https://learn.microsoft.com/azure/aks/workload-identity-overview).
- GKE: on nodes with GKE_METADATA (every Torchfleet pool, components/clouds/gcp/pools.py) the GKE
  metadata server answers on 169.254.169.254 (reached at 169.254.169.252:988 behind it) with the
  Workload Identity of the pod's Kubernetes service account, never the node's credentials
  (https://cloud.google.com/kubernetes-engine/docs/concepts/workload-identity#metadata_server).

The rule stays the same on every cloud, so a job's flags mean one thing wherever it runs: whatever a
job opens, these endpoints stay closed (docs/jobs.md promises it). On GKE that costs nothing: the one
path to the metadata server a job needs, the datasets' gcsfuse sidecar token, is opened by the
stack's own `training-to-datasets` policy for pods labelled torchfleet.io/datasets=true, on port 80
only (components/clouds/gcp/datasets.py, docs/data.md), and NetworkPolicies add up, so an except here
does not close it. On EKS and AKS the endpoints would hand a job the node's identity. So every CIDR
that contains one gets it as an ``except`` (a NetworkPolicy ipBlock's excepts must lie strictly inside
its cidr, so each CIDR gets only the endpoints inside it), and a CIDR that is a metadata endpoint, or
lies inside one, is refused.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from torchfleet.jobs.errors import UsageError

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class MetadataEndpoint:
    network: Network
    what: str
    source: str
    serves: str  # what it hands a pod that reaches it, per cloud (the module's docstring)


METADATA_ENDPOINTS = (
    # One address for AWS IMDS, GCP's metadata.google.internal and Azure IMDS.
    MetadataEndpoint(ipaddress.ip_network("169.254.169.254/32"), "AWS, GCP and Azure instance metadata",
                     "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/instancedata-data-retrieval.html, "
                     "https://cloud.google.com/compute/docs/metadata/querying-metadata, "
                     "https://learn.microsoft.com/en-us/azure/virtual-machines/instance-metadata-service",
                     "hands out the node's credentials on EKS and AKS (a pod's own Workload Identity on GKE)"),
    # GKE's metadata server (Workload Identity) answers on this address, port 988.
    MetadataEndpoint(ipaddress.ip_network("169.254.169.252/32"), "the GKE metadata server",
                     "https://cloud.google.com/kubernetes-engine/docs/how-to/workload-identity",
                     "hands out the pod's Workload Identity token"),
    MetadataEndpoint(ipaddress.ip_network("168.63.129.16/32"), "Azure's WireServer",
                     "https://learn.microsoft.com/en-us/azure/virtual-network/what-is-ip-address-168-63-129-16",
                     "carries the VM agent's channel and extension settings"),
    # IMDS over IPv6 on Nitro instances.
    MetadataEndpoint(ipaddress.ip_network("fd00:ec2::254/128"), "AWS instance metadata over IPv6",
                     "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/instancedata-data-retrieval.html",
                     "hands out the node's credentials"),
    # The EKS Pod Identity Agent (a DaemonSet on every node of the AWS stacks: the CSI drivers' and the
    # autoscaler's roles come through it) listens on these two addresses.
    MetadataEndpoint(ipaddress.ip_network("169.254.170.23/32"), "the EKS Pod Identity Agent",
                     "https://docs.aws.amazon.com/eks/latest/userguide/pod-id-agent-setup.html",
                     "hands out the credentials of any pod identity association's role it is asked for"),
    MetadataEndpoint(ipaddress.ip_network("fd00:ec2::23/128"), "the EKS Pod Identity Agent over IPv6",
                     "https://docs.aws.amazon.com/eks/latest/userguide/pod-id-agent-setup.html",
                     "hands out the credentials of any pod identity association's role it is asked for"),
)


# IPv4-mapped IPv6 (RFC 4291 2.5.5.2): an IPv4 address written as IPv6. Kubernetes' stricter IP
# validation rejects them in NetworkPolicy ipBlocks ("could allow for smuggling IP addresses past
# validation checks": KEP-4858, keps/sig-network/4858-ip-cidr-validation, read 2026-11-25), and a
# plugin may read ::ffff:169.254.169.254/128 as the metadata address. So the IPv4 form is asked for,
# and checked (issue 23: the mapped forms of the metadata addresses were accepted).
IPV4_MAPPED = ipaddress.ip_network("::ffff:0:0/96")


def _ipv4_form(network: Network) -> ipaddress.IPv4Network | None:
    if network.version != 6 or not network.subnet_of(IPV4_MAPPED):
        return None
    return ipaddress.IPv4Network((network.network_address.ipv4_mapped, network.prefixlen - 96))


def metadata_inside(network: Network) -> list[Network]:
    """The metadata endpoints strictly inside ``network``: its excepts."""
    return [m.network for m in METADATA_ENDPOINTS
            if m.network.version == network.version and m.network.subnet_of(network) and m.network != network]


def _metadata_containing(network: Network) -> MetadataEndpoint | None:
    return next((m for m in METADATA_ENDPOINTS
                 if m.network.version == network.version and network.subnet_of(m.network)), None)


def parse_egress(items: Sequence[str]) -> tuple[str, ...]:
    """``--allow-egress 10.0.0.0/16`` (repeatable) -> the CIDRs, as the API server will store them."""
    cidrs: list[str] = []
    for item in items:
        try:
            network = ipaddress.ip_network(item.strip(), strict=True) if "/" in item else None
        except ValueError as error:
            raise UsageError(f"--allow-egress: {item!r} is not a network CIDR ({error}); e.g. 52.216.0.0/15 "
                             "or 0.0.0.0/0 for anywhere") from None
        if network is None:
            raise UsageError(f"--allow-egress: expected a CIDR such as 52.216.0.0/15 (one address: {item}/32), "
                             f"got {item!r}")
        ipv4 = _ipv4_form(network)
        metadata = _metadata_containing(ipv4 or network)
        if metadata is not None and ipv4 is not None:
            raise UsageError(f"--allow-egress: {item!r} is the IPv4-mapped form of {ipv4}, {metadata.what} "
                             f"({metadata.network}), which {metadata.serves} and stays closed to jobs")
        if ipv4 is not None:
            raise UsageError(f"--allow-egress: {item!r} is the IPv4-mapped IPv6 form of {ipv4}; write {ipv4} "
                             "(Kubernetes refuses IPv4-mapped addresses in a NetworkPolicy, KEP-4858)")
        if metadata is not None:
            raise UsageError(f"--allow-egress: {item!r} is {metadata.what} ({metadata.network}), which "
                             f"{metadata.serves} and stays closed to jobs; give the networks the job needs")
        if str(network) not in cidrs:
            cidrs.append(str(network))
    return tuple(cidrs)


def ip_block(cidr: str) -> dict[str, Any]:
    """A NetworkPolicy ipBlock for an allowed CIDR, the metadata endpoints inside it excepted."""
    network = ipaddress.ip_network(cidr)
    if _metadata_containing(network) is not None:  # parse_egress says so first; never build the hole
        raise UsageError(f"--allow-egress: {cidr} is a cloud metadata endpoint and stays closed to jobs")
    excepts = metadata_inside(network)
    return {"cidr": cidr, "except": [str(n) for n in excepts]} if excepts else {"cidr": cidr}
