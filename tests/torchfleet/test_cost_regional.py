"""Issue 32: a job is priced in its stack's region at its capacity type. Spot pools pay the dated spot
price of components/catalog/spot_prices.yaml; a machine or region without a row there is priced at the
on-demand list price of prices.yaml with a note naming the machine, the region and the file, never
silently. The figures are worked out here from spot_prices.yaml (gcp/us-central1: g2-standard-4
on demand 0.706832255, spot 0.397336, priced 2026-07-30; europe-west4 spot 0.38986)."""

from __future__ import annotations

import time
from unittest import mock

import pytest
import yaml

from torchfleet import cost
from torchfleet.cli import main
from torchfleet.jobs import limits
from torchfleet.jobs import spec as jobspec
from torchfleet.jobs import target as targets

IMAGE = ["--image", "registry.example.com/t:1"]
CMD = ["--", "python", "train.py"]


@pytest.fixture
def no_cluster():
    with mock.patch("torchfleet.jobs.kubeconfig.connect", side_effect=RuntimeError("connected")) as connect, \
         mock.patch("torchfleet.jobs.target.read_stack_outputs", side_effect=RuntimeError("pulumi")):
        yield connect


def dry_run(capsys, *argv: str) -> tuple[str, str]:
    capsys.readouterr()
    assert main(["submit", "j", *argv, *IMAGE, "--dry-run", *CMD]) == 0
    return capsys.readouterr()


def request(stack: str, gpu: str, nodes: str):
    t = targets.from_stack(stack)
    return t, jobspec.build_request(t, name="j", gpu=gpu, nodes=nodes, gpus_per_node=None,
                                    image="registry.example.com/t:1", command=["python", "train.py"])


def test_a_spot_job_is_priced_at_its_regions_spot_price_with_the_date(capsys, no_cluster):
    # gcp-usc1's l4 pool is spot (the default) on g2-standard-4. The old code: 4 x 0.70683 = 2.83.
    _, err = dry_run(capsys, "--stack", "gcp-usc1", "--gpu", "l4", "--nodes", "4")
    assert "at most 1.59 USD/hour" in err  # 4 x 0.397336
    assert "4 x g2-standard-4 at 0.3973 (spot, us-central1, snapshot of 2026-07-30)" in err
    assert "spot_prices.yaml" not in err  # priced from its own row: no note


def test_max_cost_counts_the_spot_price(capsys, no_cluster):
    before = time.time()
    out, err = dry_run(capsys, "--stack", "gcp-usc1", "--gpu", "l4", "--nodes", "4", "--max-cost", "10")
    stops = [int(e["value"]) for doc in yaml.safe_load_all(out) for e in _envs(doc) if e["name"] == limits.ENV_STOP_AT]
    assert stops and stops[0] == pytest.approx(before + 10 / (4 * 0.397336) * 3600, abs=5)
    assert "--max-cost 10 USD at most 1.59 USD/hour (spot, us-central1, snapshot of 2026-07-30)" in err


def test_a_region_without_a_row_is_a_labelled_fallback_naming_the_file_and_region(capsys, no_cluster):
    _, err = dry_run(capsys, "--stack", "aws-usw2", "--gpu", "t4", "--nodes", "2:8", "--max-cost", "10")
    assert ("no spot price known for g4dn.xlarge in aws/us-west-2 (no dated public source of AWS spot prices was "
            "found); priced at the on-demand list price of us-east-1 (components/catalog/prices.yaml)") in err
    assert "(on-demand list price, components/catalog/prices.yaml)" in err


def test_a_spot_pool_without_a_spot_row_in_the_price_list_region_says_it_is_a_ceiling(capsys, no_cluster):
    # gcp-usc1's t4 pools (n1-standard-8 + T4) have no spot_prices.yaml row, on purpose (its source prices the
    # N1 machine without the GPU); prices.yaml is us-central1.
    _, err = dry_run(capsys, "--stack", "gcp-usc1", "--gpu", "t4", "--nodes", "2")
    assert ("no spot price known for n1-standard-8 in gcp/us-central1 (the dated source prices the N1 machine "
            "without its attached T4/V100); spot pool priced at the on-demand list price, a ceiling") in err


def test_capacity_type_follows_the_pools_the_job_can_land_on():
    assert cost.job_is_spot(*request("aws-usw2", "t4", "2"))  # spot: true pools
    assert not cost.job_is_spot(*request("aws-usw2", "a10g", "1"))  # spot: false: on demand
    t = targets.defaults("gcp")
    req = jobspec.build_request(t, name="j", gpu="l4", nodes="1", gpus_per_node=None,
                                image="registry.example.com/t:1", command=["python", "train.py"])
    assert not cost.job_is_spot(t, req)  # no stack: no pools known, on demand


@pytest.mark.parametrize(("region", "spot", "usd", "regional"), [
    ("us-central1", True, 0.397336, "spot, us-central1, snapshot of 2026-07-30"),
    ("us-central1", False, 0.706832255, "on-demand, us-central1, snapshot of 2026-07-30"),
    ("europe-west4", True, 0.38986, "spot, europe-west4, snapshot of 2026-07-30"),
    ("europe-west4", False, 0.742916046, "on-demand, europe-west4, snapshot of 2026-07-30"),
    ("asia-east1", True, 0.70683, None),  # no row: prices.yaml's on-demand list price
    (None, True, 0.70683, None),  # no stack region
])
def test_job_estimate_reads_the_region_and_capacity_type(region, spot, usd, regional):
    line = cost.job_estimate("j", "gcp", "l4", 1, ["g2-standard-4"], region, spot)
    assert (line.usd, line.regional, line.spot) == (usd, regional, spot)


def _envs(doc):
    found, todo = [], [doc]
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            found += item.get("env", []) if isinstance(item.get("env"), list) else []
            todo += item.values()
        elif isinstance(item, list):
            todo += item
    return found


def test_the_dry_run_says_an_old_snapshots_age(capsys, no_cluster):
    import datetime

    from components.catalog import spot_prices

    _, err = dry_run(capsys, "--stack", "gcp-usc1", "--gpu", "l4", "--nodes", "4")
    age = (datetime.date.today() - datetime.date(2026, 7, 30)).days  # computed, as the CLI does
    assert (f"the 2026-07-30 spot price snapshot is {age} days old" in err) == (age > spot_prices.STALE_DAYS)
    for today, line in ((datetime.date(2026, 8, 15), None),  # a fresh snapshot: no age line
                        (datetime.date(2027, 3, 1), "the 2026-07-30 spot price snapshot is 214 days old")):
        with mock.patch.object(spot_prices.datetime, "date", wraps=datetime.date) as date:
            date.today.return_value = today
            date.fromisoformat = datetime.date.fromisoformat
            _, err = dry_run(capsys, "--stack", "gcp-usc1", "--gpu", "l4", "--nodes", "4")
        assert (line in err) if line else ("days old" not in err)
