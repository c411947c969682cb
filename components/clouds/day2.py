"""Day-2 refusals: config changes a cloud refuses, or that would lose data, caught before `pulumi up`.

Some changes are valid configs on their own and wrong only next to the previous one: a store moved to
another zone (a new, empty store), a zone removed from a cluster that cannot lose one. `spec.parse`
sees one config; `torchfleet plan` (torchfleet/preview/day2.py) sees both and asks these rules.

The hook. A cloud registers its rules in `components/clouds/<cloud>/day2.py`:

    from components.clouds.day2 import ConfigChange, Refusal

    def store_zone_moved(change: ConfigChange) -> list[Refusal]:
        if change.old.zones[:1] != change.new.zones[:1]:
            return [Refusal("torchfleet:zones", "why the cloud refuses it (cite the doc or source)",
                            "the safe sequence, step by step")]
        return []

    RULES = [store_zone_moved]

A rule is a pure function of the two validated PlatformSpecs (and the raw configs, for keys the spec
does not keep); it creates nothing and reads nothing else. `rules_for(cloud)` returns COMMON_RULES and the
cloud's RULES. A cloud without the module has only the common rules.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from components.spec import PlatformSpec


@dataclass(frozen=True)
class ConfigChange:
    old: PlatformSpec  # the stack's current config, validated
    new: PlatformSpec  # the changed config, validated
    old_config: dict[str, Any]  # both as the stack file holds them ({"torchfleet:zones": [...], ...})
    new_config: dict[str, Any]


@dataclass(frozen=True)
class Refusal:
    key: str  # the config key whose change is refused, e.g. "torchfleet:zones"
    reason: str  # what the cloud (or the data) does with it, citing the doc or provider source
    instead: str  # the safe sequence that reaches the wanted config

    def line(self) -> str:
        return f"{self.key}: {self.reason}; instead: {self.instead}"


Rule = Callable[[ConfigChange], Iterable[Refusal]]


def cloud_changed(change: ConfigChange) -> list[Refusal]:
    if change.old.cloud == change.new.cloud:
        return []
    return [Refusal("torchfleet:cloud", f"{change.old.cloud} -> {change.new.cloud} would delete every resource of "
                    "the stack, the store's data with it, and build another platform",
                    "create a new stack for the other cloud (stacks/Pulumi.<name>.yaml), move the data, then "
                    "`pulumi destroy` this one")]


def region_changed(change: ConfigChange) -> list[Refusal]:
    if change.old.cloud != change.new.cloud or change.old.region == change.new.region:
        return []
    key = change.old.traits.region_key or "region"
    return [Refusal(key, f"{change.old.region} -> {change.new.region} replaces the network, the cluster and the "
                    "store (every one of them lives in its region): the store's data would stay behind",
                    "create a new stack in the other region, copy the checkpoints to its store, then "
                    "`pulumi destroy` this one")]


COMMON_RULES: list[Rule] = [cloud_changed, region_changed]


def rules_for(cloud: str) -> list[Rule]:
    """COMMON_RULES, then the cloud's own (components/clouds/<cloud>/day2.py RULES), in that order."""
    try:
        module = importlib.import_module(f"components.clouds.{cloud}.day2")
    except ModuleNotFoundError as error:
        if error.name not in (f"components.clouds.{cloud}.day2", f"components.clouds.{cloud}"):
            raise  # the module exists and imports something missing: a bug to see, not to hide
        return list(COMMON_RULES)
    rules = getattr(module, "RULES", None)
    if not isinstance(rules, list) or not all(callable(r) for r in rules):
        raise TypeError(f"components/clouds/{cloud}/day2.py: RULES must be a list of functions "
                        "(ConfigChange) -> list[Refusal]")
    return [*COMMON_RULES, *rules]


def cautions(cloud: str, changes: list[Any], old_inputs: dict[str, dict[str, Any]]) -> list[Refusal]:
    """What applies but costs something the user should see first (the plan still exits 0): the cloud's
    CAUTIONS (components/clouds/<cloud>/day2.py), each a function of the planned resource changes
    (torchfleet/preview/day2.py ResourceChange: action, type, name, key, order) and the old program's inputs
    by `type::name`, returning Refusal-shaped lines (key, what happens, what to do first)."""
    try:
        module = importlib.import_module(f"components.clouds.{cloud}.day2")
    except ModuleNotFoundError:
        return []
    found: list[Refusal] = []
    for rule in getattr(module, "CAUTIONS", []):
        found += list(rule(changes, old_inputs))
    return found


def refusals(change: ConfigChange) -> list[Refusal]:
    """Every refusal of the change: the old cloud's rules (a cloud change is refused by the common rule)."""
    found: list[Refusal] = []
    for rule in rules_for(change.old.cloud):
        found += list(rule(change))
    return found
