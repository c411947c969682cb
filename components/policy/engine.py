"""The rule table, `check` that runs it, and the stack's limits as the CrossGuard pack's config."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from components.policy.gpu_rules import gpu_count_cap, gpu_pool_one_zone, gpu_pool_spot, gpu_pool_tainted
from components.policy.model import Limits, Resource, Violation
from components.policy.network_rules import dns_endpoint_external, no_public_node_ips, public_endpoint
from components.policy.store_rules import store_encrypted, store_protected
from components.policy.version_rules import pinned_versions

MANDATORY, ADVISORY = "mandatory", "advisory"  # CrossGuard's enforcement levels, as its config names them


def _always_mandatory(limits: Limits) -> str:
    return MANDATORY


def _always_advisory(limits: Limits) -> str:
    return ADVISORY


def _public_endpoint_level(limits: Limits) -> str:
    # Advisory by default: narrowing the endpoint needs the deployer's own range, which no default
    # can know; a stack that sets guardrails.restrictPublicEndpoint makes it a failure.
    return MANDATORY if limits.restrict_public_endpoint else ADVISORY


@dataclass(frozen=True)
class Rule:
    name: str
    description: str
    check: Callable[[list[Resource], Limits], Iterable[Violation]]
    level: Callable[[Limits], str] = _always_mandatory  # advisory violations do not fail the check


RULES: tuple[Rule, ...] = (
    Rule("gpu-pool-tainted", "every GPU pool carries the taint nvidia.com/gpu=present:NoSchedule", gpu_pool_tainted),
    Rule("gpu-pool-one-zone", "every GPU pool is in exactly one zone", gpu_pool_one_zone),
    Rule("gpu-pool-spot", "GPU pools are spot unless guardrails.allowOnDemandGpus is true", gpu_pool_spot),
    Rule("gpu-count-cap", "the GPUs all pools can reach stay within guardrails.maxGpus", gpu_count_cap),
    Rule("store-encrypted", "the shared store is encrypted at rest", store_encrypted),
    Rule("store-protected", "the shared store is protected from deletion", store_protected),
    Rule("no-public-node-ips", "nodes have no public IP addresses", no_public_node_ips),
    Rule("pinned-versions", "charts, remote kustomizations and images are pinned", pinned_versions),
    Rule("public-endpoint", "the Kubernetes API endpoint is not open to 0.0.0.0/0 (advisory unless "
         "guardrails.restrictPublicEndpoint is true)", public_endpoint, _public_endpoint_level),
    Rule("dns-endpoint-external", "GKE's IAM-gated DNS endpoint open to every network is reported (advisory: "
         "VPC Service Controls binds it to networks)", dns_endpoint_external, _always_advisory),
)


def check(
    resources: list[Resource],
    max_gpus: int = Limits.max_gpus,
    allow_on_demand_gpus: bool = Limits.allow_on_demand_gpus,
    rules: Iterable[Rule] = RULES,
    restrict_public_endpoint: bool = Limits.restrict_public_endpoint,
) -> list[Violation]:
    """Every violation of `rules` in the stack's resources, in rule order; advisory ones marked."""
    limits = Limits(max_gpus=max_gpus, allow_on_demand_gpus=allow_on_demand_gpus,
                    restrict_public_endpoint=restrict_public_endpoint)
    found = []
    for rule in rules:
        advisory = rule.level(limits) == ADVISORY
        found += [replace(v, advisory=True) if advisory else v for v in rule.check(resources, limits)]
    return found


# ---------------------------------------------------------------- the CrossGuard pack's config

def pack_config(limits: Limits) -> dict[str, dict[str, Any]]:
    """A stack's limits as a `pulumi preview --policy-pack-config` file: {policy: {key: value}}."""
    return {
        "gpu-count-cap": {"maxGpus": limits.max_gpus},
        "gpu-pool-spot": {"allowOnDemandGpus": limits.allow_on_demand_gpus},
        # The engine reads a policy's level from its config (enforcementLevel) and hands the pack the rest.
        "public-endpoint": {"enforcementLevel": _public_endpoint_level(limits)},
    }


def limits_from_pack_config(config: dict[str, dict[str, Any]]) -> Limits:
    """The inverse of pack_config; a missing key keeps its documented default."""
    default = Limits()
    return Limits(
        max_gpus=int((config.get("gpu-count-cap") or {}).get("maxGpus", default.max_gpus)),
        allow_on_demand_gpus=bool((config.get("gpu-pool-spot") or {}).get("allowOnDemandGpus",
                                                                            default.allow_on_demand_gpus)),
        restrict_public_endpoint=(config.get("public-endpoint") or {}).get("enforcementLevel") == MANDATORY,
    )
