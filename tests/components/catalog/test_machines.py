"""components/catalog/machines.yaml: a test walks every row (the real types, examples)."""

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
    assert (
        {"source", "pattern", "types", "examples"}
        <= set(row)
        <= {"source", "pattern", "types", "examples", "requirement"}
    )
    url = urlparse(row["source"])
    assert url.scheme == "https" and url.hostname == VENDOR_DOMAIN[cloud]
    assert set(re.compile(row["pattern"]).groupindex) == {"family", "size"}
    assert row["examples"] and len(row["examples"]) == len(set(row["examples"]))
    for template, sizes in row["types"].items():
        assert template.count("{size}") == 1 and sizes and len(sizes) == len(set(sizes)), template


@pytest.mark.parametrize("cloud", sorted(RAW))
def test_the_default_manager_machine_passes(cloud):
    assert machines.rules(cloud).problem(DEFAULT_MANAGER_MACHINE[cloud]) is None


@pytest.mark.parametrize("cloud, machine", EXAMPLES, ids=[f"{c}-{m}" for c, m in EXAMPLES])
def test_every_example_is_a_valid_manager_machine(cloud, machine):
    assert machines.rules(cloud).problem(machine) is None
    assert catalog.find_machine(cloud, machine) is None, "an example must not be a GPU machine"
    assert ok(config(cloud, managerPool={"machineType": machine})).manager_pool.machine_type == machine


@pytest.mark.parametrize("cloud", sorted(RAW))
def test_every_type_fits_the_naming_pattern_and_passes(cloud):
    rules = machines.rules(cloud)
    assert rules.names
    for name in rules.names:
        assert rules.pattern.match(name), name
        assert rules.problem(name) is None, name
        # GCP attaches GPUs to N1 types, so n1-standard-8 is in both catalogs (spec refuses it as a
        # GPU machine for the manager pool); no other cloud's manager type carries a GPU.
        assert cloud == "gcp" or catalog.find_machine(cloud, name) is None, f"{name} is a GPU machine"


@pytest.mark.parametrize("cloud", sorted(RAW))
def test_every_type_has_its_shape(cloud):
    # [vCPUs, memory GiB] as the source gives them; on GCP and Azure the size in the name is the vCPU count.
    rules = machines.rules(cloud)
    assert set(rules.shapes) == rules.names
    for name, (vcpus, memory_gib) in rules.shapes.items():
        assert vcpus >= 1 and memory_gib >= 1, name
        if cloud != "aws":
            assert str(vcpus) == rules.family_of(name)[1], name


@pytest.mark.parametrize(
    ("cloud", "machine", "says"),
    [
        ("aws", "t3.metal", "'t3.metal' is not a size of t3.*, which comes in medium, large, xlarge, 2xlarge ("),
        ("aws", "m5.96xlarge", "'m5.96xlarge' is not a size of m5.*, which comes in large, "),
        (
            "gcp",
            "e2-standard-360",
            "'e2-standard-360' is not a size of e2-standard-*, which comes in 2, 4, 8, 16, 32; "
            "did you mean e2-standard-32?",
        ),
        ("azure", "Standard_B96s_v9", "'Standard_B96s_v9' is not in the catalog's azure machine types"),
    ],
)
def test_machine_types_that_fit_the_pattern_but_do_not_exist_are_refused(cloud, machine, says):
    # Regression (issue 23): each matched the old family x size pattern and was accepted (exit 0);
    # the catalog now lists the real types, from the sources its header cites.
    message = only(config(cloud, managerPool={"machineType": machine}), "torchfleet:managerPool.machineType")
    assert message.startswith(says), message


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
