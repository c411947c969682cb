"""components.spec.parse on every example stack in stacks/: the happy path, read as Pulumi passes it.

stack_config() gives the config as the engine hands it to the program (structured values as JSON
text); components.config.decode_value turns it back the way the program does, then parse() builds the spec.
"""

from __future__ import annotations

import dataclasses

import pytest

from components import catalog
from components.config import decode_value
from components.spec import PlatformSpec, parse
from tests.harness import STACKS, STACKS_DIR
from torchfleet.preview.runner import stack_config

# Per stack: cloud, region, zones, and every GPU pool as (name, gpu, zone, machine types, spot, min, max).
EXPECTED = {
    "aws-usw2": (
        "aws", "us-west-2", ("us-west-2a", "us-west-2b"),
        [
            ("gpu-t4-us-west-2a", "t4", "us-west-2a", ["g4dn.xlarge"], True, 0, 8),
            ("gpu-t4-us-west-2b", "t4", "us-west-2b", ["g4dn.xlarge"], True, 0, 8),
            # No machineTypes: the catalog's default; spot: false in the stack; zones: only 2a.
            ("gpu-a10g-us-west-2a", "a10g", "us-west-2a", ["g5.xlarge"], False, 0, 2),
        ],
    ),
    "gcp-usc1": (
        "gcp", "us-central1", ("us-central1-a", "us-central1-b"),
        [
            ("gpu-t4-us-central1-a", "t4", "us-central1-a", ["n1-standard-8"], True, 0, 8),
            ("gpu-t4-us-central1-b", "t4", "us-central1-b", ["n1-standard-8"], True, 0, 8),
            ("gpu-l4-us-central1-a", "l4", "us-central1-a", ["g2-standard-4"], True, 0, 4),
        ],
    ),
    "azure-eus": (
        "azure", "eastus", ("1", "2", "3"),
        [
            ("gpu-t4-1", "t4", "1", ["Standard_NC8as_T4_v3"], True, 0, 8),
            ("gpu-t4-2", "t4", "2", ["Standard_NC8as_T4_v3"], True, 0, 8),
            ("gpu-t4-3", "t4", "3", ["Standard_NC8as_T4_v3"], True, 0, 8),
            ("gpu-a100-80gb-1", "a100-80gb", "1", ["Standard_NC24ads_A100_v4"], False, 0, 1),
        ],
    ),
    "local": ("local", None, ("local",), []),
}


def _raw(stack: str) -> dict:
    name, config, _secrets = stack_config(STACKS_DIR / f"Pulumi.{stack}.yaml")
    assert name == stack
    return {key: decode_value(value) for key, value in config.items()}


def _spec(stack: str) -> PlatformSpec:
    return parse(_raw(stack), stack)


def test_every_example_stack_has_a_row():
    assert sorted(EXPECTED) == STACKS


@pytest.mark.parametrize("stack", STACKS)
def test_stack_parses_to_its_pools(stack):
    cloud, region, zones, expected = EXPECTED[stack]
    spec = _spec(stack)
    assert (spec.stack, spec.cloud, spec.region, spec.zones) == (stack, cloud, region, zones)
    got = [(p.name, p.gpu, p.zone, p.machine_types, p.spot, p.min_nodes, p.max_nodes) for p in spec.gpu_pools]
    assert got == expected


@pytest.mark.parametrize("stack", STACKS)
def test_pool_names_labels_and_zones_follow_the_contract(stack):
    spec = _spec(stack)
    for pool in spec.gpu_pools:
        assert pool.name == f"gpu-{pool.gpu}-{pool.zone}"
        assert pool.zone in spec.zones
        assert pool.labels == {
            "torchfleet.io/pool": "gpu",
            "torchfleet.io/gpu": pool.gpu,
            "torchfleet.io/capacity": "spot" if pool.spot else "on-demand",
            "nvidia.com/gpu.present": "true",
        }
    assert len({p.name for p in spec.gpu_pools}) == len(spec.gpu_pools)


@pytest.mark.parametrize("stack", STACKS)
def test_pools_without_machine_types_get_the_catalog_default(stack):
    spec = _spec(stack)
    entries = {e["gpu"]: e for e in _raw(stack).get("torchfleet:gpuPools", [])}
    for pool in spec.gpu_pools:
        offer = catalog.offering(pool.gpu, spec.cloud)
        if "machineTypes" not in entries[pool.gpu]:
            assert pool.machines == (offer.default_machine,)
            assert pool.gpus_per_node == 1
        assert pool.accelerator == offer.accelerator


@pytest.mark.parametrize("stack", STACKS)
def test_spot_is_the_default(stack):
    spec = _spec(stack)
    entries = {e["gpu"]: e for e in _raw(stack).get("torchfleet:gpuPools", [])}
    for pool in spec.gpu_pools:
        assert pool.spot is entries[pool.gpu].get("spot", True)
        assert pool.capacity == ("spot" if pool.spot else "on-demand")


def test_gcp_pools_carry_the_accelerator_type():
    assert {p.gpu: p.accelerator for p in _spec("gcp-usc1").gpu_pools} == {"t4": "nvidia-tesla-t4", "l4": "nvidia-l4"}


@pytest.mark.parametrize(
    "stack, manager, etcd, grace, storage",
    [
        ("aws-usw2", ("m6i.large", 1, 3), 3, 120, (True, None, None)),
        ("gcp-usc1", ("e2-standard-4", 1, 3), 3, 15, (True, "BASIC_HDD", 1024)),
        ("azure-eus", ("Standard_D4s_v5", 1, 3), 3, 30, (True, "Premium_LRS", 1024)),
        ("local", ("", 0, 0), 1, 30, (False, None, None)),
    ],
)
def test_stack_manager_training_and_storage(stack, manager, etcd, grace, storage):
    spec = _spec(stack)
    m = spec.manager_pool
    assert (m.machine_type, m.min_nodes, m.max_nodes) == manager
    assert (spec.training.operator, spec.training.namespace) == ("job", "elastic-job")
    assert spec.training.etcd_replicas == etcd
    assert spec.training.termination_grace_s == grace  # the cloud's spot notice window
    assert (spec.storage.protect, spec.storage.tier, spec.storage.size_gb) == storage


def test_aws_stack_max_gpus():
    # 2 zones x 8 one-GPU T4 nodes + 2 one-GPU A10G nodes.
    assert _spec("aws-usw2").max_gpus == 18


def test_spec_is_frozen():
    # Components get the spec and must not change it under another component.
    spec = _spec("aws-usw2")
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.gpu_pools[0].max_nodes = 99  # type: ignore[misc]
