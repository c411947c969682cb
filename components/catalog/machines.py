"""Manager-pool machine types per cloud (machines.yaml): the naming pattern, the known families and
sizes, and real examples for a "did you mean". Pure Python: no pulumi import."""

from __future__ import annotations

import difflib
import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components.catalog.rows import load_rows

MACHINES_FILE = Path(__file__).with_name("machines.yaml")


@dataclass(frozen=True)
class MachineRules:
    cloud: str
    source: str
    pattern: re.Pattern[str]
    families: tuple[str, ...]
    sizes: tuple[str, ...]
    examples: tuple[str, ...]
    requirement: str = ""  # what the cloud demands of a manager machine beyond the name, if anything

    def problem(self, machine: str) -> str | None:
        """Why `machine` cannot be a manager machine on this cloud, or None when it can."""
        match = self.pattern.match(machine)
        if match and match.group("family") in self.families and match.group("size") in self.sizes:
            return None
        close = difflib.get_close_matches(machine, self.examples, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]}?" if close else f"e.g. {', '.join(self.examples[:4])}"
        if not match:
            why = f"is not named like a machine type on {self.cloud}"
        elif match.group("family") not in self.families:
            why = f"is of family {match.group('family')}, not a known x86_64 family ({', '.join(self.families)})"
        else:
            why = f"has size {match.group('size')}, not one of {', '.join(self.sizes)}"
        if match and self.requirement:
            why += f" ({self.requirement})"
        return f"{machine!r} {why}; {hint} (machine types: {self.source})"


@functools.cache
def load() -> dict[str, MachineRules]:
    return load_rows(MACHINES_FILE, _machine_rules)


def _machine_rules(cloud: str, row: dict[str, Any]) -> MachineRules:
    return MachineRules(
        cloud,
        row["source"],
        re.compile(row["pattern"]),
        tuple(row["families"]),
        tuple(str(s) for s in row["sizes"]),
        tuple(row["examples"]),
        row.get("requirement", ""),
    )


def rules(cloud: str) -> MachineRules | None:
    return load().get(cloud)
