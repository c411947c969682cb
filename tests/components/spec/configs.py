"""Small valid configs per cloud (as parse() receives them: full keys, structured values decoded),
and helpers that turn a ConfigError into {key path: [messages]} so tests assert on both."""

from __future__ import annotations

import copy
from collections import defaultdict
from typing import Any

import pytest

from components.spec import ConfigError, PlatformSpec, parse

# What an AWS or Azure config must add to a network it overrides (publicAccessCidrs is required there: issue 29).
PUBLIC = {"publicAccessCidrs": ["203.0.113.0/24"]}

# The smallest config each cloud accepts: one T4 pool over the listed zones.
BASE: dict[str, dict[str, Any]] = {
    "aws": {
        "torchfleet:cloud": "aws",
        "aws:region": "us-west-2",
        "torchfleet:zones": ["us-west-2a", "us-west-2b"],
        "torchfleet:gpuPools": [{"gpu": "t4", "maxNodes": 4}],
        # Required on AWS too (issue 29): who reaches the API (or network.privateOnly).
        "torchfleet:network": dict(PUBLIC),
    },
    "gcp": {
        "torchfleet:cloud": "gcp",
        "gcp:region": "us-central1",
        "gcp:project": "my-ml-project",
        "torchfleet:zones": ["us-central1-a", "us-central1-b"],
        "torchfleet:gpuPools": [{"gpu": "t4", "maxNodes": 4}],
    },
    "azure": {
        "torchfleet:cloud": "azure",
        "azure-native:location": "eastus",
        "torchfleet:zones": ["1", "2"],
        "torchfleet:gpuPools": [{"gpu": "t4", "maxNodes": 4}],
        # Required on Azure (issue 29): who reaches the API, and the cluster admins (the deployer among them).
        "torchfleet:network": dict(PUBLIC),
        "torchfleet:admins": ["User:00000000-0000-0000-0000-0000000000b0"],
    },
    "local": {"torchfleet:cloud": "local"},
}


def config(base: str, /, **overrides: Any) -> dict[str, Any]:
    """BASE[base] with torchfleet keys replaced: config("aws", gpuPools=[...]); None removes a key."""
    raw = copy.deepcopy(BASE[base])
    for name, value in overrides.items():
        key = name if ":" in name else f"torchfleet:{name}"
        if value is None:
            raw.pop(key, None)
        else:
            raw[key] = value
    return raw


def pools(cloud: str, *entries: dict[str, Any]) -> dict[str, Any]:
    """BASE[cloud] with these gpuPools entries."""
    return config(cloud, gpuPools=list(entries))


def problems(raw: dict[str, Any], stack: str = "test") -> dict[str, list[str]]:
    """The ConfigError parse() raises, as {key path: [messages]} (fails the test if none is raised)."""
    with pytest.raises(ConfigError) as caught:
        parse(raw, stack)
    found: dict[str, list[str]] = defaultdict(list)
    for item in caught.value.problems:
        key, sep, message = item.partition(": ")
        assert sep, f"problem without a 'key: message' shape: {item!r}"
        found[key].append(message)
    return dict(found)


def only(raw: dict[str, Any], key: str) -> str:
    """The one message parse() reports, asserting it is the only problem and names `key`."""
    found = problems(raw)
    assert list(found) == [key], f"expected one problem at {key}, got {found}"
    assert len(found[key]) == 1, found
    return found[key][0]


def ok(raw: dict[str, Any], stack: str = "test") -> PlatformSpec:
    return parse(raw, stack)
