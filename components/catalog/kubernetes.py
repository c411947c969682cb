"""Kubernetes minor versions each managed service offers (kubernetes.yaml). Pure Python."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components.catalog.rows import load_rows

VERSIONS_FILE = Path(__file__).with_name("kubernetes.yaml")


@dataclass(frozen=True)
class Service:
    name: str  # eks, gke, aks
    cloud: str
    source: str
    checked: str
    versions: dict[str, str | None]  # minor -> last day of support (None: no date published)

    @property
    def minors(self) -> tuple[str, ...]:
        return tuple(sorted(self.versions, key=lambda v: tuple(int(p) for p in v.split("."))))


@functools.cache
def load() -> dict[str, Service]:
    return load_rows(VERSIONS_FILE, _service)


def _service(name: str, row: dict[str, Any]) -> Service:
    return Service(name, row["cloud"], row["source"], row["checked"], dict(row["versions"]))


def service_for(cloud: str) -> Service | None:
    """The managed Kubernetes service of a cloud (None for local: any version the cluster runs)."""
    return next((s for s in load().values() if s.cloud == cloud), None)
