"""components/catalog/regions.yaml: a test walks every row (DESIGN style example 4), raw and loaded."""

from __future__ import annotations

import datetime
import re
from urllib.parse import urlparse

import pytest
import yaml

from components import catalog
from components.catalog import regions
from components.clouds.traits import CLOUD_TRAITS
from tests.components.spec.configs import config, ok

RAW = yaml.safe_load(regions.REGIONS_FILE.read_text())
VENDOR_DOMAIN = {"aws": "docs.aws.amazon.com", "gcp": "cloud.google.com", "azure": "learn.microsoft.com"}
# The vendors' naming schemes: us-west-2 / ap-southeast-4; us-central1 / europe-west10; eastus2.
REGION_NAME = {
    "aws": re.compile(r"^[a-z]{2}-[a-z]+-\d$"),
    "gcp": re.compile(r"^[a-z]+-[a-z]+\d{1,2}$"),
    "azure": re.compile(r"^[a-z]+\d?$"),
}
ROWS = [(cloud, name) for cloud, row in sorted(RAW.items()) for name in row["regions"]]


def test_every_cloud_with_a_region_key_has_a_catalog():
    assert set(RAW) == {c for c, t in CLOUD_TRAITS.items() if t.region_key}


@pytest.mark.parametrize("cloud", sorted(RAW))
def test_cloud_cites_its_vendor_page_and_when_it_was_read(cloud):
    row = RAW[cloud]
    assert set(row) == {"source", "checked", "regions"}
    url = urlparse(row["source"])
    assert url.scheme == "https" and url.hostname == VENDOR_DOMAIN[cloud] and url.path not in ("", "/")
    # Quoted in the YAML, so it reads back as the text the error message prints.
    assert isinstance(row["checked"], str)
    datetime.date.fromisoformat(row["checked"])


@pytest.mark.parametrize("cloud, name", ROWS, ids=[f"{c}-{n}" for c, n in ROWS])
def test_region_row(cloud, name):
    row = RAW[cloud]["regions"][name]
    assert set(row) <= {"zones", "gpus"}
    assert REGION_NAME[cloud].match(name), f"{name} is not named like a {cloud} region"
    zones = row["zones"]
    assert len(zones) == len(set(zones))
    if cloud == "azure":
        assert zones in ([], ["1", "2", "3"]), "Azure zones are the strings 1, 2, 3, or none"
    else:
        assert len(zones) >= 2 and all(re.fullmatch(r"[a-f]", z) for z in zones), zones
        assert zones == sorted(zones)
    for gpu in row.get("gpus", []):
        offer = catalog.offering(gpu, cloud)
        assert offer is not None and offer.available, f"{gpu} is not an available {cloud} GPU of gpus.yaml"


@pytest.mark.parametrize("cloud, name", ROWS, ids=[f"{c}-{n}" for c, n in ROWS])
def test_loaded_region_matches_the_yaml_and_its_zones_pass_the_validator(cloud, name):
    loaded = regions.region(cloud, name)
    assert loaded.name == name and loaded.cloud == cloud
    raw = RAW[cloud]["regions"][name]
    assert loaded.gpus == (tuple(raw["gpus"]) if "gpus" in raw else None)
    if not loaded.zones:
        return
    key = CLOUD_TRAITS[cloud].region_key
    # The stack's own spec validator accepts the region with two of its zones (one GPU pool).
    spec = ok(config(cloud, **{key: name, "zones": list(loaded.zones[:2])}))
    assert spec.region == name and spec.zones == loaded.zones[:2]


def test_the_repositorys_stacks_use_catalogued_regions():
    assert regions.region("aws", "us-west-2").zones[:2] == ("us-west-2a", "us-west-2b")
    assert regions.region("gcp", "us-central1").zones[:2] == ("us-central1-a", "us-central1-b")
    assert regions.region("azure", "eastus").zones == ("1", "2", "3")
