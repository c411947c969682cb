"""Resource group, virtual network and its three subnets (nodes; the file share's private endpoint,
behind a network security group that takes NFS from the node subnet only; the API server's)."""

from __future__ import annotations

import pulumi
from pulumi_azure_native import network, resources

from components.clouds.azure import naming
from components.spec import PlatformSpec

NFS_PORT = 2049


def endpoint_security_rules(node_cidr: str, endpoint_cidr: str) -> list[dict]:
    """Inbound to the private endpoint: NFS (TCP 2049) from the node subnet, nothing else.

    The defaults of every NSG allow all traffic from the virtual network (AllowVnetInBound, 65000),
    so anything added to the network later (a peering, a VPN, another subnet) would reach the share;
    the deny below, before the defaults, stops that. Pods reach it only through their node: Azure
    CNI Overlay SNATs pod traffic leaving for the virtual network to the node's address
    (aks-docs concepts-network-azure-cni-overlay.md: "Traffic from a pod to any destination outside the
    pod CIDR block uses SNAT to set the source IP to the IP of the node"), and the kubelet mounts from
    the node itself.
    https://learn.microsoft.com/azure/virtual-network/network-security-groups-overview#default-security-rules
    """
    return [
        {
            "name": "nfs-from-nodes",
            "priority": 100,
            "direction": "Inbound",
            "access": "Allow",
            "protocol": "Tcp",
            "source_address_prefix": node_cidr,
            "source_port_range": "*",
            "destination_address_prefix": endpoint_cidr,
            "destination_port_range": str(NFS_PORT),
        },
        {
            "name": "deny-everything-else",
            "priority": 4096,
            "direction": "Inbound",
            "access": "Deny",
            "protocol": "*",
            "source_address_prefix": "*",
            "source_port_range": "*",
            "destination_address_prefix": "*",
            "destination_port_range": "*",
        },
    ]


def vnet_options(parent: pulumi.Resource) -> pulumi.ResourceOptions:
    # Subnets are their own resources; without this, every update of the virtual network would
    # try to remove them (its `subnets` input is empty).
    return pulumi.ResourceOptions(parent=parent, ignore_changes=["subnets"])


class AzureNetwork(pulumi.ComponentResource):
    """The cluster's resource group and a private network: no node or endpoint gets a public IP."""

    def __init__(self, name: str, spec: PlatformSpec, opts: pulumi.ResourceOptions | None = None):
        super().__init__("torchfleet:clouds:AzureNetwork", name, None, opts)
        cidr = spec.network.cidr
        self.node_cidr = naming.node_subnet_cidr(cidr)
        self.endpoint_cidr = naming.endpoint_subnet_cidr(cidr)
        self.resource_group = resources.ResourceGroup(
            f"{name}-rg", location=spec.region, tags=naming.tags(spec.stack), opts=pulumi.ResourceOptions(parent=self)
        )
        self.vnet = network.VirtualNetwork(
            f"{name}-vnet",
            resource_group_name=self.resource_group.name,
            location=spec.region,
            address_space={"address_prefixes": [cidr]},
            tags=naming.tags(spec.stack),
            opts=vnet_options(self),
        )
        self.node_subnet = self._create_subnet(name, "nodes", self.node_cidr, depends_on=[])
        self.endpoint_nsg = network.NetworkSecurityGroup(
            f"{name}-endpoints-nsg",
            resource_group_name=self.resource_group.name,
            location=spec.region,
            security_rules=endpoint_security_rules(self.node_cidr, self.endpoint_cidr),
            tags=naming.tags(spec.stack),
            opts=pulumi.ResourceOptions(parent=self),
        )
        # Subnets of one virtual network are updated one at a time, or ARM answers
        # "AnotherOperationInProgress": chain them.
        self.endpoint_subnet = self._create_subnet(
            name,
            "endpoints",
            self.endpoint_cidr,
            depends_on=[self.node_subnet],
            # An NSG binds a private endpoint only where the subnet enables network policies for
            # it ("By default, network policies are disabled for a subnet ... To use network
            # policies like user-defined routes and network security group support, network policy
            # support must be enabled for the subnet": azure-docs articles/private-link/
            # disable-private-endpoint-network-policy.md); the SDK's default is Disabled.
            network_security_group={"id": self.endpoint_nsg.id},
            private_endpoint_network_policies="NetworkSecurityGroupEnabled",
        )
        # API Server VNet Integration (aks-docs api-server-vnet-integration.md, GA in API 2025-09-01's
        # apiServerAccessProfile.enableVnetIntegration/subnetId): the API server's internal load balancer sits
        # in this subnet, delegated to AKS and used by nothing else; nodes reach the API privately, and the
        # public endpoint (authorized ranges) can be turned off and on later without a new cluster.
        self.apiserver_cidr = naming.apiserver_subnet_cidr(cidr)
        self.apiserver_subnet = self._create_subnet(
            name,
            "apiserver",
            self.apiserver_cidr,
            depends_on=[self.endpoint_subnet],
            delegations=[{"name": "aks", "service_name": "Microsoft.ContainerService/managedClusters"}],
        )
        self.register_outputs({"vnetId": self.vnet.id, "nodeSubnetId": self.node_subnet.id})

    def _create_subnet(
        self, name: str, role: str, cidr: str, depends_on: list[pulumi.Resource], **extra: object
    ) -> network.Subnet:
        return network.Subnet(
            f"{name}-{role}",
            resource_group_name=self.resource_group.name,
            virtual_network_name=self.vnet.name,
            address_prefix=cidr,
            # A private subnet: no implicit outbound IP. AKS nodes leave through the cluster's
            # standard load balancer (outboundType loadBalancer), the endpoint needs no egress.
            # https://learn.microsoft.com/azure/virtual-network/ip-services/default-outbound-access
            default_outbound_access=False,
            **extra,
            opts=pulumi.ResourceOptions(parent=self, depends_on=depends_on),
        )
