"""What `torchfleet check` says of a changed config, inside `torchfleet plan`: the guardrails and the cost.

A change can be valid and apply cleanly in place and still break the stack's own limits
(torchfleet:guardrails): a GPU pool's maxNodes raised until every pool together can reach more GPUs than
guardrails.maxGpus. `torchfleet check` on the changed config fails on it, and `pulumi up` with the
CrossGuard pack (policy/) refuses it; a plan that said "the change can be applied" was wrong. So the plan
runs the same rules (components/policy, with the changed config's own limits) on the resources the
changed program registers, and each violation refuses the change, naming the rule, the keys the change
set and the guardrail's own key. It also shows what check prints of the cost (torchfleet/cost.py: every
pool at maxNodes, and idle), before and after.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from components import policy
from torchfleet import cost

# The config key that sets each rule's limit; the other rules have none (a fixed rule of the platform).
GUARDRAIL_KEYS = {
    "gpu-count-cap": "torchfleet:guardrails.maxGpus",
    "gpu-pool-spot": "torchfleet:guardrails.allowOnDemandGpus",
    "public-endpoint": "torchfleet:guardrails.restrictPublicEndpoint",
}


@dataclass(frozen=True)
class GuardrailRefusal:
    violation: policy.Violation
    changed: tuple[str, ...]  # the config paths the change sets
    before: bool  # the stack's config broke the same rule on the same resource already

    @property
    def key(self) -> str | None:
        return GUARDRAIL_KEYS.get(self.violation.rule)

    def line(self) -> str:
        if self.before:
            cause = "the stack breaks it already, before this change (`torchfleet check` fails on it as it is)"
        else:
            cause = f"this change breaks it ({', '.join(self.changed) or 'the changed config'})"
        instead = f"; instead: keep within it, or change {self.key} if the limit itself should move" if self.key \
            else "; instead: a change that keeps this rule (components/policy)"
        return f"{self.violation.line()}: {cause}{instead}"

    def to_json(self) -> dict[str, Any]:
        return {"rule": self.violation.rule, "resource": self.violation.resource, "why": self.violation.why,
                "guardrailKey": self.key, "changed": list(self.changed), "before": self.before}


@dataclass(frozen=True)
class CostChange:
    what: str  # "every pool at maxNodes", "idle (no job running)"
    before: float
    after: float

    def line(self) -> str:
        delta = round(self.after, 2) - round(self.before, 2)  # the figures shown, so the sum reads right
        change = "unchanged" if abs(delta) < 0.005 else f"{delta:+.2f}"
        return f"cost, {self.what}: at most {self.before:.2f} -> {self.after:.2f} USD/hour ({change})"

    def to_json(self) -> dict[str, Any]:
        return {"what": self.what, "beforeUsdPerHour": round(self.before, 4), "afterUsdPerHour": round(self.after, 4)}


def _violations(spec: Any, resources: list[Any]) -> list[policy.Violation]:
    g = spec.guardrails
    found = policy.check([{"type": r.type, "name": r.name, "inputs": r.inputs, "options": r.options}
                          for r in resources], g.max_gpus, g.allow_on_demand_gpus,
                         restrict_public_endpoint=g.restrict_public_endpoint)
    return [v for v in found if not v.advisory]  # as check: advisories never fail it


def refusals(old_spec: Any, new_spec: Any, old_resources: list[Any], new_resources: list[Any],
             changed: list[str]) -> list[GuardrailRefusal]:
    """Every guardrail the changed program breaks, as `torchfleet check` finds it on the changed config."""
    before = {(v.rule, v.resource) for v in _violations(old_spec, old_resources)}
    return [GuardrailRefusal(v, tuple(changed), (v.rule, v.resource) in before)
            for v in _violations(new_spec, new_resources)]


def cost_changes(old_spec: Any, new_spec: Any) -> list[CostChange]:
    """check's two estimates (every pool at maxNodes; idle) before and after, where check computes them."""
    out = []
    for what, estimate in (("every pool at maxNodes", cost.stack_estimate), ("idle (no job running)",
                                                                             cost.idle_estimate)):
        old, new = estimate(old_spec), estimate(new_spec)
        if old is not None and new is not None:
            out.append(CostChange(what, old.total, new.total))
    return out
