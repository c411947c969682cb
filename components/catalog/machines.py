"""Manager-pool machine types per cloud (machines.yaml): the real types, the naming pattern, and
examples for a "did you mean". Pure Python: no pulumi import."""

from __future__ import annotations

import difflib
import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from components.catalog.rows import load_rows

MACHINES_FILE = Path(__file__).with_name("machines.yaml")
SIZE = "{size}"


@dataclass(frozen=True)
class MachineRules:
    cloud: str
    source: str
    pattern: re.Pattern[str]
    types: dict[str, tuple[str, ...]]  # a name with {size} -> the sizes that exist
    examples: tuple[str, ...]
    requirement: str = ""  # what the cloud demands of a manager machine beyond the name, if anything
    shapes: dict[str, tuple[int, float]] = field(default_factory=dict)  # type -> (vCPUs, memory GiB)
    names: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        names = {template.replace(SIZE, size) for template, sizes in self.types.items() for size in sizes}
        object.__setattr__(self, "names", frozenset(names))

    def family_of(self, machine: str) -> tuple[str, str] | None:
        """The `types` template ``machine`` is named after and its size (t3.metal -> ("t3.{size}", "metal"))."""
        for template in self.types:
            before, _, after = template.partition(SIZE)
            # vCPU-count sizes match digits only: Standard_D4ds_v5 is not a size "4d" of Standard_D*s_v5.
            size = r"(\d+)" if all(s.isdigit() for s in self.types[template]) else r"([A-Za-z0-9]+)"
            match = re.fullmatch(re.escape(before) + size + re.escape(after), machine)
            if match:
                return template, match.group(1)
        return None

    def _nearest(self, template: str, size: str) -> str | None:
        sizes = self.types[template]
        if size.isdigit() and all(s.isdigit() for s in sizes):  # vCPU counts: the next one up
            return next((s for s in sizes if int(s) >= int(size)), sizes[-1])
        return next(iter(difflib.get_close_matches(size, sizes, n=1, cutoff=0.6)), None)

    def problem(self, machine: str) -> str | None:
        """Why `machine` cannot be a manager machine on this cloud, or None when it can."""
        if machine in self.names:
            return None
        family = self.family_of(machine)
        if not self.pattern.match(machine):
            why = f"is not named like a machine type on {self.cloud}"
        elif family is not None:
            template = family[0]
            why = f"is not a size of {template.replace(SIZE, '*')}, which comes in {', '.join(self.types[template])}"
        else:
            why = (
                f"is not in the catalog's {self.cloud} machine types (x86_64 general-purpose, compute- and "
                "memory-optimized families: components/catalog/machines.yaml)"
            )
        if self.requirement and self.pattern.match(machine):
            why += f" ({self.requirement})"
        near = self._nearest(*family) if family is not None else None
        if near is not None:
            why += f"; did you mean {family[0].replace(SIZE, near)}?"
        elif family is None:
            close = difflib.get_close_matches(machine, sorted(self.names), n=1, cutoff=0.75)
            why += f"; did you mean {close[0]}?" if close else f"; e.g. {', '.join(self.examples[:4])}"
        return f"{machine!r} {why} (machine types: {self.source})"


@functools.cache
def load() -> dict[str, MachineRules]:
    return load_rows(MACHINES_FILE, _machine_rules)


def _machine_rules(cloud: str, row: dict[str, Any]) -> MachineRules:
    types = {template: {str(size): shape for size, shape in sizes.items()} for template, sizes in row["types"].items()}
    return MachineRules(
        cloud,
        row["source"],
        re.compile(row["pattern"]),
        {template: tuple(sizes) for template, sizes in types.items()},
        tuple(row["examples"]),
        row.get("requirement", ""),
        {
            template.replace(SIZE, size): (int(vcpus), float(memory_gib))
            for template, sizes in types.items()
            for size, (vcpus, memory_gib) in sizes.items()
        },
    )


def rules(cloud: str) -> MachineRules | None:
    return load().get(cloud)


def shape(cloud: str, machine: str) -> tuple[int, float] | None:
    """A manager machine type's (vCPUs, memory GiB), as the catalog's source gives them; None if unknown."""
    found = rules(cloud)
    return found.shapes.get(machine) if found else None
