"""Spot and on-demand prices per region (spot_prices.yaml, issue 32): the price of a machine in a
stack's own region at its pool's capacity type, with the date its source gives. prices.yaml stays the
one-region on-demand ceiling; a machine or region absent here is None, and the caller says so.
Pure Python: no pulumi import.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components.catalog.rows import load_rows

SPOT_PRICES_FILE = Path(__file__).with_name("spot_prices.yaml")


@dataclass(frozen=True)
class RegionPrice:
    """One machine in one region: on demand and spot, USD per hour, with where and when they were read."""

    cloud: str
    region: str
    machine: str
    on_demand: float
    spot: float
    source: str
    priced: str

    def usd(self, spot: bool) -> float:
        return self.spot if spot else self.on_demand

    def basis(self, spot: bool) -> str:
        """"spot, us-central1, 2025-03-06": the words printed beside a price taken from this row."""
        return f"{'spot' if spot else 'on-demand'}, {self.region}, {self.priced}"


@functools.cache
def load() -> dict[str, dict[str, RegionPrice]]:
    """{"gcp/us-central1": {machine: RegionPrice}} in file order."""
    return load_rows(SPOT_PRICES_FILE, _row)


def _row(key: str, row: dict[str, Any]) -> dict[str, RegionPrice]:
    cloud, region = key.split("/", 1)
    return {
        str(machine): RegionPrice(cloud, region, str(machine), float(p["onDemand"]), float(p["spot"]),
                                  row["source"], row["priced"])
        for machine, p in row["machines"].items()
    }


def regions(cloud: str) -> list[str]:
    return [key.split("/", 1)[1] for key in load() if key.split("/", 1)[0] == cloud]


def price(cloud: str, region: str | None, machine: str) -> RegionPrice | None:
    """The row for a machine in a region, or None: no dated regional price is shipped for it."""
    if region is None:
        return None
    return load().get(f"{cloud}/{region}", {}).get(machine)
