"""The network rules: no public IP per node, and the Kubernetes API endpoint not open to all."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator

from components.policy.inputs import _deps, _get, _items, _key, _truthy
from components.policy.model import UNKNOWN, Limits, Resource, Violation, _v


def no_public_node_ips(resources: list[Resource], limits: Limits) -> Iterator[Violation]:
    """Nodes reach the internet through NAT; a public IP per node is an open door and a cost."""
    rule = "no-public-node-ips"
    by_key = {_key(r): r for r in resources}
    reported: set[str] = set()
    for r in resources:
        i, t = r["inputs"], r["type"]
        if t == "aws:ec2/launchTemplate:LaunchTemplate":
            for nic in _items(i.get("networkInterfaces")):
                if _truthy(nic.get("associatePublicIpAddress")):
                    yield _v(rule, r, "launch template gives nodes a public IP (associatePublicIpAddress)")
        elif t == "aws:eks/nodeGroup:NodeGroup":
            for key in _deps(r, "subnetIds"):
                subnet = by_key.get(key)
                if subnet and _truthy(subnet["inputs"].get("mapPublicIpOnLaunch")) and key not in reported:
                    reported.add(key)
                    yield _v(rule, subnet, f"node subnet of {r['name']} maps public IPs on launch")
        elif t == "gcp:container/cluster:Cluster":
            private = _get(i, "privateClusterConfig", "enablePrivateNodes")
            pools = [p for p in resources if p["type"] == "gcp:container/nodePool:NodePool"
                     and _key(r) in _deps(p, "cluster")]
            pools_private = pools and all(_truthy(_get(p["inputs"], "networkConfig", "enablePrivateNodes"))
                                          for p in pools)
            if private is not UNKNOWN and not _truthy(private) and not pools_private:
                yield _v(rule, r, "GKE nodes get public IPs; set privateClusterConfig.enablePrivateNodes: true")
        elif t == "gcp:container/nodePool:NodePool":
            if _get(i, "networkConfig", "enablePrivateNodes") is False:
                yield _v(rule, r, "node pool turns private nodes off (networkConfig.enablePrivateNodes: false)")
        elif t == "azure-native:containerservice:AgentPool":
            if _truthy(i.get("enableNodePublicIP")):
                yield _v(rule, r, "AKS pool gives nodes public IPs (enableNodePublicIP)")
        elif t == "azure-native:containerservice:ManagedCluster":
            for profile in _items(i.get("agentPoolProfiles")):
                if _truthy(profile.get("enableNodePublicIP")):
                    yield _v(rule, r, "AKS pool gives nodes public IPs (enableNodePublicIP)",
                             f"{r['name']}/{profile.get('name')}")



# ---------------------------------------------------------------- the cluster API endpoint


def _open_cidrs(cidrs: list) -> list[str]:
    """The CIDRs of an allow-list that let in the whole internet (0.0.0.0/0, ::/0)."""
    found = []
    for c in cidrs:
        try:
            if isinstance(c, str) and ipaddress.ip_network(c, strict=False).prefixlen == 0:
                found.append(c)
        except ValueError:
            continue
    return found


_NARROW = ("narrow network.publicAccessCidrs to your VPN or office range, or set network.privateOnly: true "
           "(a private endpoint; on AWS with network.privateAccessCidrs)")


def public_endpoint(resources: list[Resource], limits: Limits) -> Iterator[Violation]:
    """The Kubernetes API endpoint is not reachable from the whole internet.

    A stolen kubeconfig or an API server CVE is then exploitable from anywhere. Per cloud:
    EKS vpcConfig.publicAccessCidrs (default 0.0.0.0/0 while endpointPublicAccess, which defaults
    to true): https://docs.aws.amazon.com/eks/latest/userguide/cluster-endpoint.html
    GKE: a public endpoint (privateClusterConfig.enablePrivateEndpoint not true) without master
    authorized networks is open to all:
    https://cloud.google.com/kubernetes-engine/docs/how-to/authorized-networks
    AKS: a public API server without apiServerAccessProfile.authorizedIPRanges is open to all:
    https://learn.microsoft.com/azure/aks/api-server-authorized-ip-ranges
    """
    rule = "public-endpoint"
    for r in resources:
        i, t = r["inputs"], r["type"]
        if t == "aws:eks/cluster:Cluster":
            public = _get(i, "vpcConfig", "endpointPublicAccess")
            cidrs = _get(i, "vpcConfig", "publicAccessCidrs")
            if public is UNKNOWN or cidrs is UNKNOWN or (public is not None and not _truthy(public)):
                continue
            opened = _open_cidrs(_items(cidrs)) if cidrs else ["0.0.0.0/0 (the default)"]
            if opened:
                yield _v(rule, r, f"EKS API endpoint is public to {', '.join(opened)}; {_NARROW}")
        elif t == "gcp:container/cluster:Cluster":
            private = _get(i, "privateClusterConfig", "enablePrivateEndpoint")
            networks = i.get("masterAuthorizedNetworksConfig")
            if private is UNKNOWN or _truthy(private) or networks is UNKNOWN:
                continue
            if networks is None:
                yield _v(rule, r, f"GKE control plane is public with no master authorized networks; {_NARROW}")
                continue
            opened = _open_cidrs([b.get("cidrBlock") for b in _items(networks.get("cidrBlocks"))
                                  if isinstance(b, dict)])
            if opened:
                yield _v(rule, r, f"GKE master authorized networks let in {', '.join(opened)}; {_NARROW}")
        elif t == "azure-native:containerservice:ManagedCluster":
            profile = i.get("apiServerAccessProfile")
            if profile is UNKNOWN:
                continue
            profile = profile or {}
            private, ranges = profile.get("enablePrivateCluster"), profile.get("authorizedIPRanges")
            if private is UNKNOWN or _truthy(private) or ranges is UNKNOWN:
                continue
            if not ranges:
                yield _v(rule, r, f"AKS API server is public with no authorized IP ranges; {_NARROW}")
            elif opened := _open_cidrs(_items(ranges)):
                yield _v(rule, r, f"AKS authorized IP ranges let in {', '.join(opened)}; {_NARROW}")


def dns_endpoint_external(resources: list[Resource], limits: Limits) -> Iterator[Violation]:
    """GKE's DNS-based control-plane endpoint with allowExternalTraffic: reachable from any network.

    public_endpoint looks at the IP endpoints only; this one is the day-1 path from laptops and CI
    (network.dnsEndpoint) and is gated by IAM (container.clusters.connect), not by source address, so
    the threat restrictPublicEndpoint is about, a leaked credential used from anywhere, still applies
    (GCP review m2). Always advisory: the identity gate is GKE's documented design for it, and the way
    to also bind it to networks is a VPC Service Controls perimeter around the project, which GKE
    enforces on the DNS endpoint
    (https://cloud.google.com/kubernetes-engine/docs/concepts/network-isolation#dns-based_endpoint).
    """
    rule = "dns-endpoint-external"
    for r in resources:
        if r["type"] != "gcp:container/cluster:Cluster":
            continue
        external = _get(r["inputs"], "controlPlaneEndpointsConfig", "dnsEndpointConfig", "allowExternalTraffic")
        if external is not UNKNOWN and _truthy(external):
            yield _v(rule, r, "GKE's DNS endpoint takes calls from any network, checked by IAM only "
                              "(container.clusters.connect); to require your networks too, put the project in a "
                              "VPC Service Controls perimeter, or set network.dnsEndpoint: false and reach the "
                              "cluster through network.publicAccessCidrs or the VPC")

