"""components/catalog/prices.yaml: a test walks every row (issue 13, cost at a glance).

Every machine a stack can get (the GPU catalog's available machines, each cloud's default manager
machine and the example stacks' ones) has a list price or a stated reason for having none; every
price is dated, sourced, and within a plausible band per GPU, so a misplaced digit fails here.
"""

from __future__ import annotations

import datetime
import itertools
import re
from urllib.parse import urlparse

import pytest
import yaml

from components import catalog
from components.catalog import machines, prices
from components.catalog import regions as region_catalog
from components.spec import DEFAULT_MANAGER_MACHINE
from tests.harness import REPO

RAW = yaml.safe_load(prices.PRICES_FILE.read_text())
CLOUDS = ("aws", "gcp", "azure")
VENDOR_DOMAIN = {"aws": "aws.amazon.com", "gcp": "cloud.google.com", "azure": "azure.microsoft.com"}
ROWS = [(cloud, machine, usd) for cloud in CLOUDS for machine, usd in RAW[cloud]["usdPerHour"].items()]
GPU_MACHINES = [
    (gpu, cloud, m)
    for gpu in catalog.gpu_keys()
    for cloud, offer in catalog.load()[gpu].offerings.items()
    if offer.available
    for m in offer.machines
]
# USD per GPU-hour, on demand: the widest span of the three clouds' list prices, with room (a
# one-GPU machine with 64 vCPUs costs 4.35 as g4dn.16xlarge, 3.40 as g6.16xlarge). A price outside
# its band is a typo (a digit lost or added), not a pricing decision.
PER_GPU_BAND = {
    "t4": (0.25, 4.5), "v100": (2.0, 4.0), "a10g": (0.5, 4.5), "l4": (0.5, 3.5),
    "a100-40gb": (2.5, 4.5), "a100-80gb": (3.0, 5.5), "h100": (5.0, 13.0),
}


def stack_manager_machines() -> set[tuple[str, str]]:
    found = set()
    for path in sorted((REPO / "stacks").glob("Pulumi.*.yaml")):
        config = yaml.safe_load(path.read_text())["config"]
        cloud = config["torchfleet:cloud"]
        if cloud in CLOUDS:
            found.add((cloud, (config.get("torchfleet:managerPool") or {}).get("machineType")
                       or DEFAULT_MANAGER_MACHINE[cloud]))
    return found


@pytest.mark.parametrize("cloud", CLOUDS)
def test_cloud_row_is_sourced_dated_and_regional(cloud):
    row = RAW[cloud]
    assert set(row) <= {"source", "region", "priced", "usdPerHour", "unpriced", "attachedGpuUsdPerHour"}
    url = urlparse(row["source"])
    assert url.scheme == "https" and url.hostname == VENDOR_DOMAIN[cloud] and url.path not in ("", "/")
    # Quoted in the YAML: an unquoted date loads as datetime.date and would print differently.
    assert isinstance(row["priced"], str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", row["priced"])
    assert datetime.date.fromisoformat(row["priced"]) <= datetime.date.today()
    assert region_catalog.region(cloud, row["region"]) is not None, f"{row['region']} is not a {cloud} region"


@pytest.mark.parametrize("cloud, machine, usd", ROWS, ids=[f"{c}-{m}" for c, m, _ in ROWS])
def test_every_price_is_a_known_machine_at_a_positive_price(cloud, machine, usd):
    assert isinstance(usd, (int, float)) and not isinstance(usd, bool) and 0 < usd < 200, usd
    is_gpu_machine = any(m.type == machine for g, c, m in GPU_MACHINES if c == cloud)
    is_manager_machine = machines.rules(cloud).problem(machine) is None
    assert is_gpu_machine or is_manager_machine, f"{machine} is neither a GPU machine nor a manager machine on {cloud}"
    assert machine not in RAW[cloud].get("unpriced", {}), "a machine has a price or a reason, not both"


@pytest.mark.parametrize("gpu, cloud, machine", GPU_MACHINES, ids=[f"{g}-{c}-{m.type}" for g, c, m in GPU_MACHINES])
def test_every_available_gpu_machine_has_a_price_or_a_reason(gpu, cloud, machine):
    usd = catalog.list_price(gpu, cloud, machine.type)
    reason = RAW[cloud].get("unpriced", {}).get(machine.type)
    assert (usd is None) == (reason is not None), f"{machine.type}: a price or a reason, exactly one"
    if usd is None:
        assert len(reason) > 20
        return
    low, high = PER_GPU_BAND[gpu]
    assert low <= usd / machine.gpus <= high, f"{machine.type}: {usd / machine.gpus:.2f} USD per {gpu}-hour"


@pytest.mark.parametrize("gpu, cloud", sorted({(g, c) for g, c, _ in GPU_MACHINES}))
def test_more_vcpus_with_the_same_gpus_never_costs_less(gpu, cloud):
    offer = catalog.offering(gpu, cloud)
    priced = [(m.gpus, m.vcpus, catalog.list_price(gpu, cloud, m.type), m.type) for m in offer.machines]
    priced = sorted(p for p in priced if p[2] is not None)
    for (g1, _, usd1, t1), (g2, _, usd2, t2) in itertools.pairwise(priced):
        if g1 == g2:
            assert usd2 > usd1, f"{t2} costs {usd2}, not more than {t1} at {usd1}"


@pytest.mark.parametrize("cloud, machine", sorted({(c, DEFAULT_MANAGER_MACHINE[c]) for c in CLOUDS}
                                                  | stack_manager_machines()))
def test_every_default_and_example_manager_machine_is_priced(cloud, machine):
    assert prices.machine_price(cloud, machine) is not None


def test_attached_gpus_are_gcp_n1_gpus():
    # GCP bills T4 and V100 per GPU on top of the N1 machine; A2, A3 and G2 include theirs.
    offered = catalog.offered_on("gcp")
    on_n1 = {g for g in offered if all(m.type.startswith("n1-") for m in catalog.offering(g, "gcp").machines)}
    assert set(RAW["gcp"]["attachedGpuUsdPerHour"]) == on_n1
    assert all("attachedGpuUsdPerHour" not in RAW[c] for c in ("aws", "azure"))


@pytest.mark.parametrize(
    "gpu, cloud, machine, usd",
    [
        ("t4", "gcp", "n1-standard-8", 0.729998),  # the machine (0.379998) and one T4 (0.35)
        ("v100", "gcp", "n1-standard-64", 22.879984),  # 3.039984 + 8 x 2.48
        ("t4", "aws", "g4dn.xlarge", 0.526),
        ("h100", "gcp", "a3-highgpu-1g", None),  # spot or flex-start only
        ("t4", "aws", "p5.48xlarge", None),  # not a T4 machine
        ("k80", "aws", "p2.xlarge", None),  # retired: no price
    ],
)
def test_list_price(gpu, cloud, machine, usd):
    assert catalog.list_price(gpu, cloud, machine) == usd


def test_loaded_prices_match_the_yaml():
    for cloud in CLOUDS:
        loaded = prices.of(cloud)
        assert (loaded.source, loaded.region, loaded.priced) == (RAW[cloud]["source"], RAW[cloud]["region"],
                                                                 RAW[cloud]["priced"])
        assert loaded.machines == RAW[cloud]["usdPerHour"]
    assert prices.of("local") is None and prices.machine_price("local", "m6i.large") is None
