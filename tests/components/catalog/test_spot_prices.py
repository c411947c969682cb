"""components/catalog/spot_prices.yaml (issue 32): a test walks every row. Each region row is a real
region of its cloud, sourced by a pinned URL and dated; each machine is one a stack can get, at
positive prices with spot at most on demand (the clouds never charge more for spot)."""

from __future__ import annotations

import datetime
import re
from urllib.parse import urlparse

import pytest
import yaml

from components import catalog
from components.catalog import machines, spot_prices
from components.catalog import regions as region_catalog

RAW = yaml.safe_load(spot_prices.SPOT_PRICES_FILE.read_text())
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
