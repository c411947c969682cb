"""components/catalog/gpus.yaml: a test walks every row (docs/facts.md, "Conventions").

The rows are read both raw (what the YAML says, e.g. that a date is a quoted string) and through
components.catalog (what parse() sees).
"""

from __future__ import annotations

import datetime
import re
from urllib.parse import urlparse

import pytest
import yaml

from components import catalog

RAW = yaml.safe_load(catalog.CATALOG_FILE.read_text())
CLOUDS = ("aws", "gcp", "azure")
VENDOR_DOMAIN = {"aws": "aws.amazon.com", "gcp": "cloud.google.com", "azure": "learn.microsoft.com"}
# aws: family.size (g4dn.xlarge, p5.48xlarge, g4dn.metal); gcp: the GPU-carrying families; azure: Standard_.
MACHINE_NAME = {
    "aws": re.compile(r"^[a-z]+\d+[a-z]*\.(\d*xlarge|large|metal)$"),
    "gcp": re.compile(r"^(n1|g2|a2|a3)-[a-z]+-\d+g?$"),
    "azure": re.compile(r"^Standard_[A-Za-z0-9_]+$"),
}
# Each GPU comes on one instance family per cloud (AWS: the part before the size).
AWS_FAMILY = {
    "t4": {"g4dn"}, "k80": {"p2"}, "v100": {"p3"}, "a10g": {"g5"}, "l4": {"g6"},
    "a100-40gb": {"p4d"}, "a100-80gb": {"p4de"}, "h100": {"p5"},
}
# GCP attaches each GPU to one machine family only.
GCP_FAMILY = {"t4": "n1", "k80": "n1", "v100": "n1", "l4": "g2", "a100-40gb": "a2", "a100-80gb": "a2", "h100": "a3"}

OFFERINGS = [(gpu, cloud) for gpu, row in sorted(RAW.items()) for cloud in row["offerings"]]
MACHINES = [
    (gpu, cloud, m)
    for gpu, row in sorted(RAW.items())
    for cloud, offer in row["offerings"].items()
    for m in offer["machines"]
]


def test_every_gpu_of_the_issue_is_in_the_catalog():
    assert catalog.gpu_keys() == sorted(["t4", "k80", "v100", "a10g", "l4", "a100-40gb", "a100-80gb", "h100"])


@pytest.mark.parametrize("gpu", sorted(RAW))
def test_gpu_row_has_a_name_memory_and_offerings(gpu):
    row = RAW[gpu]
    assert set(row) == {"name", "memoryGb", "offerings"}
    assert row["name"].startswith("NVIDIA ")
    assert isinstance(row["memoryGb"], int) and row["memoryGb"] > 0
    assert row["offerings"] and set(row["offerings"]) <= set(CLOUDS)
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", gpu), "GPU keys end up in pool and node names"


@pytest.mark.parametrize("gpu, cloud", OFFERINGS)
def test_offering_cites_its_vendor_page(gpu, cloud):
    url = urlparse(RAW[gpu]["offerings"][cloud]["source"])
    assert url.scheme == "https"
    assert url.hostname == VENDOR_DOMAIN[cloud]
    assert url.path not in ("", "/")


@pytest.mark.parametrize("gpu, cloud", OFFERINGS)
def test_offering_status_and_retirement_fields(gpu, cloud):
    offer = RAW[gpu]["offerings"][cloud]
    allowed = {"status", "source", "machines", "accelerator", "retired", "reason", "replacement"}
    assert set(offer) <= allowed, f"unknown fields {set(offer) - allowed}"
    assert offer["status"] in ("available", "retired")
    retirement = {k: offer.get(k) for k in ("retired", "reason", "replacement")}
    if offer["status"] == "available":
        assert retirement == dict.fromkeys(retirement), "only retired offerings carry retirement fields"
        return
    # Quoted in the YAML: an unquoted date loads as datetime.date and would print differently.
    assert isinstance(offer["retired"], str)
    datetime.date.fromisoformat(offer["retired"])
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", offer["retired"])
    assert isinstance(offer["reason"], str) and len(offer["reason"]) > 20
    # The suggestion in the config error must be usable on the same cloud.
    replacement = catalog.offering(offer["replacement"], cloud)
    assert replacement is not None, f"{offer['replacement']} is not offered on {cloud}"
    assert replacement.available


@pytest.mark.parametrize("gpu, cloud", OFFERINGS)
def test_offering_machines(gpu, cloud):
    machines = RAW[gpu]["offerings"][cloud]["machines"]
    assert machines, "an offering needs at least one machine"
    types = [m["type"] for m in machines]
    assert len(types) == len(set(types)), f"duplicate machine types in {gpu} on {cloud}"


