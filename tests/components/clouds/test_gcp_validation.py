"""GCP config errors: each names its key and says what would be valid, before any resource exists."""

from __future__ import annotations

from typing import Any

import pytest

from components.spec import ConfigError, parse
from tests.harness import synth_config
from torchfleet.preview import runner

BASE: dict[str, Any] = {
    "torchfleet:cloud": "gcp",
    "gcp:region": "us-central1",
    "gcp:project": "my-ml-project",
    "torchfleet:zones": ["us-central1-a", "us-central1-b"],
    "torchfleet:gpuPools": [{"gpu": "t4", "maxNodes": 4}],
}


def problems(**overrides: Any) -> list[str]:
    """parse() problems for BASE with full keys replaced (None removes one)."""
    raw = {**BASE, **overrides}
    raw = {k: v for k, v in raw.items() if v is not None}
    with pytest.raises(ConfigError) as err:
        parse(raw, stack="t")
    return err.value.problems


def only(found: list[str], key: str) -> str:
    assert len(found) == 1, found
    assert found[0].startswith(f"{key}: "), found
    return found[0]


def test_base_config_is_valid():
    # Every case below fails because of its one change, not because the base is broken.
    spec = parse(dict(BASE), stack="t")
    assert [p.name for p in spec.gpu_pools] == ["gpu-t4-us-central1-a", "gpu-t4-us-central1-b"]


def test_a10g_is_not_offered_on_gcp():
    msg = only(problems(**{"torchfleet:gpuPools": [{"gpu": "a10g", "maxNodes": 2}]}), "torchfleet:gpuPools[0].gpu")
    assert "a10g is not offered on gcp" in msg
    # ... and names what is: the user can pick the nearest GPU from the message alone.
    assert "l4" in msg and "t4" in msg


def test_k80_is_retired_on_gcp_with_a_replacement():
    msg = only(problems(**{"torchfleet:gpuPools": [{"gpu": "k80", "maxNodes": 2}]}), "torchfleet:gpuPools[0].gpu")
    assert "retired" in msg and "2024-05-01" in msg
    assert "use t4 instead" in msg


def test_zone_outside_the_region():
    msg = only(problems(**{"torchfleet:zones": ["us-central1-a", "us-east1-b"]}), "torchfleet:zones[1]")
    assert "'us-east1-b' is not in region us-central1" in msg
    assert "us-central1-a" in msg  # the example of a right one


@pytest.mark.parametrize(
    ("tier", "minimum"), [("BASIC_HDD", 1024), ("BASIC_SSD", 2560), ("ZONAL", 1024), ("REGIONAL", 1024)]
)
def test_filestore_below_the_tier_minimum(tier, minimum):
    storage = {"tier": tier, "sizeGb": minimum - 1}
    msg = only(problems(**{"torchfleet:storage": storage}), "torchfleet:storage.sizeGb")
    assert f"tier {tier} needs at least {minimum} GiB, got {minimum - 1}" in msg
    # The minimum itself is accepted.
    assert parse({**BASE, "torchfleet:storage": {"tier": tier, "sizeGb": minimum}}).storage.size_gb == minimum


def test_unknown_filestore_tier_lists_the_tiers():
    msg = only(problems(**{"torchfleet:storage": {"tier": "PREMIUM_SSD"}}), "torchfleet:storage.tier")
    assert "BASIC_HDD" in msg and "ZONAL" in msg


def test_project_is_required():
    msg = only(problems(**{"gcp:project": None}), "gcp:project")
    assert "required for cloud gcp" in msg


def test_region_is_required():
    found = problems(**{"gcp:region": None})
    assert any(p.startswith("gcp:region: required for cloud gcp") for p in found), found


def test_a_gke_pool_takes_one_machine_type():
    pools = [{"gpu": "t4", "maxNodes": 2, "machineTypes": ["n1-standard-4", "n1-standard-8"]}]
    msg = only(problems(**{"torchfleet:gpuPools": pools}), "torchfleet:gpuPools[0].machineTypes")
    assert "one machine type" in msg and "[n1-standard-4]" in msg


def test_machine_of_the_wrong_family_for_the_gpu():
    # L4 comes only with G2 machines; an N1 shape cannot carry it.
    pools = [{"gpu": "l4", "maxNodes": 2, "machineTypes": ["n1-standard-8"]}]
    msg = only(problems(**{"torchfleet:gpuPools": pools}), "torchfleet:gpuPools[0].machineTypes")
    assert "n1-standard-8 has no l4 on gcp" in msg and "g2-standard-4" in msg


@pytest.mark.parametrize("key", ["scaleDownUnneededTime", "scaleDownDelayAfterAdd"])
def test_autoscaler_timings_are_refused_on_gke(key):
    # GKE's built-in autoscaler has a profile, not these flags: silently ignoring them would lie.
    msg = only(problems(**{"torchfleet:autoscaler": {key: "5m"}}), f"torchfleet:autoscaler.{key}")
    assert "remove this key" in msg


def test_every_problem_at_once():
    found = problems(
        **{
            "torchfleet:zones": ["us-central1-a", "europe-west4-a"],
            "torchfleet:gpuPools": [{"gpu": "a10g", "maxNodes": 1}, {"gpu": "k80", "maxNodes": 1}],
            "torchfleet:storage": {"sizeGb": 100},
        }
    )
    keys = sorted(p.split(": ", 1)[0] for p in found)
    assert keys == [
        "torchfleet:gpuPools[0].gpu",
        "torchfleet:gpuPools[1].gpu",
        "torchfleet:storage.sizeGb",
        "torchfleet:zones[1]",
    ]


def test_synth_refuses_before_registering_anything(monkeypatch):
    monitors = []

    class Spy(runner.RecordingMonitor):
        def __init__(self, mocks):
            super().__init__(mocks)
            monitors.append(self)

    monkeypatch.setattr(runner, "RecordingMonitor", Spy)
    bad = {**BASE, "torchfleet:gpuPools": [{"gpu": "a10g", "maxNodes": 2}]}
    with pytest.raises(ConfigError, match=r"torchfleet:gpuPools\[0\]\.gpu"):
        synth_config("gcp-bad", bad)
    assert len(monitors) == 1
    assert monitors[0].recorded == []


@pytest.mark.parametrize("pool, key", [
    ({"gpu": "h100", "maxNodes": 1, "spot": False}, "torchfleet:gpuPools[0].spot"),
    ({"gpu": "h100", "maxNodes": 1, "spot": False, "machineTypes": ["a3-highgpu-2g"]},
     "torchfleet:gpuPools[0].machineTypes"),
])
def test_an_on_demand_pool_of_a_spot_only_machine_is_refused(pool, key):
    """Regression (GCP review m6): h100 with spot: false gave a3-highgpu-1g, which GCP sells only as
    Spot or Flex-start; with allowOnDemandGpus the `up` succeeded and every scale-up failed."""
    msg = only(problems(**{"torchfleet:gpuPools": [pool], "torchfleet:guardrails": {"allowOnDemandGpus": True}}), key)
    assert "offered only as spot, not on demand" in msg
    assert "set spot: true, or machineTypes: [a3-highgpu-8g]" in msg


def test_on_demand_h100_on_the_8_gpu_machine_is_accepted():
    pool = {"gpu": "h100", "maxNodes": 1, "spot": False, "machineTypes": ["a3-highgpu-8g"]}
    spec = parse({**BASE, "torchfleet:gpuPools": [pool], "torchfleet:guardrails": {"allowOnDemandGpus": True,
                                                                                   "maxGpus": 64}})
    assert [p.spot for p in spec.gpu_pools] == [False] * len(spec.gpu_pools)
