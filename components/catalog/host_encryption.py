"""Whether an Azure VM size supports encryption at host (host_encryption.yaml cites the source).

An AKS pool created with enableEncryptionAtHost on a size without it fails; the spec refuses that
before anything is created (spec/pools.py), and `torchfleet check` prints the command that answers
for sizes the table does not record. Pure Python: no pulumi import.
"""

from __future__ import annotations

import functools
from pathlib import Path

import yaml

from components.catalog.machines import rules

HOST_ENCRYPTION_FILE = Path(__file__).with_name("host_encryption.yaml")


@functools.cache
def _table() -> tuple[dict[str, bool], dict[str, bool]]:
    raw = yaml.safe_load(HOST_ENCRYPTION_FILE.read_text())
    return dict(raw["sizes"]), dict(raw["series"])


def supported(machine_type: str) -> bool | None:
    """True or False as the source recorded it for this Azure size, None where it recorded nothing."""
    sizes, series = _table()
    if machine_type in sizes:
        return sizes[machine_type]
    family = rules("azure").family_of(machine_type)
    return series.get(family[0]) if family else None
