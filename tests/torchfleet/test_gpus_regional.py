"""`torchfleet gpus --stack S` / `--cloud C --region R` (issue 32): the region's on-demand and spot prices
from components/catalog/spot_prices.yaml beside the list price, dated in the footer; a machine without a
row shows "-" and the footer says "no spot price known for <machines> in <cloud>/<region>" and why; bad
combinations exit 2 naming the flag."""

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
    assert rows["g2-standard-4"][-2:] == ["0.7068", "0.3973"]
    assert rows["g2-standard-8"][-2:] == ["0.8536", "0.4799"]
    assert "ON-DEMAND, SPOT: us-central1 prices, a snapshot of 2026-07-30 (https://github.com/Cyclenerd/" in out
    assert "no spot price known" not in out  # every L4 machine has a row there


def test_a_machine_without_a_row_shows_a_dash_and_why(capsys):
    code, out, _ = run(capsys, "--stack", "gcp-usc1", "--gpu", "t4")
    rows = {line.split()[2]: line.split() for line in out.splitlines()[1:] if line.startswith("t4 ")}
    assert code == 0 and rows["n1-standard-8"][-2:] == ["-", "-"]
    assert ("no spot price known for n1-standard-4, n1-standard-8, n1-standard-16, n1-standard-32 in gcp/us-central1 "
            "(the dated source prices the N1 machine without its attached T4/V100)") in out


def test_json_carries_the_regional_prices_and_their_date(capsys):
    code, out, _ = run(capsys, "--cloud", "gcp", "--region", "europe-west4", "--gpu", "l4", "-o", "json")
    found = {r["machine"]: r for r in json.loads(out)}
    assert code == 0
    assert (found["g2-standard-4"]["regionSpotUsdPerHour"], found["g2-standard-4"]["regionPriced"]) == (0.38986,
                                                                                                         "2026-07-30")
    assert (found["g2-standard-8"]["regionSpotUsdPerHour"], found["g2-standard-8"]["region"]) == (0.47082,
                                                                                                 "europe-west4")
    _, out, _ = run(capsys, "--cloud", "gcp", "--region", "europe-west4", "--gpu", "t4", "-o", "json")
    assert all(r["regionSpotUsdPerHour"] is None and r["regionPriced"] is None for r in json.loads(out))


def test_a_region_without_rows_says_so_for_every_machine(capsys):
    code, out, _ = run(capsys, "--stack", "aws-usw2", "--gpu", "t4")
    assert code == 0 and ("no spot price known for g4dn.xlarge, g4dn.2xlarge, g4dn.4xlarge, g4dn.8xlarge, "
                          "g4dn.16xlarge, g4dn.12xlarge, g4dn.metal in aws/us-west-2 (no dated public source of AWS "
                          "spot prices was found)") in out


def test_without_a_region_the_table_is_unchanged(capsys):
    _, out, _ = run(capsys, "--cloud", "gcp", "--gpu", "l4")
    assert "SPOT" not in out and "spot_prices.yaml" not in out


@pytest.mark.parametrize(("argv", "message"), [
    (["--region", "us-central1"], "--region us-central1: give --cloud too"),
    (["--cloud", "gcp", "--region", "mars-1"], "--region: 'mars-1' is not one of gcp's regions; "
                                               "components/catalog/regions.yaml knows: africa-south1, "),
    (["--stack", "gcp-usc1", "--cloud", "gcp"], "--stack: gives the cloud and region itself"),
    (["--stack", "local"], "--stack local: a local stack has no cloud prices"),
])
def test_bad_region_options_exit_2_naming_the_flag(argv, message, capsys):
    code, _, err = run(capsys, *argv)
    assert code == 2 and message in err


def test_an_unknown_region_names_the_catalog_s_regions_not_the_priced_ones(capsys):
    """us-west-2 is accepted (the catalog has it) though spot_prices.yaml has no AWS row: the refusal of
    us-west-9 said "spot_prices.yaml has rows for: none", as if no region would do (issue 32's walk)."""
    code, _, err = run(capsys, "--cloud", "aws", "--region", "us-west-9")
    assert code == 2 and "--region: 'us-west-9' is not one of aws's regions; did you mean us-west-2?" in err, err
    assert "us-east-1, us-east-2, us-west-1, us-west-2" in err and "spot_prices" not in err
    assert run(capsys, "--cloud", "aws", "--region", "us-west-2")[0] == 0


def test_a_machine_without_a_row_is_named_once_in_the_footer(capsys):
    # n1-standard-8/16/32 carry a T4 and a V100: one table row each, once in the footer (issue 32).
    _, out, _ = run(capsys, "--stack", "gcp-usc1")
    [line] = [line for line in out.splitlines() if line.startswith("no spot price known for")]
    machines = line.split("no spot price known for ", 1)[1].split(" in gcp/")[0].split(", ")
    assert "n1-standard-8" in machines and len(machines) == len(set(machines))


def test_an_old_snapshot_says_its_age_from_todays_date(capsys):
    import datetime

    from components.catalog import spot_prices

    priced = datetime.date(2026, 7, 30)
    assert spot_prices.stale("2026-07-30", priced + datetime.timedelta(days=180)) is None
    assert "is 181 days old" in spot_prices.stale("2026-07-30", priced + datetime.timedelta(days=181))
    _, out, _ = run(capsys, "--stack", "gcp-usc1", "--gpu", "l4")
    age = (datetime.date.today() - priced).days  # the shipped snapshot's age today
    assert (f"the 2026-07-30 spot price snapshot is {age} days old" in out) == (age > spot_prices.STALE_DAYS)
