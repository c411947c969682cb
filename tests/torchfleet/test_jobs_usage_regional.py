"""Issue 32: `list`/`status` price a job's hours in its node's region at its node's capacity type, from
components/catalog/spot_prices.yaml (gcp/us-central1 g2-standard-4: on demand 0.706832255, spot
0.397336, priced 2026-07-30), else at prices.yaml's on-demand list price with that basis said, and a spot
node without a row says "no spot price known for <machine> in <cloud>/<region>" and why."""

from __future__ import annotations

import pytest

from components import catalog
from components.catalog import prices
from tests.torchfleet.fake_cluster import NOW, job_object
from tests.torchfleet.test_jobs_usage import pod
from torchfleet.jobs import usage


def labels(machine="g2-standard-4", **extra):
    return lambda name: {usage.INSTANCE_TYPE: machine, **extra}


@pytest.mark.parametrize(("node", "region", "usd", "basis"), [
    ({usage.REGION: "us-central1", "cloud.google.com/gke-spot": "true"}, None, 0.397336,
     "spot, us-central1, snapshot of 2026-07-30"),
    ({usage.REGION: "us-central1"}, None, 0.706832255, "on-demand, us-central1, snapshot of 2026-07-30"),
    ({"cloud.google.com/gke-spot": "true"}, "europe-west4", 0.38986, "spot, europe-west4, snapshot of 2026-07-30"),
    # No row for n1-standard-8 (+ its T4, the job's GPU): prices.yaml's on-demand list price, said so.
    ({"machine": "n1-standard-8", usage.REGION: "us-central1", "cloud.google.com/gke-spot": "true"}, None,
     catalog.list_price("t4", "gcp", "n1-standard-8"),
     f"on-demand list price, {prices.of('gcp').region}, priced {prices.of('gcp').priced}"),
])
def test_hours_are_priced_in_the_nodes_region_at_its_capacity_type(node, region, usd, basis):
    used = usage.of_job(job_object(), [pod("w-0", started_h=2)], "gcp", labels(**node), NOW, region)
    assert used.usd == pytest.approx(2 * usd)
    assert used.basis == basis
    assert ("spot pays less" in used.text()) == ("list price" in basis)


@pytest.mark.parametrize(("key", "value"), list(usage.SPOT_LABELS.items()))
def test_each_clouds_spot_label_is_spot(key, value):
    assert usage.is_spot({key: value}) and not usage.is_spot({key: "x"}) and not usage.is_spot(None)


def test_a_spot_node_without_a_row_says_no_spot_price_is_known():
    node = labels("n1-standard-8", **{usage.REGION: "us-central1", "cloud.google.com/gke-spot": "true"})
    used = usage.of_job(job_object(), [pod("w-0", started_h=2), pod("w-1", started_h=1)], "gcp", node, NOW)
    said = ("no spot price known for n1-standard-8 in gcp/us-central1 (the dated source prices the N1 machine "
            "without its attached T4/V100)")
    assert used.no_spot_price == (said,) and used.text().endswith(f"; spot pays less; {said})")
    assert used.as_dict()["noSpotPrice"] == [said]
    # An on-demand node at its list price, or a spot node with a row, has nothing to say.
    on_demand = usage.of_job(job_object(), [pod("w-0", started_h=2)], "gcp",
                             labels("n1-standard-8", **{usage.REGION: "us-central1"}), NOW)
    spot_row = usage.of_job(job_object(), [pod("w-0", started_h=2)], "gcp",
                            labels(**{usage.REGION: "us-central1", "cloud.google.com/gke-spot": "true"}), NOW)
    assert on_demand.no_spot_price == () == spot_row.no_spot_price


def test_an_aws_spot_node_says_why_it_has_no_spot_price():
    node = labels("g4dn.xlarge", **{usage.REGION: "us-west-2", "eks.amazonaws.com/capacityType": "SPOT"})
    used = usage.of_job(job_object(), [pod("w-0", started_h=2)], "aws", node, NOW)
    assert used.no_spot_price == ("no spot price known for g4dn.xlarge in aws/us-west-2 (no dated public source of "
                                  "AWS spot prices was found)",)
