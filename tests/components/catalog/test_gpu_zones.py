"""components/catalog/gpu_zones.yaml: a test walks every row (DESIGN style example 4), and spec.parse
refuses a GPU pool in a zone that does not offer its GPU (GCP review F7)."""

from __future__ import annotations

import datetime
import re

import pytest
import yaml

from components import catalog
from components.catalog import gpu_zones, regions
from tests.components.spec.configs import config, ok, only
from tests.harness import STACKS_DIR
from torchfleet.cli import main

RAW = yaml.safe_load(gpu_zones.GPU_ZONES_FILE.read_text())
ROWS = [(cloud, gpu, region) for cloud, row in RAW.items() for gpu, by_region in row["gpus"].items()
        for region in by_region]


def test_the_file_is_parsed_and_names_its_source_commit_and_date():
    gcp = gpu_zones.load()["gcp"]
    assert "Cyclenerd/google-cloud-pricing-cost-calculator" in gcp.source
    assert RAW["gcp"]["commit"] in gcp.source and re.fullmatch(r"[0-9a-f]{40}", RAW["gcp"]["commit"])
    assert datetime.date.fromisoformat(gcp.date) <= datetime.date.fromisoformat(RAW["gcp"]["checked"])
    assert "skypilot-org/skypilot-catalog" in RAW["gcp"]["cross_check"]
    assert gcp.offers("a100-80gb", "us-central1") == ("us-central1-a", "us-central1-c")
    assert gcp.offers("a100-80gb", "europe-west1") == ()  # listed GPU, region without it
    assert gcp.offers("l4", "us-central1") is None  # no trusted list: not checked


@pytest.mark.parametrize(("cloud", "gpu", "region"), ROWS)
def test_every_row_names_a_catalog_gpu_and_zones_the_region_has(cloud, gpu, region):
    assert catalog.offering(gpu, cloud) is not None, f"{gpu} has no {cloud} row in gpus.yaml"
    known = regions.region(cloud, region)
    assert known is not None, f"{region} is not in regions.yaml"
    offered = gpu_zones.offers(cloud, gpu, region)
    assert offered and set(offered) <= set(known.zones), (offered, known.zones)
    if known.gpus is not None:
        assert gpu in known.gpus  # the region-level list agrees


@pytest.mark.parametrize("cloud", sorted(RAW))
def test_every_catalog_gpu_is_either_listed_or_says_why_not(cloud):
    rows = RAW[cloud]
    for gpu in catalog.offered_on(cloud):
        assert gpu in rows["gpus"] or gpu in rows["unchecked"] or "*" in rows["unchecked"], (cloud, gpu)
    assert all(why.strip() for why in rows["unchecked"].values())


def test_aws_and_azure_have_no_static_zone_table_and_say_why():
    # Zone names are per account (AWS) or per subscription (Azure): a table by name would be wrong for some.
    assert "working-with-az-ids" in RAW["aws"]["unchecked"]["*"]
    assert "logical availability zones" in RAW["azure"]["unchecked"]["*"]
    assert not RAW["aws"]["gpus"] and not RAW["azure"]["gpus"]


# ---------------------------------------------------------------- spec.parse (GCP review F7)

US_CENTRAL1 = {"gcp:region": "us-central1", "zones": ["us-central1-a", "us-central1-b"]}


def test_a100_80gb_in_us_central1_b_is_refused_naming_the_key_and_the_zones_that_have_it():
    """GCP review F7: a100-80gb in us-central1-b synthesized a node pool that GKE cannot create."""
    raw = config("gcp", **US_CENTRAL1, gpuPools=[{"gpu": "a100-80gb", "maxNodes": 1}])
    message = only(raw, "torchfleet:gpuPools[0].zones")
    assert message.startswith(
        "a100-80gb is not offered in us-central1-b (inherited from torchfleet:zones); "
        "zones of us-central1 that offer it: us-central1-a, us-central1-c"
    )
    assert "components/catalog/gpu_zones.yaml" in message
    assert message.endswith("set gpuPools[0].zones to ['us-central1-a']")


def test_explicit_pool_zones_that_offer_the_gpu_pass():
    a100 = {"gpu": "a100-80gb", "maxNodes": 1, "zones": ["us-central1-a"]}
    raw = config("gcp", **US_CENTRAL1, gpuPools=[a100, {"gpu": "t4", "maxNodes": 2}])
    assert [p.name for p in ok(raw).gpu_pools][:1] == ["gpu-a100-80gb-us-central1-a"]


def test_a_region_with_no_zone_for_the_gpu_is_refused():
    raw = config("gcp", **{"gcp:region": "europe-west1", "zones": ["europe-west1-b"]},
                 gpuPools=[{"gpu": "a100-40gb", "maxNodes": 1}])
    message = only(raw, "torchfleet:gpuPools[0].zones")
    assert "no zone of europe-west1 has it" in message and message.endswith("pick another region or GPU")


def test_a_gpu_without_a_trusted_list_is_not_refused_per_zone():
    # L4's 2023 list is stale (gpu_zones.yaml unchecked): us-central1-f is left to `torchfleet check`.
    raw = config("gcp", **{"gcp:region": "us-central1", "zones": ["us-central1-f"]},
                 gpuPools=[{"gpu": "l4", "maxNodes": 1}])
    assert ok(raw).gpu_pools[0].zone == "us-central1-f"


@pytest.mark.parametrize("command", ["check", "synth"])
def test_the_cli_exits_2_on_the_shipped_gcp_stack_with_an_a100_80gb_pool_in_zone_b(command, tmp_path, capsys):
    # The example stack (zones a and b) given an a100-80gb pool: refused before anything is built.
    stack = yaml.safe_load((STACKS_DIR / "Pulumi.gcp-usc1.yaml").read_text())
    stack["config"]["torchfleet:gpuPools"].append({"gpu": "a100-80gb", "maxNodes": 1})
    path = tmp_path / "Pulumi.gcp-usc1.yaml"
    path.write_text(yaml.safe_dump(stack))
    assert main([command, "--stack-file", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert "torchfleet:gpuPools[2].zones: a100-80gb is not offered in us-central1-b" in err
    assert "set gpuPools[2].zones to ['us-central1-a']" in err
