"""What a rule takes and gives: a resource (a plain dict), UNKNOWN, a stack's Limits, a Violation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from components.spec import GuardrailSpec

Resource = dict[str, Any]


class _Unknown:
    """A value the engine does not know during preview (an id, a computed output)."""

    _instance: _Unknown | None = None

    def __new__(cls) -> _Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "<unknown during preview>"


UNKNOWN = _Unknown()
STACK = "(stack)"  # the `resource` of a violation of the whole stack (the GPU cap)


@dataclass(frozen=True)
class Violation:
    rule: str
    resource: str
    why: str
    urn: str | None = None  # lets CrossGuard attach the violation to the resource
    advisory: bool = False  # reported, but does not fail the check (see Rule.level)

    def line(self) -> str:
        return f"{self.rule}  {self.resource}  {self.why}"


@dataclass(frozen=True)
class Limits:
    """What a stack allows; the defaults are spec.GuardrailSpec's (documented in README "Guardrails")."""

    max_gpus: int = GuardrailSpec().max_gpus
    allow_on_demand_gpus: bool = GuardrailSpec().allow_on_demand_gpus
    restrict_public_endpoint: bool = GuardrailSpec().restrict_public_endpoint


def _v(rule: str, r: Resource, why: str, label: str | None = None) -> Violation:
    return Violation(rule, label or r["name"], why, r.get("urn"))
