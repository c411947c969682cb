import ipaddress

import pytest

from components.clouds.aws.network import plan_subnets, subnet_tags


@pytest.mark.parametrize(
    ("cidr", "zones"),
    [
        ("10.0.0.0/16", ("us-west-2a", "us-west-2b")),
        ("10.0.0.0/16", ("us-west-2a", "us-west-2b", "us-west-2c", "us-west-2d")),
        ("172.16.0.0/20", ("us-east-1a", "us-east-1b", "us-east-1c")),
    ],
)
def test_subnet_plan_fits_the_vpc_without_overlap(cidr, zones):
    plans = plan_subnets(cidr, zones)
    vpc = ipaddress.ip_network(cidr)
    nets = [ipaddress.ip_network(c) for p in plans for c in (p.private_cidr, p.public_cidr)]
    assert [p.zone for p in plans] == list(zones)
    assert all(n.subnet_of(vpc) for n in nets)
    assert not any(a.overlaps(b) for i, a in enumerate(nets) for b in nets[i + 1 :])
    # Pods take VPC addresses (VPC CNI): the private subnets get the room.
    assert all(
        ipaddress.ip_network(p.private_cidr).num_addresses >= 4 * ipaddress.ip_network(p.public_cidr).num_addresses
        for p in plans
    )


def test_subnet_plan_refuses_a_letter_it_has_no_room_for():
    with pytest.raises(ValueError, match="letters a-f only"):
        plan_subnets("10.0.0.0/16", ("us-east-1g",))


def test_every_letter_of_the_layout_fits_without_overlap():
    zones = tuple(f"us-east-1{x}" for x in "abcdef")
    plans = plan_subnets("10.0.0.0/16", zones)
    nets = [ipaddress.ip_network(c) for p in plans for c in (p.private_cidr, p.public_cidr)]
    assert not any(a.overlaps(b) for i, a in enumerate(nets) for b in nets[i + 1 :])


@pytest.mark.parametrize("cidr", ["10.0.0.0/16", "172.16.0.0/20"])
def test_a_zone_keeps_its_ranges_whatever_the_list_holds(cidr):
    """Issue 29: CIDRs followed the list position, so removing or reordering a zone gave us-west-2b
    us-west-2a's old range (a subnet replacement that collides). Keyed on the letter now."""
    ab = {p.zone: p for p in plan_subnets(cidr, ("us-west-2a", "us-west-2b"))}
    ba = {p.zone: p for p in plan_subnets(cidr, ("us-west-2b", "us-west-2a"))}
    only_b = {p.zone: p for p in plan_subnets(cidr, ("us-west-2b",))}
    bcd = {p.zone: p for p in plan_subnets(cidr, ("us-west-2c", "us-west-2b", "us-west-2d"))}
    assert ab == ba
    assert only_b["us-west-2b"] == ab["us-west-2b"] == bcd["us-west-2b"]


def test_zones_in_letter_order_keep_the_ranges_the_position_plan_gave():
    """Stacks deployed before issue 29 with zones a, b[, c, d] in that order see no subnet change."""
    plans = plan_subnets("10.0.0.0/16", ("us-west-2a", "us-west-2b", "us-west-2c", "us-west-2d"))
    assert [p.private_cidr for p in plans] == ["10.0.0.0/19", "10.0.32.0/19", "10.0.64.0/19", "10.0.96.0/19"]
    assert [p.public_cidr for p in plans] == ["10.0.128.0/21", "10.0.136.0/21", "10.0.144.0/21", "10.0.152.0/21"]


def test_subnet_tags_for_load_balancers():
    assert subnet_tags("c", public=True) == {"kubernetes.io/role/elb": "1", "kubernetes.io/cluster/c": "shared"}
    assert subnet_tags("c", public=False)["kubernetes.io/role/internal-elb"] == "1"


def test_nodes_get_no_public_ips(aws_example):
    subnets = aws_example.of_type("aws:ec2/subnet:Subnet")
    assert len(subnets) == 4
    assert all(s.inputs["mapPublicIpOnLaunch"] is False for s in subnets)
    private = [s for s in subnets if "-private-" in s.name]
    assert sorted(s.inputs["availabilityZone"] for s in private) == ["us-west-2a", "us-west-2b"]


@pytest.mark.parametrize(("fixture", "nat_count"), [("aws_example", 1), ("aws_three_zones", 3)])
def test_nat_layout_follows_config(request, fixture, nat_count):
    result = request.getfixturevalue(fixture)
    assert len(result.of_type("aws:ec2/natGateway:NatGateway")) == nat_count
    private_routes = [r for r in result.of_type("aws:ec2/routeTable:RouteTable") if "-private-" in r.name]
    assert private_routes and all(r.inputs["routes"][0]["natGatewayId"] for r in private_routes)


@pytest.mark.parametrize(("fixture", "region"), [("aws_example", "us-west-2"), ("aws_three_zones", "us-east-1")])
def test_s3_is_reached_through_a_gateway_endpoint_not_nat(request, fixture, region):
    """Review of issue 21: with no S3 gateway endpoint, Mountpoint's dataset reads and ECR's layer downloads
    went through the NAT gateway, charged per GB; a gateway endpoint on every private route table is free."""
    result = request.getfixturevalue(fixture)
    (endpoint,) = result.of_type("aws:ec2/vpcEndpoint:VpcEndpoint")
    assert endpoint.inputs["serviceName"] == f"com.amazonaws.{region}.s3"
    assert endpoint.inputs["vpcEndpointType"] == "Gateway"
    assert endpoint.parent == "torchfleet:clouds:AwsNetwork::" + endpoint.name.removesuffix("-s3")
    private_routes = [r for r in result.of_type("aws:ec2/routeTable:RouteTable") if "-private-" in r.name]
    assert sorted(endpoint.inputs["routeTableIds"]) == sorted(f"{r.name}-id" for r in private_routes)
    assert "policy" not in endpoint.inputs  # the default; pods' access is their IAM role's


def test_the_endpoint_needs_a_region():
    from components.clouds.aws.s3_endpoint import service_name

    with pytest.raises(ValueError, match="aws:region"):
        service_name("")


def test_subnets_are_replaced_delete_first_and_the_check_sees_a_create_first_one(aws_example):
    """A VPC holds one subnet per range: a subnet replaced create-first collides (InvalidSubnet.Conflict).
    Before issue 29 the collision check counted subnets as randomly named and could not see it."""
    from torchfleet.preview import plans

    subnets = aws_example.of_type("aws:ec2/subnet:Subnet")
    assert all(s.options["deleteBeforeReplace"] for s in subnets)
    assert plans.replace_collisions(subnets) == []
    create_first = type(subnets[0])(**{**subnets[0].__dict__, "options": {**subnets[0].options,
                                                                           "deleteBeforeReplace": False}})
    assert plans.replace_collisions([create_first]) == [
        f"{create_first.key} ({create_first.inputs['vpcId']}/{create_first.inputs['cidrBlock']})"]
