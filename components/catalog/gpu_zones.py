"""Which zones offer a GPU (gpu_zones.yaml), where a public per-zone list can be trusted. Pure Python:
no pulumi import. A GPU or cloud without rows is not checked per zone (the file says why)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components.catalog.rows import load_rows

GPU_ZONES_FILE = Path(__file__).with_name("gpu_zones.yaml")


@dataclass(frozen=True)
class CloudGpuZones:
    cloud: str
    source: str | None
    date: str | None
    zones: dict[str, dict[str, tuple[str, ...]]]  # gpu -> region -> zone names as a stack lists them
    unchecked: dict[str, str]  # gpu (or "*") -> why no per-zone check

    def offers(self, gpu: str, region: str) -> tuple[str, ...] | None:
        """The zones of `region` offering `gpu` (empty: none), or None where the file has no list."""
        if gpu not in self.zones:
            return None
        return self.zones[gpu].get(region, ())


def _zone_name(cloud: str, region: str, letter: str) -> str:
    return f"{region}-{letter}" if cloud == "gcp" else f"{region}{letter}"


def _cloud(cloud: str, row: dict[str, Any]) -> CloudGpuZones:
    return CloudGpuZones(
        cloud=cloud,
        source=row.get("source"),
        date=row.get("date"),
        zones={
            gpu: {region: tuple(_zone_name(cloud, region, z) for z in letters) for region, letters in regions.items()}
            for gpu, regions in (row.get("gpus") or {}).items()
        },
        unchecked=dict(row.get("unchecked") or {}),
    )


@functools.cache
def load() -> dict[str, CloudGpuZones]:
    return load_rows(GPU_ZONES_FILE, _cloud)


def offers(cloud: str, gpu: str, region: str) -> tuple[str, ...] | None:
    known = load().get(cloud)
    return known.offers(gpu, region) if known else None
