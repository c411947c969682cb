"""The Filestore instance never moves (GCP review B1): storage.zone, the provider told to ignore the
instance's identity, and the program failing the preview when the config asks for another one.

Regression: the store sat in torchfleet:zones[0], so reordering the zones or dropping the first one
changed the instance's `location` (ForceNew in terraform-provider-google-beta
services/filestore/resource_filestore_instance.go) and the next `up` made a second, empty instance.
"""

from __future__ import annotations

from typing import Any

import pytest

from components.clouds.gcp import filestore
from components.spec import ConfigError, parse
from tests.harness import synth_config
from torchfleet.preview import mocks

FILESTORE = "gcp:filestore/instance:Instance"
BASE: dict[str, Any] = {
    "torchfleet:cloud": "gcp",
    "gcp:project": "my-ml-project",
    "gcp:region": "us-central1",
    "torchfleet:zones": ["us-central1-a", "us-central1-b"],
    "torchfleet:gpuPools": [{"gpu": "t4", "maxNodes": 2}],
}


def _with(**storage: Any) -> dict[str, Any]:
    return {**BASE, "torchfleet:storage": storage}


def _problems(config: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse(config)
    return caught.value.problems


# ---------------------------------------------------------------- storage.zone


def test_storage_zone_keeps_the_store_where_it_is_whatever_the_zones_order():
    placed = parse(_with(zone="us-central1-a"))
    reordered = parse({**_with(zone="us-central1-a"), "torchfleet:zones": ["us-central1-b", "us-central1-a"]})
    dropped = parse({**_with(zone="us-central1-a"), "torchfleet:zones": ["us-central1-b"]})
    assert {filestore.store_location(s) for s in (placed, reordered, dropped)} == {"us-central1-a"}


def test_without_storage_zone_the_store_stays_in_the_first_zone_as_before():
    """The old default, so upgrading moves no deployed store; the preview guard and the day-2 rule
    refuse a later reorder (below, and test_gcp_day2.py)."""
    assert filestore.store_location(parse(BASE)) == "us-central1-a"


def test_a_regional_store_has_no_zone():
    spec = parse(_with(tier="REGIONAL", sizeGb=1024))
    assert filestore.store_location(spec) == "us-central1"
    (problem,) = _problems(_with(tier="REGIONAL", sizeGb=1024, zone="us-central1-a"))
    assert problem.startswith("torchfleet:storage.zone: a REGIONAL store spans the region")


@pytest.mark.parametrize("zone", ["us-east1-b", "us-central1-z", 7])
def test_storage_zone_outside_the_region_is_refused_naming_the_key(zone):
    (problem,) = _problems(_with(zone=zone))
    assert problem.startswith("torchfleet:storage.zone: zone ") and "not in region us-central1" in problem


def test_storage_zone_need_not_be_one_of_the_stacks_zones():
    """Dropping the store's zone from torchfleet:zones must not force a move: nodes mount it cross-zone."""
    spec = parse({**_with(zone="us-central1-c")})
    assert filestore.store_location(spec) == "us-central1-c"


def test_storage_zone_on_a_cloud_whose_store_has_none_is_refused():
    config = {"torchfleet:cloud": "aws", "aws:region": "us-west-2", "torchfleet:zones": ["us-west-2a"],
              "torchfleet:gpuPools": [{"gpu": "t4", "maxNodes": 1}], "torchfleet:storage": {"zone": "us-west-2a"}}
    assert any(p.startswith("torchfleet:storage.zone: this cloud's store grows by itself") for p in _problems(config))


# ---------------------------------------------------------------- the provider never replaces it


def test_the_instances_identity_is_ignored_by_the_provider():
    result = synth_config("gcp-store", _with(zone="us-central1-b"))
    store = result.one(FILESTORE)
    assert store.inputs["location"] == "us-central1-b"
    assert set(filestore.STORE_IDENTITY) <= set(store.options["ignoreChanges"])


# ---------------------------------------------------------------- the preview refuses a move


@pytest.fixture
def deployed(monkeypatch):
    """Make the mock answer for the instance with a deployed state (what a preview reads for an
    instance that exists: with ignoreChanges its outputs are the state's, not the config's)."""

    def set_state(**state: Any) -> None:
        original = mocks.RESOURCES[FILESTORE]

        def answer(args):
            return {**original(args), **state}

        monkeypatch.setitem(mocks.RESOURCES, FILESTORE, answer)

    return set_state


def test_the_preview_fails_naming_storage_zone_when_the_zones_were_reordered(deployed):
    deployed(location="us-central1-a")
    reordered = {**BASE, "torchfleet:zones": ["us-central1-b", "us-central1-a"]}
    with pytest.raises(Exception) as caught:
        synth_config("gcp-store", reordered)
    message = str(caught.value)
    assert "torchfleet:storage.zone: the store is location 'us-central1-a', the config says 'us-central1-b'" in message
    assert "set torchfleet:storage.zone: us-central1-a" in message and "storage.adopt: true" in message


def test_the_preview_fails_naming_storage_tier_when_the_tier_changed(deployed):
    deployed(tier="BASIC_SSD")
    with pytest.raises(Exception) as caught:
        synth_config("gcp-store", _with(zone="us-central1-a", tier="BASIC_HDD", sizeGb=1024))
    assert "torchfleet:storage.tier: the store is tier 'BASIC_SSD', the config says 'BASIC_HDD'" in str(caught.value)


def test_the_preview_goes_through_when_the_config_matches_the_store(deployed):
    deployed(location="us-central1-a", tier="BASIC_HDD")
    result = synth_config("gcp-store", {**_with(zone="us-central1-a"), "torchfleet:zones": ["us-central1-b"]})
    assert result.one(FILESTORE).inputs["location"] == "us-central1-a"


def test_refuse_store_move_names_each_changed_key():
    deployed = {"location": "us-central1-a", "tier": "ZONAL", "reserved_ip_range": "10.0.32.0/26"}
    wanted = {"location": "us-central1-a", "tier": "ZONAL", "reserved_ip_range": "10.0.32.0/24"}
    (problem,) = filestore.refuse_store_move(deployed, wanted)
    assert problem.startswith("torchfleet:storage.sizeGb: the store is reserved ip range '10.0.32.0/26'")
    assert filestore.refuse_store_move(deployed, dict(deployed)) == []
