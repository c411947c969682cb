"""components/catalog/machines.yaml: a test walks every row (families, sizes, examples)."""

from __future__ import annotations

import re
from urllib.parse import urlparse

import pytest
import yaml

from components import catalog
from components.catalog import machines
from components.spec import DEFAULT_MANAGER_MACHINE
from tests.components.spec.configs import config, ok, only

RAW = yaml.safe_load(machines.MACHINES_FILE.read_text())
VENDOR_DOMAIN = {"aws": "docs.aws.amazon.com", "gcp": "cloud.google.com", "azure": "learn.microsoft.com"}
EXAMPLES = [(cloud, m) for cloud, row in sorted(RAW.items()) for m in row["examples"]]


@pytest.mark.parametrize("cloud", sorted(RAW))
def test_cloud_row(cloud):
    row = RAW[cloud]
    assert {"source", "pattern", "families", "sizes", "examples"} <= set(row) <= {
        "source", "pattern", "families", "sizes", "examples", "requirement"}
    url = urlparse(row["source"])
    assert url.scheme == "https" and url.hostname == VENDOR_DOMAIN[cloud]
    assert set(re.compile(row["pattern"]).groupindex) == {"family", "size"}
    for values in (row["families"], row["sizes"], row["examples"]):
        assert values and len(values) == len(set(values))


@pytest.mark.parametrize("cloud", sorted(RAW))
def test_the_default_manager_machine_passes(cloud):
    assert machines.rules(cloud).problem(DEFAULT_MANAGER_MACHINE[cloud]) is None


@pytest.mark.parametrize("cloud, machine", EXAMPLES, ids=[f"{c}-{m}" for c, m in EXAMPLES])
def test_every_example_is_a_valid_manager_machine(cloud, machine):
    assert machines.rules(cloud).problem(machine) is None
    assert catalog.find_machine(cloud, machine) is None, "an example must not be a GPU machine"
    assert ok(config(cloud, managerPool={"machineType": machine})).manager_pool.machine_type == machine


@pytest.mark.parametrize("cloud", sorted(RAW))
def test_every_family_and_size_combination_parses(cloud):
    rules = machines.rules(cloud)
    sample = {"aws": "{f}.{s}", "gcp": "{f}-{s}", "azure": "Standard_{f}{s}s_v5"}[cloud]
    for family in rules.families:
        for size in rules.sizes:
            assert rules.problem(sample.format(f=family, s=size)) is None, (family, size)


def test_the_aws_pattern_is_the_naming_scheme_of_every_aws_gpu_machine_too():
    # family.size covers g4dn.xlarge and p4de.24xlarge alike; GPU families are refused for the
    # manager pool as GPU machines (spec), not as misnamed ones.
    pattern = machines.rules("aws").pattern
    types = [m.type for g in catalog.load().values() if "aws" in g.offerings for m in g.offerings["aws"].machines]
    assert types and all(pattern.match(t) for t in types)


@pytest.mark.parametrize("machine", ["Standard_D2s_v5", "Standard_B4ms_v2", "Standard_B2ms_v2", "Standard_F2s_v2"])
def test_an_aks_system_pool_machine_below_its_minimum_is_refused(machine):
    """Regression (issue 20, Azure review 12): 2-vCPU and B-series sizes passed for the manager pool,
    which is the AKS system pool ("at least 4 vCPUs", "B series VMs aren't supported")."""
    message = only(config("azure", managerPool={"machineType": machine}), "torchfleet:managerPool.machineType")
    assert "at least 4 vCPUs and no B-series" in message and "use-system-pools" in message
