"""The S3 gateway endpoint: the private subnets reach S3 in the stack's region without the NAT gateway.

Without it, every byte a node reads from S3 goes through NAT, which AWS charges per GB processed
(https://aws.amazon.com/vpc/pricing/): Mountpoint reads of a dataset (torchfleet:datasets, a few TB a
job) and the training image's layers, which ECR serves from S3
(https://docs.aws.amazon.com/AmazonECR/latest/userguide/vpc-endpoints.html#ecr-setting-up-s3-gateway).
Gateway endpoints have no hourly or per-GB charge
(https://docs.aws.amazon.com/vpc/latest/privatelink/gateway-endpoints.html), so every stack gets one,
with or without datasets. It adds a route for the S3 prefix list to each private route table; the
more specific route wins over 0.0.0.0/0 to NAT. The endpoint's default policy (full access) is kept:
what a pod may read is still decided by its IAM role (components/clouds/aws/datasets.py), and a
narrower endpoint policy would also have to list the buckets ECR serves layers from.
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws


def service_name(region: str) -> str:
    if not region:
        raise ValueError("aws:region is required for the S3 gateway endpoint's service name")
    return f"com.amazonaws.{region}.s3"


def create_s3_gateway_endpoint(
    name: str,
    vpc_id: pulumi.Input[str],
    route_table_ids: list[pulumi.Input[str]],
    region: str,
    opts: pulumi.ResourceOptions,
) -> aws.ec2.VpcEndpoint:
    return aws.ec2.VpcEndpoint(
        name,
        vpc_id=vpc_id,
        service_name=service_name(region),
        vpc_endpoint_type="Gateway",
        route_table_ids=route_table_ids,
        tags={"Name": name},
        # one endpoint per service on a route table: a replacement created beside the old one would fail
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(delete_before_replace=True)),
    )
