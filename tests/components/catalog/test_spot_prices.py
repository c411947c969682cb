"""components/catalog/spot_prices.yaml (issue 32): a test walks every row. Each region row is a real
region of its cloud, sourced by a pinned URL and dated; each machine is one a stack can get, at
positive prices with spot at most on demand (the clouds never charge more for spot). Every available GPU
machine of the catalog in every shipped region (the stacks' regions and the file's own) has a row or an
`unknown:` entry saying why none is shipped, so the CLI says "no spot price known" on purpose only."""

from __future__ import annotations

import datetime
import re
from urllib.parse import urlparse

import pytest
import yaml

from components import catalog
from components.catalog import machines, spot_prices
from components.catalog import regions as region_catalog
from torchfleet.jobs import target as targets

RAW = yaml.safe_load(spot_prices.SPOT_PRICES_FILE.read_text())
UNKNOWN = RAW.pop(spot_prices.UNKNOWN)
STACKS = ("aws-usw2", "gcp-usc1", "azure-eus")
MACHINES = [(key, machine, p) for key, row in RAW.items() for machine, p in row["machines"].items()]


@pytest.mark.parametrize("key", list(RAW))
def test_region_row_is_a_real_region_sourced_and_dated(key):
    cloud, region = key.split("/", 1)
    row = RAW[key]
    assert set(row) == {"source", "priced", "machines"} and row["machines"]
    assert region_catalog.region(cloud, region) is not None, f"{region} is not a {cloud} region"
    url = urlparse(row["source"])
    # Pinned: a commit in the URL, so the figures can be read again as they were.
    assert url.scheme == "https" and re.search(r"/[0-9a-f]{40}/", url.path), row["source"]
    assert isinstance(row["priced"], str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", row["priced"])
    assert datetime.date.fromisoformat(row["priced"]) <= datetime.date.today()


@pytest.mark.parametrize("key, machine, p", MACHINES, ids=[f"{k}-{m}" for k, m, _ in MACHINES])
def test_every_price_is_positive_spot_at_most_on_demand_and_a_known_machine(key, machine, p):
    cloud = key.split("/", 1)[0]
    assert set(p) == {"onDemand", "spot"}
    for usd in p.values():
        assert isinstance(usd, (int, float)) and not isinstance(usd, bool) and 0 < usd < 200
    assert p["spot"] <= p["onDemand"], "spot costs at most on demand"
    is_manager_machine = machines.rules(cloud).problem(machine) is None
    assert catalog.find_machine(cloud, machine) is not None or is_manager_machine, \
        f"{machine} is neither a GPU machine nor a manager machine of {cloud}"
    assert spot_prices.price(cloud, key.split("/", 1)[1], machine).spot == p["spot"]


def test_an_absent_region_or_machine_has_no_price():
    assert spot_prices.price("gcp", "us-central1", "no-such-machine") is None
    assert spot_prices.price("aws", "us-west-2", "g4dn.xlarge") is None
    assert spot_prices.price("gcp", None, "g2-standard-4") is None


def _shipped_regions() -> dict[str, set[str]]:
    """{cloud: regions}: each shipped stack's region and each region the file has rows for."""
    found: dict[str, set[str]] = {}
    for stack in STACKS:
        t = targets.from_stack(stack)
        found.setdefault(t.cloud, set()).add(t.region)
    for key in RAW:
        cloud, region = key.split("/", 1)
        found.setdefault(cloud, set()).add(region)
    return found


SHIPPED = _shipped_regions()
CATALOG_MACHINES = sorted({(cloud, m.type) for key in catalog.gpu_keys()
                           for cloud, offer in catalog.load()[key].offerings.items() if offer.available
                           for m in offer.machines})
COVERAGE = [(cloud, region, machine) for cloud, machine in CATALOG_MACHINES for region in sorted(SHIPPED[cloud])]


def test_the_shipped_regions_are_the_stacks_and_the_files():
    expected = {"aws": {"us-west-2"}, "azure": {"eastus"},
                "gcp": {"us-central1", "us-east1", "us-west1", "europe-west4"}}
    assert expected == SHIPPED


@pytest.mark.parametrize("cloud, region, machine", COVERAGE, ids=[f"{c}/{r}-{m}" for c, r, m in COVERAGE])
def test_every_catalog_gpu_machine_in_a_shipped_region_is_priced_or_unknown_on_purpose(cloud, region, machine):
    row, why = spot_prices.price(cloud, region, machine), spot_prices.unknown(cloud, region, machine)
    assert (row is None) != (why is None), f"{machine} in {cloud}/{region}: exactly one of a price or a reason"


def test_the_coverage_per_cloud():
    """What is shipped, counted: GCP's A2/A3/G2 machines in four regions are priced, its N1 (T4/V100)
    machines are not; AWS and Azure have no dated source yet (the file's header lists what was searched)."""
    priced = {c: sum(1 for cc, r, m in COVERAGE if cc == c and spot_prices.price(c, r, m)) for c in SHIPPED}
    unknown = {c: sum(1 for cc, r, m in COVERAGE if cc == c and spot_prices.unknown(c, r, m)) for c in SHIPPED}
    assert priced == {"aws": 0, "azure": 0, "gcp": 21 * 4}
    assert unknown == {"aws": 27, "azure": 12, "gcp": 5 * 4}  # 27 EC2 types, 12 VM sizes in one region each


def test_every_unknown_entry_is_well_formed():
    assert set(UNKNOWN) <= {"aws", "gcp", "azure"}
    for cloud, entries in UNKNOWN.items():
        for entry in entries:
            assert set(entry) == {"regions", "machines", "why"} and entry["why"]
            assert entry["regions"] == "all" or all(region_catalog.region(cloud, r) for r in entry["regions"])
            assert entry["machines"] == "all" or all(catalog.find_machine(cloud, m) for m in entry["machines"])
            # an entry never hides a price the file has
            for key, row in RAW.items():
                if key.split("/", 1)[0] == cloud and entry["regions"] in ("all", [key.split("/", 1)[1]]):
                    assert entry["machines"] == "all" or not set(entry["machines"]) & set(row["machines"])


def test_a_missing_price_is_said_with_its_reason():
    assert spot_prices.missing("aws", "us-west-2", "g4dn.xlarge") == (
        "no spot price known for g4dn.xlarge in aws/us-west-2 (no dated public source of AWS spot prices was found)")
    assert spot_prices.missing("gcp", "us-central1", "n1-standard-8").endswith(
        "(the dated source prices the N1 machine without its attached T4/V100)")
    assert spot_prices.missing("gcp", "asia-east1", "g2-standard-4") == (
        "no spot price known for g2-standard-4 in gcp/asia-east1 (components/catalog/spot_prices.yaml has no row "
        "for it)")


@pytest.mark.parametrize("stack", STACKS)
def test_each_stacks_manager_machine_in_its_region_is_priced_or_unknown_on_purpose(stack):
    """The manager pool runs all day, on demand: its machine in the stack's own region has a row (gcp-usc1's
    e2-standard-4) or a stated reason, like every GPU machine."""
    from torchfleet.preview.runner import stack_spec

    spec = stack_spec(targets.stack_file(stack))  # read as the program reads it
    cloud, region, machine = spec.cloud, spec.region, spec.manager_pool.machine_type
    row, why = spot_prices.price(cloud, region, machine), spot_prices.unknown(cloud, region, machine)
    assert (row is None) != (why is None), f"{machine} in {cloud}/{region}"
    if stack == "gcp-usc1":
        assert (row.on_demand, row.spot, row.priced) == (0.13402284, 0.080424, "2026-07-30")


@pytest.mark.parametrize("cloud", sorted({key.split("/", 1)[0] for key in RAW}))
def test_a_clouds_rows_are_one_snapshot(cloud):
    """Each cloud keeps one source at one date, so a stack's figures in two regions are never of two days
    (a row refreshed alone would compare a new spot price with an old one)."""
    rows = [row for key, row in RAW.items() if key.split("/", 1)[0] == cloud]
    assert len({(row["source"], row["priced"]) for row in rows}) == 1


def test_the_snapshots_age_is_said_from_its_own_date():
    """The shipped GCP snapshot (2026-07-30) is said to be old 181 days after it, never before."""
    row = spot_prices.price("gcp", "us-central1", "g2-standard-4")
    priced = datetime.date.fromisoformat(row.priced)
    assert spot_prices.stale(row.priced, priced + datetime.timedelta(days=spot_prices.STALE_DAYS)) is None
    assert "181 days old" in spot_prices.stale(row.priced, priced + datetime.timedelta(days=181))
