"""The GPU catalog: which GPUs each cloud offers, on which machines, and which are retired.

The data lives in gpus.yaml (one row per machine, each offering citing its vendor page); this
module only loads it into frozen records and answers lookups. Pure Python: no pulumi import.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from components.catalog.rows import load_rows

CATALOG_FILE = Path(__file__).with_name("gpus.yaml")


@dataclass(frozen=True)
class Machine:
    type: str
    gpus: int
    vcpus: int
    memory_gib: int
    # Offered only as spot (or another non-on-demand model): a pool with spot: false gets no node ever.
    spot_only: bool = False


@dataclass(frozen=True)
class Offering:
    """One GPU on one cloud."""

    gpu: str
    cloud: str
    status: str  # "available" | "retired"
    source: str
    machines: tuple[Machine, ...]
    retired: str | None = None
    reason: str | None = None
    replacement: str | None = None
    accelerator: str | None = None  # GCP's guest_accelerator type

    @property
    def available(self) -> bool:
        return self.status == "available"

    @property
    def default_machine(self) -> Machine:
        """The smallest one-GPU machine: what a pool gets when it names no machineTypes."""
        single = [m for m in self.machines if m.gpus == 1]
        return (single or list(self.machines))[0]

    def machine(self, machine_type: str) -> Machine | None:
        return next((m for m in self.machines if m.type == machine_type), None)


@dataclass(frozen=True)
class Gpu:
    key: str
    name: str
    memory_gb: int
    offerings: dict[str, Offering]


@functools.cache
def load() -> dict[str, Gpu]:
    return load_rows(CATALOG_FILE, _gpu)


def _gpu(key: str, row: dict) -> Gpu:
    offerings = {
        cloud: Offering(
            gpu=key,
            cloud=cloud,
            status=o["status"],
            source=o["source"],
            machines=tuple(
                Machine(m["type"], m["gpus"], m["vcpus"], m["memoryGib"], bool(m.get("spotOnly", False)))
                for m in o["machines"]
            ),
            retired=o.get("retired"),
            reason=o.get("reason"),
            replacement=o.get("replacement"),
            accelerator=o.get("accelerator"),
        )
        for cloud, o in row["offerings"].items()
    }
    return Gpu(key=key, name=row["name"], memory_gb=row["memoryGb"], offerings=offerings)


def gpu_keys() -> list[str]:
    return sorted(load())


def offering(gpu: str, cloud: str) -> Offering | None:
    entry = load().get(gpu)
    return entry.offerings.get(cloud) if entry else None


def offered_on(cloud: str) -> list[str]:
    """GPU keys a cloud offers today (retired ones excluded)."""
    return sorted(k for k, g in load().items() if cloud in g.offerings and g.offerings[cloud].available)


def find_machine(cloud: str, machine_type: str) -> tuple[str, Machine] | None:
    """(gpu key, machine) for a machine type on a cloud, or None: the CLI sizes jobs with this."""
    for key, entry in load().items():
        o = entry.offerings.get(cloud)
        if o and (m := o.machine(machine_type)):
            return key, m
    return None


def list_price(gpu: str, cloud: str, machine_type: str) -> float | None:
    """The on-demand list price (USD per hour) of one machine of a GPU offering, its GPUs included,
    from prices.yaml; None where the machine is not in the offering or has no list price."""
    from components.catalog import prices  # prices.yaml is its own file, like machines.yaml

    found = offering(gpu, cloud)
    machine = found.machine(machine_type) if found else None
    return prices.machine_price(cloud, machine_type, gpu, machine.gpus) if machine else None
