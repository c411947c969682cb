"""Spot and on-demand prices per region (spot_prices.yaml, issue 32): the price of a machine in a
stack's own region at its pool's capacity type, with the date its source gives. prices.yaml stays the
one-region on-demand ceiling; a machine or region absent here is None, and the caller says "no spot
price known for <machine> in <cloud>/<region>" with the file's stated reason (unknown()).
Pure Python: no pulumi import.
"""

from __future__ import annotations

import datetime
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

SPOT_PRICES_FILE = Path(__file__).with_name("spot_prices.yaml")
UNKNOWN = "unknown"  # the file's one key that is not a <cloud>/<region> row
NOT_LISTED = "components/catalog/spot_prices.yaml has no row for it"
STALE_DAYS = 180  # a snapshot older than this is said to be old wherever its prices are shown


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
        """"spot, us-central1, snapshot of 2026-07-30": the words printed beside a price taken from this row
        (a snapshot: spot prices move, the date says how old the figure is)."""
        return f"{'spot' if spot else 'on-demand'}, {self.region}, snapshot of {self.priced}"


@functools.cache
def _raw() -> dict[str, Any]:
    return yaml.safe_load(SPOT_PRICES_FILE.read_text())


@functools.cache
def load() -> dict[str, dict[str, RegionPrice]]:
    """{"gcp/us-central1": {machine: RegionPrice}} in file order."""
    return {key: _row(key, row) for key, row in _raw().items() if key != UNKNOWN}


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


def unknown(cloud: str, region: str, machine: str) -> str | None:
    """Why the file has no price for a machine in a region on purpose (its `unknown:` entries), else None."""
    for entry in (_raw().get(UNKNOWN) or {}).get(cloud) or []:
        regions, machines = entry["regions"], entry["machines"]
        if (regions == "all" or region in regions) and (machines == "all" or machine in machines):
            return str(entry["why"])
    return None


def missing(cloud: str, region: str | None, machine: str) -> str:
    """"no spot price known for g4dn.xlarge in aws/us-west-2 (why)": the words for a machine without a row."""
    why = unknown(cloud, region, machine) if region is not None else None
    return f"no spot price known for {machine} in {cloud}/{region or '?'} ({why or NOT_LISTED})"


def stale(priced: object, today: datetime.date | None = None) -> str | None:
    """"the 2026-07-30 spot price snapshot is 214 days old: ..." when a row's date is more than STALE_DAYS
    before today (spot prices move weekly; an old figure may be far off), else None. Computed from today's date
    so that the warning appears by itself as the snapshot ages (issue 32, a second fresh walk)."""
    date = datetime.date.fromisoformat(str(priced))
    days = ((today or datetime.date.today()) - date).days
    if days <= STALE_DAYS:
        return None
    return (f"the {date.isoformat()} spot price snapshot is {days} days old (over {STALE_DAYS}): "
            "check the cloud's current price before relying on it")