@pytest.mark.parametrize("gpu, cloud, machine", MACHINES, ids=[f"{g}-{c}-{m['type']}" for g, c, m in MACHINES])
def test_machine_row(gpu, cloud, machine):
    assert {"type", "gpus", "vcpus", "memoryGib"} <= set(machine) <= {"type", "gpus", "vcpus", "memoryGib", "spotOnly"}
    assert machine.get("spotOnly", False) in (True, False)  # true only where the source says spot-only
    for field in ("gpus", "vcpus", "memoryGib"):
        value = machine[field]
        assert isinstance(value, int) and not isinstance(value, bool) and value > 0, f"{field}={value!r}"
    assert MACHINE_NAME[cloud].match(machine["type"]), f"{machine['type']} is not a {cloud} machine name"
    if cloud == "aws":
        family = machine["type"].split(".")[0]
        assert family in AWS_FAMILY[gpu], f"{gpu} comes on {AWS_FAMILY[gpu]} instances, not {family}"
    if cloud == "gcp":
        family = machine["type"].split("-")[0]
        assert family == GCP_FAMILY[gpu], f"GCP attaches {gpu} to {GCP_FAMILY[gpu]} machines, not {family}"
        if family != "n1":
            # Accelerator-optimized shapes carry their GPU count in the name (a2-highgpu-4g).
            count = re.search(r"-(\d+)g$", machine["type"])
            if count:
                assert int(count.group(1)) == machine["gpus"]


@pytest.mark.parametrize("gpu, cloud", OFFERINGS)
def test_gcp_offerings_name_their_accelerator(gpu, cloud):
    accelerator = RAW[gpu]["offerings"][cloud].get("accelerator")
    if cloud == "gcp":
        assert accelerator and re.fullmatch(r"nvidia-[a-z0-9-]+", accelerator)
    else:
        assert accelerator is None, "only GKE node pools take a guest_accelerator type"


@pytest.mark.parametrize("gpu, cloud", OFFERINGS)
def test_default_machine_is_the_smallest_one_gpu_machine(gpu, cloud):
    # A pool without machineTypes gets this; starting on the cheapest single-GPU node is the point.
    offer = catalog.offering(gpu, cloud)
    single = [m for m in offer.machines if m.gpus == 1]
    if single:
        assert offer.default_machine.gpus == 1
        assert offer.default_machine == min(single, key=lambda m: (m.vcpus, m.memory_gib))
    else:
        assert offer.default_machine == min(offer.machines, key=lambda m: m.gpus)


def test_loaded_catalog_matches_the_yaml():
    loaded = catalog.load()
    assert set(loaded) == set(RAW)
    for gpu, cloud in OFFERINGS:
        offer = loaded[gpu].offerings[cloud]
        raw = RAW[gpu]["offerings"][cloud]
        assert (offer.gpu, offer.cloud, offer.status, offer.source) == (gpu, cloud, raw["status"], raw["source"])
        assert [(m.type, m.gpus, m.vcpus, m.memory_gib) for m in offer.machines] == [
            (m["type"], m["gpus"], m["vcpus"], m["memoryGib"]) for m in raw["machines"]
        ]


@pytest.mark.parametrize(
    "gpu, cloud, status",
    [
        ("k80", "aws", "retired"),
        ("k80", "gcp", "retired"),
        ("k80", "azure", "retired"),
        ("v100", "azure", "retired"),  # NCv3, September 2025
        # Regression (catalog check 2026-11-23): V100 on AWS was listed as available although EC2
        # no longer offers any p3 type (AWS's migrate-by date: 2025-12-20).
        ("v100", "aws", "retired"),
        ("v100", "gcp", "available"),
    ],
)
def test_retired_gpus(gpu, cloud, status):
    assert catalog.offering(gpu, cloud).status == status


def test_k80_is_retired_everywhere():
    assert set(RAW["k80"]["offerings"]) == set(CLOUDS)
    assert all(not catalog.offering("k80", c).available for c in CLOUDS)


def test_a10g_only_on_aws():
    assert list(RAW["a10g"]["offerings"]) == ["aws"]
    assert [c for c in CLOUDS if "a10g" in catalog.offered_on(c)] == ["aws"]


@pytest.mark.parametrize(
    "cloud, offered",
    [
        ("aws", ["a100-40gb", "a100-80gb", "a10g", "h100", "l4", "t4"]),
        ("gcp", ["a100-40gb", "a100-80gb", "h100", "l4", "t4", "v100"]),
        ("azure", ["a100-40gb", "a100-80gb", "h100", "t4"]),
    ],
)
def test_offered_on_excludes_retired_and_absent(cloud, offered):
    assert catalog.offered_on(cloud) == offered


@pytest.mark.parametrize(
    "cloud, machine, expected",
    [
        ("aws", "g4dn.12xlarge", ("t4", 4)),
        ("aws", "g6.16xlarge", ("l4", 1)),  # regression: the catalog lacked this real G6 size
        ("gcp", "g2-standard-24", ("l4", 2)),
        ("azure", "Standard_NC40ads_H100_v5", ("h100", 1)),
        ("aws", "m6i.large", None),
        ("gcp", "g4dn.xlarge", None),  # another cloud's machine
    ],
)
def test_find_machine(cloud, machine, expected):
    found = catalog.find_machine(cloud, machine)
    if expected is None:
        assert found is None
    else:
        assert (found[0], found[1].gpus) == expected
