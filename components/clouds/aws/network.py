"""The VPC: private node subnets in every zone (no public IPs on nodes), public subnets for NAT
and load balancers, and the subnet tags the EKS load balancer controllers expect."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from components.clouds.aws.layout import SubnetPlan, plan_subnets  # noqa: F401 (re-exported)
from components.clouds.aws.s3_endpoint import create_s3_gateway_endpoint
from components.spec import PlatformSpec


def subnet_tags(cluster_name: str, public: bool) -> dict[str, str]:
    # https://docs.aws.amazon.com/eks/latest/userguide/network-load-balancing.html (subnet tagging)
    role = "kubernetes.io/role/elb" if public else "kubernetes.io/role/internal-elb"
    return {role: "1", f"kubernetes.io/cluster/{cluster_name}": "shared"}


class AwsNetwork(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        spec: PlatformSpec,
        cluster_name: str,
        cluster_zones: tuple[str, ...],
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("torchfleet:clouds:AwsNetwork", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=spec.network.cidr,
            enable_dns_hostnames=True,  # EFS mount targets and private endpoints resolve by DNS
            enable_dns_support=True,
            tags={"Name": f"{cluster_name}-vpc"},
            opts=child,
        )
        igw = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=self.vpc.id, opts=child)
        public_rt = aws.ec2.RouteTable(
            f"{name}-public-rt",
            vpc_id=self.vpc.id,
            routes=[{"cidr_block": "0.0.0.0/0", "gateway_id": igw.id}],
            opts=child,
        )
        self.private_subnets: dict[str, aws.ec2.Subnet] = {}
        # What nodes need to reach the internet (ECR, STS, quay.io): node groups wait for it on
        # create, and on destroy it goes only after them (AWS review m1).
        self.egress: list[pulumi.Resource] = []
        nat_ids: dict[str, pulumi.Output[str]] = {}
        # A VPC holds one subnet per CIDR: a replacement created first would fail InvalidSubnet.Conflict.
        subnet_options = pulumi.ResourceOptions(parent=self, delete_before_replace=True)
        private_rts: list[aws.ec2.RouteTable] = []
        # The single NAT sits in the first of the cluster's zones in letter order: the cluster keeps
        # those zones for good (cluster.py), so adding, removing or reordering zones never moves it.
        nat_zone = sorted(cluster_zones)[0]
        plans = plan_subnets(spec.network.cidr, spec.zones)
        for plan in sorted(plans, key=lambda p: p.zone != nat_zone):  # the NAT's zone first
            public = aws.ec2.Subnet(
                f"{name}-public-{plan.zone}",
                vpc_id=self.vpc.id,
                cidr_block=plan.public_cidr,
                availability_zone=plan.zone,
                map_public_ip_on_launch=False,  # only the NAT gateways' Elastic IPs are public
                tags={"Name": f"{cluster_name}-public-{plan.zone}", **subnet_tags(cluster_name, public=True)},
                opts=subnet_options,
            )
            aws.ec2.RouteTableAssociation(
                f"{name}-public-{plan.zone}-rta", subnet_id=public.id, route_table_id=public_rt.id, opts=child
            )
            if spec.network.nat == "perZone" or plan.zone == nat_zone:
                nat_ids[plan.zone] = self._create_nat(f"{name}-nat-{plan.zone}", public, igw)
            private = aws.ec2.Subnet(
                f"{name}-private-{plan.zone}",
                vpc_id=self.vpc.id,
                cidr_block=plan.private_cidr,
                availability_zone=plan.zone,
                map_public_ip_on_launch=False,
                tags={"Name": f"{cluster_name}-private-{plan.zone}", **subnet_tags(cluster_name, public=False)},
                opts=subnet_options,
            )
            nat = nat_ids.get(plan.zone) or nat_ids[nat_zone]
            rt = aws.ec2.RouteTable(
                f"{name}-private-{plan.zone}-rt",
                vpc_id=self.vpc.id,
                routes=[{"cidr_block": "0.0.0.0/0", "nat_gateway_id": nat}],
                opts=child,
            )
            self.egress.append(
                aws.ec2.RouteTableAssociation(
                    f"{name}-private-{plan.zone}-rta", subnet_id=private.id, route_table_id=rt.id, opts=child
                )
            )
            self.private_subnets[plan.zone] = private
            private_rts.append(rt)
        self.s3_endpoint = create_s3_gateway_endpoint(
            f"{name}-s3", self.vpc.id, [rt.id for rt in private_rts], spec.region or "", child
        )
        self.register_outputs({"vpcId": self.vpc.id})

    def _create_nat(self, name: str, public: aws.ec2.Subnet, igw: aws.ec2.InternetGateway) -> pulumi.Output[str]:
        child = pulumi.ResourceOptions(parent=self, depends_on=[igw])
        eip = aws.ec2.Eip(f"{name}-eip", domain="vpc", opts=child)
        nat = aws.ec2.NatGateway(name, allocation_id=eip.id, subnet_id=public.id, opts=child)
        self.egress.append(nat)
        return nat.id
