"""Resource group, virtual network and its two subnets (nodes; the file share's private endpoint)."""

from __future__ import annotations

import pulumi
from pulumi_azure_native import network, resources

from components.clouds.azure import naming
from components.spec import PlatformSpec


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
        # Subnets of one virtual network are updated one at a time, or ARM answers
        # "AnotherOperationInProgress": chain them.
        self.endpoint_subnet = self._create_subnet(
            name, "endpoints", self.endpoint_cidr, depends_on=[self.node_subnet]
        )
        self.register_outputs({"vnetId": self.vnet.id, "nodeSubnetId": self.node_subnet.id})

    def _create_subnet(self, name: str, role: str, cidr: str, depends_on: list[pulumi.Resource]) -> network.Subnet:
        return network.Subnet(
            f"{name}-{role}",
            resource_group_name=self.resource_group.name,
            virtual_network_name=self.vnet.name,
            address_prefix=cidr,
            # A private subnet: no implicit outbound IP. AKS nodes leave through the cluster's
            # standard load balancer (outboundType loadBalancer), the endpoint needs no egress.
            # https://learn.microsoft.com/azure/virtual-network/ip-services/default-outbound-access
            default_outbound_access=False,
            opts=pulumi.ResourceOptions(parent=self, depends_on=depends_on),
        )
