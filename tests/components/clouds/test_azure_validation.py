"""Bad Azure stack config: one clear error per case, naming the key and what would be valid,
raised before any resource is registered."""

import pytest

from components import spec as spec_mod
from components.spec import ConfigError, parse
from tests.harness import synth_config

BASE = {
    "azure-native:location": "eastus",
    "torchfleet:cloud": "azure",
    "torchfleet:zones": ["1", "2"],
    "torchfleet:gpuPools": [{"gpu": "t4", "maxNodes": 2}],
    "torchfleet:storage": {"tier": "Premium_LRS", "sizeGb": 100},
    # Required on Azure (issue 29).
    "torchfleet:network": {"publicAccessCidrs": ["203.0.113.0/24"]},
    "torchfleet:admins": ["User:00000000-0000-0000-0000-0000000000b0"],
}


def _with(**changes):
    """BASE with some torchfleet:* keys replaced."""
    return {**BASE, **{f"torchfleet:{key}": value for key, value in changes.items()}}


# (case, config change, key the error names, words the error must contain)
CASES = [
    ("k80 retired", {"gpuPools": [{"gpu": "k80", "maxNodes": 1}]},
     "torchfleet:gpuPools[0].gpu", ["k80", "retired on 2023-08-31", "use t4"]),
    ("v100 retired with NCv3", {"gpuPools": [{"gpu": "v100", "maxNodes": 1}]},
     "torchfleet:gpuPools[0].gpu", ["v100", "retired on 2025-09-30", "NCv3", "use a100-80gb"]),
    ("a10g not offered", {"gpuPools": [{"gpu": "a10g", "maxNodes": 1}]},
     "torchfleet:gpuPools[0].gpu", ["a10g is not offered on azure", "t4"]),
    ("l4 not offered", {"gpuPools": [{"gpu": "L4", "maxNodes": 1}]},
     "torchfleet:gpuPools[0].gpu", ["l4 is not offered on azure", "h100"]),
    ("zone 4", {"zones": ["1", "4"]}, "torchfleet:zones[1]", ["'4'", '"1"']),
    ("AWS-style zone", {"zones": ["eastus-1"]}, "torchfleet:zones[0]", ["'eastus-1'", '"1"']),
    ("share below the Premium minimum", {"storage": {"tier": "Premium_LRS", "sizeGb": 50}},
     "torchfleet:storage.sizeGb", ["Premium_LRS", "at least 100 GiB", "got 50"]),
    ("ZRS share below the minimum", {"storage": {"tier": "Premium_ZRS", "sizeGb": 99}},
     "torchfleet:storage.sizeGb", ["Premium_ZRS", "at least 100 GiB", "got 99"]),
    ("standard tier cannot do NFS", {"storage": {"tier": "Standard_LRS", "sizeGb": 100}},
     "torchfleet:storage.tier", ["Premium_LRS", "Premium_ZRS", "'Standard_LRS'"]),
    ("machine of another GPU",
     {"gpuPools": [{"gpu": "t4", "maxNodes": 1, "machineTypes": ["Standard_NC24ads_A100_v4"]}]},
     "torchfleet:gpuPools[0].machineTypes", ["Standard_NC24ads_A100_v4 has no t4 on azure", "Standard_NC4as_T4_v3"]),
]


@pytest.mark.parametrize("case,change,key,words", CASES, ids=[c[0] for c in CASES])
def test_each_bad_value_is_one_clear_error(case, change, key, words):
    with pytest.raises(ConfigError) as err:
        parse(_with(**change), stack="azure-bad")
    problems = err.value.problems
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{key}: "), problems
    for word in words:
        assert word in problems[0], (word, problems[0])


def test_location_is_required():
    raw = dict(BASE)
    del raw["azure-native:location"]
    with pytest.raises(ConfigError) as err:
        parse(raw)
    assert err.value.problems == ["azure-native:location: required for cloud azure"]


def test_several_problems_are_reported_at_once():
    raw = _with(zones=["1", "5"], gpuPools=[{"gpu": "k80", "maxNodes": 1}], storage={"sizeGb": 10})
    with pytest.raises(ConfigError) as err:
        parse(raw)
    keys = sorted(p.split(":", 2)[1].split(" ")[0] for p in err.value.problems)
    assert keys == ["gpuPools[0].gpu", "storage.sizeGb", "zones[1]"]


def test_unquoted_zone_numbers_are_accepted():
    # YAML `zones: [1, 2]` arrives as integers; Azure's zone names are the strings "1", "2".
    spec = parse(_with(zones=[1, 2]))
    assert spec.zones == ("1", "2")
    assert [p.name for p in spec.gpu_pools] == ["gpu-t4-1", "gpu-t4-2"]


def test_azure_defaults_to_the_premium_minimum_share():
    raw = _with(storage={"protect": False})
    spec = parse(raw)
    assert (spec.storage.tier, spec.storage.size_gb, spec.storage.protect) == ("Premium_LRS", 100, False)
    assert spec.training.termination_grace_s == 30  # Azure's spot eviction notice


def test_bad_config_fails_synth_before_any_resource():
    # synth() loads the spec before the program runs: a ConfigError means nothing registered.
    with pytest.raises(ConfigError, match="k80 on azure was retired"):
        synth_config("azure-bad", _with(gpuPools=[{"gpu": "k80", "maxNodes": 1}]))


def test_the_spot_taint_constant_is_what_aks_applies():
    # https://learn.microsoft.com/azure/aks/spot-node-pool: AKS taints spot nodes with exactly this.
    assert spec_mod.AKS_SPOT_TAINT == {
        "key": "kubernetes.azure.com/scalesetpriority", "value": "spot", "effect": "NoSchedule"
    }
