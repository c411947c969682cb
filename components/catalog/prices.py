"""On-demand list prices per machine type (prices.yaml): what `torchfleet gpus`, `check` and
`submit --dry-run` show as the most a machine, a stack or a job can cost per hour (issue 13).

One region per cloud, on demand: the fallback where spot_prices.yaml (dated spot and on-demand
prices per region, issue 32) has no row for a machine in a stack's region; a spot pool never pays
more than the on-demand price. Pure Python: no pulumi import.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components.catalog.rows import load_rows

PRICES_FILE = Path(__file__).with_name("prices.yaml")


@dataclass(frozen=True)
class CloudPrices:
    cloud: str
    source: str
    region: str
    priced: str
    machines: dict[str, float]
    attached_gpus: dict[str, float]  # GCP: the price of one GPU attached to an N1 machine
    unpriced: dict[str, str]

    def price(self, machine_type: str, gpu: str | None = None, gpus: int = 0) -> float | None:
        """USD per hour for one machine carrying ``gpus`` of ``gpu``; None where there is no list price."""
        base = self.machines.get(machine_type)
        if base is None:
            return None
        if gpu in self.attached_gpus:
            base += gpus * self.attached_gpus[gpu]
        return round(base, 6)

    @property
    def basis(self) -> str:
        """Where the figures come from, for the line under a price: "on-demand list price, us-east-1, 2025-09-01"."""
        return f"on-demand list price, {self.region}, {self.priced} ({self.source})"


@functools.cache
def load() -> dict[str, CloudPrices]:
    return load_rows(PRICES_FILE, _cloud_prices)


def _cloud_prices(cloud: str, row: dict[str, Any]) -> CloudPrices:
    return CloudPrices(
        cloud=cloud,
        source=row["source"],
        region=row["region"],
        priced=row["priced"],
        machines={str(k): float(v) for k, v in row["usdPerHour"].items()},
        attached_gpus={str(k): float(v) for k, v in (row.get("attachedGpuUsdPerHour") or {}).items()},
        unpriced={str(k): str(v) for k, v in (row.get("unpriced") or {}).items()},
    )


def of(cloud: str) -> CloudPrices | None:
    return load().get(cloud)


def machine_price(cloud: str, machine_type: str, gpu: str | None = None, gpus: int = 0) -> float | None:
    """USD per hour on demand for a machine (with its GPUs), or None: no list price is known."""
    prices = of(cloud)
    return prices.price(machine_type, gpu, gpus) if prices else None
