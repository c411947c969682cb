"""Loading a YAML table shipped in this package (gpus.yaml, prices.yaml, regions.yaml, machines.yaml,
kubernetes.yaml): each is a mapping of rows (a GPU, a cloud, a managed service), built into one frozen
record per row by the module that owns the file. Pure Python: no pulumi import."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import yaml

Record = TypeVar("Record")


def load_rows(path: Path, build: Callable[[str, dict[str, Any]], Record]) -> dict[str, Record]:
    """{key: build(key, row)} for every top-level row of the YAML file at `path`, in file order."""
    raw = yaml.safe_load(path.read_text())
    return {key: build(key, row) for key, row in raw.items()}
