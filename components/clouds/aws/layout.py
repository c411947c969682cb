"""Where each zone's subnets sit in the VPC, keyed on the zone's letter, never on its place in the list.

Pure Python (no pulumi import): spec validation and the network module share it.

A subnet's CIDR cannot change in place (EC2 has no call for it; the provider's aws_subnet
cidr_block is ForceNew, torchfleet/preview/force_new/aws.yaml), and a replacement created before the
old subnet is deleted collides with it (InvalidSubnet.Conflict). When the CIDR followed the zone's
position in torchfleet:zones, removing or reordering a zone moved every later zone's range and
replaced its subnets (and everything in them). Keyed on the letter, us-west-2b has the same ranges
whatever else the list holds.

Layout of a VPC /p (p is /16 to /20, spec/cloud_limits.network_range):
- private (nodes and pods: the VPC CNI gives every pod a VPC address), a /(p+2) each:
  letters a-d the four quarters of the lower half, e-f the upper two quarters of the upper half;
- public (NAT gateways, load balancers), a /(p+5) each: letters a-h in the first two quarters of
  the upper half.
Stacks whose zones were listed a, b, c, d in that order keep the ranges the position-keyed plan gave them.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

# us-east-1 has the most letters of any region in the catalog (a-f: catalog/regions.yaml).
PRIVATE_LETTERS = "abcdef"
PUBLIC_LETTERS = "abcdefgh"


@dataclass(frozen=True)
class SubnetPlan:
    zone: str
    private_cidr: str
    public_cidr: str


def zone_letter(zone: str) -> str:
    """The letter AWS appends to the region: us-west-2a -> a."""
    return zone[-1:]


def letter_problem(zone: str) -> str | None:
    letter = zone_letter(zone)
    if letter not in PRIVATE_LETTERS:
        return f"zone {zone!r}: the VPC layout (components/clouds/aws/layout.py) has subnets for letters " \
               f"{PRIVATE_LETTERS[0]}-{PRIVATE_LETTERS[-1]} only"
    return None


def plan_zone(vpc_cidr: str, zone: str) -> SubnetPlan:
    net = ipaddress.ip_network(vpc_cidr)
    if (why := letter_problem(zone)) is not None:
        raise ValueError(why)
    i = PRIVATE_LETTERS.index(zone_letter(zone))
    lower, upper = net.subnets(prefixlen_diff=1)
    quarters = [*lower.subnets(prefixlen_diff=2), *list(upper.subnets(prefixlen_diff=2))[2:]]
    public = list(upper.subnets(new_prefix=min(net.prefixlen + 5, 28)))
    return SubnetPlan(zone, str(quarters[i]), str(public[PUBLIC_LETTERS.index(zone_letter(zone))]))


def plan_subnets(vpc_cidr: str, zones: tuple[str, ...]) -> list[SubnetPlan]:
    """One large private and one small public subnet per zone, in the order of `zones`."""
    return [plan_zone(vpc_cidr, z) for z in zones]
