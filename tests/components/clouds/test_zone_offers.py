"""A GPU offered in the stack's region but perhaps not in a pool's zone (a doubt of issue 23): refused
offline only where catalog/gpu_zones.yaml has a trusted list (GCP's A100s, GCP review F7:
tests/components/catalog/test_gpu_zones.py); elsewhere (AWS and Azure map zone names per account,
components/clouds/zone_offers.py says why) `torchfleet check` prints, per pool, the cloud CLI command
that answers for the account."""

from __future__ import annotations

import pytest

from components.clouds import preflight, zone_offers
from tests.components.spec.configs import config, ok
from tests.harness import STACKS_DIR
from torchfleet.preview.runner import stack_spec


@pytest.mark.parametrize(
    ("stack", "expected"),
    [
        (
            "aws-usw2",
            "a10g in zone us-west-2a (g5.xlarge): aws ec2 describe-instance-type-offerings --region us-west-2 "
            "--location-type availability-zone --filters Name=location,Values=us-west-2a "
            "Name=instance-type,Values=g5.xlarge",
        ),
        (
            "gcp-usc1",
            "l4 in zone us-central1-a (g2-standard-4): gcloud compute accelerator-types list "
            '--filter="zone:us-central1-a AND name:nvidia-l4"',
        ),
        (
            "azure-eus",
            "a100-80gb in zone 1 (Standard_NC24ads_A100_v4): az vm list-skus --location eastus --zone --all "
            "--size Standard_NC24ads_A100_v4 --output table",
        ),
    ],
)
def test_check_names_the_command_that_says_whether_each_pool_zone_has_its_machine(stack, expected):
    spec = stack_spec(STACKS_DIR / f"Pulumi.{stack}.yaml")
    lines = zone_offers.zone_checks(spec)
    assert len(lines) == len(spec.gpu_pools) and expected in lines
    assert f"offered: {expected}" in [n.what for n in preflight.needs(spec)]


@pytest.mark.parametrize("zone", ["us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f"])
def test_a_gpu_the_region_offers_is_accepted_in_each_of_its_zones(zone):
    # H100 has no trusted per-zone list (catalog/gpu_zones.yaml `unchecked`): no offline zone-level
    # refusal for it (the region-level one stays, test_cloud_limits).
    spec = ok(config("gcp", zones=[zone], gpuPools=[{"gpu": "h100", "maxNodes": 1}]))
    assert [pool.zone for pool in spec.gpu_pools] == [zone]


def test_the_local_stack_has_no_zone_lines():
    assert zone_offers.zone_checks(stack_spec(STACKS_DIR / "Pulumi.local.yaml")) == []
