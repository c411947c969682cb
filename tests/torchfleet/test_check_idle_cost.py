"""Issue 32: `torchfleet check` prints what every cloud's stack costs with no job running (Azure's came
with issue 29): the managed control plane, the manager pool at minNodes, the NAT and the store, and the
month at 730 hours. Figures from torchfleet/cost.py's cited constants and components/catalog/prices.yaml."""

from __future__ import annotations

import dataclasses

import pytest

from components.catalog import prices
from tests.harness import STACKS_DIR
from tests.harness.placeholders import replaced_file
from torchfleet import cost
from torchfleet.cli import main
from torchfleet.preview.runner import stack_spec

AWS = STACKS_DIR / "Pulumi.aws-usw2.yaml"  # m6i.large minNodes 1, natGateways single, 2 zones
GCP = STACKS_DIR / "Pulumi.gcp-usc1.yaml"


def _by_what(estimate: cost.Estimate) -> dict[str, cost.Line]:
    return {line.what: line for line in estimate.lines}


def test_aws_idle_is_the_control_plane_one_manager_and_one_nat():
    idle = cost.idle_estimate(stack_spec(AWS))
    lines = _by_what(idle)
    assert lines["EKS control plane"].usd == 0.10
    assert lines["manager pool at minNodes"].nodes == 1
    assert lines["manager pool at minNodes"].usd == prices.machine_price("aws", "m6i.large") == 0.096
    assert lines["NAT gateway + its public IPv4"].nodes == 1
    assert round(idle.total, 4) == round(0.10 + 0.096 + 0.045 + 0.005, 4)
    assert [line.what for line in idle.unpriced] == ["EFS store"]


def test_aws_per_zone_nat_counts_a_gateway_per_zone_and_extended_support_is_named():
    spec = stack_spec(AWS)
    per_zone = dataclasses.replace(spec, network=dataclasses.replace(spec.network, nat="perZone"),
                                   kubernetes_support="EXTENDED")
    lines = _by_what(cost.idle_estimate(per_zone))
    assert lines["NAT gateway + its public IPv4"].nodes == len(spec.zones) == 2
    assert "0.60/hour" in lines["EKS extended support"].why_unpriced
    assert "EKS extended support" not in _by_what(cost.idle_estimate(spec))


def test_gcp_idle_is_the_management_fee_and_the_manager_the_nat_and_filestore_unpriced():
    spec = stack_spec(GCP)
    idle = cost.idle_estimate(spec)
    m = spec.manager_pool
    assert round(idle.total, 4) == round(0.10 + max(1, m.min_nodes) * prices.machine_price("gcp", m.machine_type), 4)
    store = f"{spec.storage.size_gb} GiB Filestore {spec.storage.tier}"
    assert {line.what for line in idle.unpriced} == {"Cloud NAT", store}


def test_the_local_stack_has_no_idle_cost():
    assert cost.idle_estimate(stack_spec(STACKS_DIR / "Pulumi.local.yaml")) is None


@pytest.mark.parametrize(("stack", "hourly"), [("aws-usw2", "0.25"), ("gcp-usc1", "0.23"), ("azure-eus", "0.68")])
def test_check_prints_the_idle_cost_per_hour_and_month(stack, hourly, capsys, tmp_path):
    path = STACKS_DIR / f"Pulumi.{stack}.yaml"
    assert main(["check", "--stack-file", str(replaced_file(stack, tmp_path))]) == 0  # no placeholder left
    err = capsys.readouterr().err
    assert f"{stack}, idle (no job running): at most {hourly} USD/hour" in err
    month = cost.idle_estimate(stack_spec(path)).total * cost.HOURS_PER_MONTH
    assert f"  per month (730 h): {month:.2f} USD" in err
