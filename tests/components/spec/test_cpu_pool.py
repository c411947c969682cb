"""torchfleet:cpuPool (issue 30): optional; where the CLI's pods without a GPU run, never the manager pool. Parsed
like the other pools: every problem at once, each naming its key."""

from __future__ import annotations

import pytest

from components.spec import CpuPoolSpec
from tests.components.spec.configs import config, ok, only, problems

CLOUDS = ["aws", "gcp", "azure"]
MACHINE = {"aws": "m6i.large", "gcp": "e2-standard-4", "azure": "Standard_D4s_v5"}


@pytest.mark.parametrize("cloud", CLOUDS)
def test_no_cpu_pool_unless_asked(cloud):
    assert ok(config(cloud)).cpu_pool is None


@pytest.mark.parametrize("cloud", CLOUDS)
def test_defaults_scale_from_zero_on_demand_over_every_zone(cloud):
    spec = ok(config(cloud, cpuPool={"maxNodes": 3}))
    assert spec.cpu_pool == CpuPoolSpec(machine_type=MACHINE[cloud], zones=tuple(sorted(spec.zones)), min_nodes=0,
                                        max_nodes=3, spot=False, disk_size_gb=100,
                                        encryption_at_host=cloud == "azure")  # fmt: skip
    assert spec.cpu_pool.labels == {"torchfleet.io/pool": "cpu", "torchfleet.io/capacity": "on-demand"}


def test_every_setting_is_taken():
    spec = ok(config("aws", cpuPool={"machineType": "m6i.xlarge", "minNodes": 1, "maxNodes": 6, "spot": True,
                                     "zones": ["us-west-2b"], "diskSizeGb": 50}))  # fmt: skip
    assert spec.cpu_pool == CpuPoolSpec("m6i.xlarge", ("us-west-2b",), 1, 6, True, 50, False)
    assert spec.cpu_pool.labels["torchfleet.io/capacity"] == "spot"


def test_every_problem_is_reported_at_once_naming_its_key():
    found = problems(config("aws", cpuPool={"machineType": "g4dn.xlarge", "minNodes": 5, "maxNodes": 2,
                                            "spot": "yes", "zones": ["us-east-1a"], "diskSizeGb": 5, "colour": 1}))
    assert set(found) == {
        "torchfleet:cpuPool.machineType", "torchfleet:cpuPool.minNodes", "torchfleet:cpuPool.spot",
        "torchfleet:cpuPool.zones", "torchfleet:cpuPool.diskSizeGb", "torchfleet:cpuPool.colour",
    }, found
    assert "is a GPU machine" in found["torchfleet:cpuPool.machineType"][0]
    assert "must not exceed maxNodes" in found["torchfleet:cpuPool.minNodes"][0]
    assert "is not one of torchfleet:zones" in found["torchfleet:cpuPool.zones"][0]


def test_max_nodes_is_required():
    assert "required" in only(config("gcp", cpuPool={"machineType": "e2-standard-4"}), "torchfleet:cpuPool.maxNodes")


def test_an_empty_zone_list_is_refused():
    assert "names no zone" in only(config("azure", cpuPool={"maxNodes": 2, "zones": []}), "torchfleet:cpuPool.zones")


def test_not_an_object_is_refused():
    assert only(config("aws", cpuPool="m6i.large"), "torchfleet:cpuPool")


def test_the_local_stack_has_no_pools():
    assert "the local stack has no node pools" in only(config("local", cpuPool={"maxNodes": 1}), "torchfleet:cpuPool")


def test_a_misspelt_key_is_pointed_at_cpu_pool():
    found = problems(config("aws", cpuPol={"maxNodes": 1}))
    assert "did you mean 'torchfleet:cpuPool'?" in found["torchfleet:cpuPol"][0]


def test_encryption_at_host_is_azure_only():
    assert "only Azure pools" in only(config("aws", cpuPool={"maxNodes": 1, "encryptionAtHost": True}),
                                      "torchfleet:cpuPool.encryptionAtHost")
