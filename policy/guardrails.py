"""components/policy/'s rules as CrossGuard stack policies (one per rule).

Stack policies, not resource policies: the GPU cap sums every pool and the public-IP rule follows
a node group to its subnets, so each rule needs the whole stack. pulumi-policy hands resources as
PolicyResource (https://www.pulumi.com/docs/reference/pkg/python/pulumi_policy/); here they become
the plain dicts the rules take, the same shape the offline check builds from the mock monitor.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    PolicyResource,
    ReportViolation,
    StackValidationArgs,
    StackValidationPolicy,
)

# pulumi-policy marks values unknown during preview with these sentinels and raises when a policy
# reads one through its proxies; the rules get policy.UNKNOWN instead and skip what is unknown.
from pulumi_policy.proxy import (
    UNKNOWN_ARRAY_VALUE,
    UNKNOWN_BOOLEAN_VALUE,
    UNKNOWN_NUMBER_VALUE,
    UNKNOWN_OBJECT_VALUE,
    UNKNOWN_STRING_VALUE,
)

# The pack runs from policy/; the rules live one level up, shared with `torchfleet check`.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from components import policy

_UNKNOWNS = {UNKNOWN_ARRAY_VALUE, UNKNOWN_BOOLEAN_VALUE, UNKNOWN_NUMBER_VALUE, UNKNOWN_OBJECT_VALUE,
             UNKNOWN_STRING_VALUE}

_DEFAULTS = policy.Limits()
LEVELS = {policy.MANDATORY: EnforcementLevel.MANDATORY, policy.ADVISORY: EnforcementLevel.ADVISORY}
CONFIG_SCHEMAS = {
    "gpu-count-cap": PolicyConfigSchema(
        properties={"maxGpus": {"type": "integer", "minimum": 1, "default": _DEFAULTS.max_gpus}}
    ),
    "gpu-pool-spot": PolicyConfigSchema(
        properties={"allowOnDemandGpus": {"type": "boolean", "default": _DEFAULTS.allow_on_demand_gpus}}
    ),
}


def plain(value: Any) -> Any:
    """A property value without pulumi-policy's proxies, unknowns as policy.UNKNOWN."""
    if isinstance(value, str):
        return policy.UNKNOWN if value in _UNKNOWNS else value
    if type(value).__name__ in ("_DictProxy", "_ListProxy"):
        # Reading a proxy's items raises on unknowns; its "__target" is the raw container.
        value = value["__target"]
    if isinstance(value, Mapping):
        return {k: plain(value[k]) for k in value}
    if isinstance(value, Sequence):
        return [plain(v) for v in value]
    return value


def resource_of(r: PolicyResource) -> policy.Resource:
    return {
        "type": r.resource_type,
        "name": r.name,
        "urn": r.urn,
        "inputs": plain(r.props),
        # CrossGuard sees protect (PolicyResourceOptions.protect), so store-protected holds here too.
        "options": {
            "protect": bool(r.opts.protect),
            "propertyDependencies": {k: [d.urn for d in deps] for k, deps in r.property_dependencies.items()},
        },
    }


def make_policy(rule: policy.Rule) -> StackValidationPolicy:
    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        limits = policy.limits_from_pack_config({rule.name: dict(args.get_config() or {})})
        resources = [resource_of(r) for r in args.resources]
        for v in rule.check(resources, limits):
            report_violation(f"{v.resource}: {v.why}", v.urn)

    return StackValidationPolicy(
        name=rule.name,
        description=rule.description,
        validate=validate,
        # The rule's level under the default limits (public-endpoint: advisory); a stack's
        # --policy-pack-config raises it with {"<rule>": {"enforcementLevel": "mandatory"}}.
        enforcement_level=LEVELS[rule.level(policy.Limits())],
        config_schema=CONFIG_SCHEMAS.get(rule.name),
    )


def build_policies() -> list[StackValidationPolicy]:
    return [make_policy(rule) for rule in policy.RULES]
