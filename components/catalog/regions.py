"""Regions and zones per cloud (regions.yaml): which regions exist, their zones, and, where known,
which catalog GPUs they offer. Pure Python: no pulumi import."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components.catalog.rows import load_rows

REGIONS_FILE = Path(__file__).with_name("regions.yaml")


@dataclass(frozen=True)
class Region:
    cloud: str
    name: str
    zones: tuple[str, ...]  # as a stack lists them: "us-west-2a", "us-central1-a", "1"
    gpus: tuple[str, ...] | None  # catalog GPU keys offered here; None: not known, not checked


@dataclass(frozen=True)
class CloudRegions:
    cloud: str
    source: str
    checked: str
    regions: dict[str, Region]


def _zone_names(cloud: str, region: str, letters: list) -> tuple[str, ...]:
    if cloud == "aws":
        return tuple(f"{region}{z}" for z in letters)
    if cloud == "gcp":
        return tuple(f"{region}-{z}" for z in letters)
    return tuple(str(z) for z in letters)  # azure: "1", "2", "3"


@functools.cache
def load() -> dict[str, CloudRegions]:
    return load_rows(REGIONS_FILE, _cloud_regions)


def _cloud_regions(cloud: str, row: dict[str, Any]) -> CloudRegions:
    return CloudRegions(
        cloud=cloud,
        source=row["source"],
        checked=row["checked"],
        regions={
            name: Region(
                cloud,
                name,
                _zone_names(cloud, name, r["zones"]),
                tuple(r["gpus"]) if "gpus" in r else None,
            )
            for name, r in row["regions"].items()
        },
    )


def region(cloud: str, name: str) -> Region | None:
    known = load().get(cloud)
    return known.regions.get(name) if known else None


def region_names(cloud: str) -> list[str]:
    known = load().get(cloud)
    return sorted(known.regions) if known else []
