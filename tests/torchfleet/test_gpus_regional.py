"""`torchfleet gpus --stack S` / `--cloud C --region R` (issue 32): the region's on-demand and spot prices
from components/catalog/spot_prices.yaml beside the list price, dated in the footer; a machine without a
row shows "-" and the footer names the file and the region; bad combinations exit 2 naming the flag."""

from __future__ import annotations

import json

import pytest

from torchfleet.cli import main


def run(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["gpus", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_stack_shows_its_regions_on_demand_and_spot_prices(capsys):
    code, out, _ = run(capsys, "--stack", "gcp-usc1", "--gpu", "l4")
    assert code == 0
    rows = {line.split()[2]: line.split() for line in out.splitlines()[1:] if line.startswith("l4 ")}
    assert out.splitlines()[0].split()[-2:] == ["ON-DEMAND", "SPOT"]
    assert rows["g2-standard-4"][-2:] == ["0.7068", "0.2799"]
    assert rows["g2-standard-8"][-2:] == ["-", "-"]
    assert "ON-DEMAND, SPOT: us-central1 prices of 2025-03-06 (https://github.com/Cyclenerd/" in out
    assert "g2-standard-8, " in out and "no gcp/us-central1 row in components/catalog/spot_prices.yaml" in out


def test_json_carries_the_regional_prices_and_their_date(capsys):
    code, out, _ = run(capsys, "--cloud", "gcp", "--region", "europe-west4", "--gpu", "l4", "-o", "json")
    found = {r["machine"]: r for r in json.loads(out)}
    assert code == 0
    assert (found["g2-standard-4"]["regionSpotUsdPerHour"], found["g2-standard-4"]["regionPriced"]) == (0.253236,
                                                                                                         "2025-03-06")
    assert found["g2-standard-8"]["regionSpotUsdPerHour"] is None and found["g2-standard-8"]["region"] == "europe-west4"


def test_a_region_without_rows_says_so_for_every_machine(capsys):
    code, out, _ = run(capsys, "--stack", "aws-usw2", "--gpu", "t4")
    assert code == 0 and "no aws/us-west-2 row in components/catalog/spot_prices.yaml" in out


def test_without_a_region_the_table_is_unchanged(capsys):
    _, out, _ = run(capsys, "--cloud", "gcp", "--gpu", "l4")
    assert "SPOT" not in out and "spot_prices.yaml" not in out


@pytest.mark.parametrize(("argv", "message"), [
    (["--region", "us-central1"], "--region us-central1: give --cloud too"),
    (["--cloud", "gcp", "--region", "mars-1"], "--region: 'mars-1' is not a gcp region"),
    (["--stack", "gcp-usc1", "--cloud", "gcp"], "--stack: gives the cloud and region itself"),
    (["--stack", "local"], "--stack local: a local stack has no cloud prices"),
])
def test_bad_region_options_exit_2_naming_the_flag(argv, message, capsys):
    code, _, err = run(capsys, *argv)
    assert code == 2 and message in err
