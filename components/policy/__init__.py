"""Guardrail rules, written once: the offline `torchfleet check` and the CrossGuard pack (policy/) run them.

Pure Python, no pulumi import: a rule is a function over a list of resources, each a plain dict

    {"type": "aws:eks/nodeGroup:NodeGroup", "name": "...", "inputs": {...engine property names...},
     "options": {"protect": bool, "propertyDependencies": {"subnetIds": [urn, ...]}}, "urn": "..."}

which is what both the recording mock monitor (Recorded) and pulumi-policy (PolicyResource) see.
`check(resources, max_gpus=..., allow_on_demand_gpus=..., restrict_public_endpoint=...)` returns every
violation, each naming its rule, the resource and why, and whether it is only advisory (a rule
whose level the stack's limits set: public-endpoint is advisory unless the stack restricts it).
During a real `pulumi preview` some values are not known yet; the pack passes them as UNKNOWN and
a rule never judges an unknown value (it is judged again at `pulumi up`).

The package, one module a purpose: model (Resource, UNKNOWN, Limits, Violation), inputs (reading a
resource's inputs), pools (GPU pools across clouds), gpu_rules, store_rules, network_rules,
version_rules (the rules), engine (the rule table, `check`, the CrossGuard pack's config).
"""

from components.policy.engine import (
    ADVISORY,
    MANDATORY,
    RULES,
    Rule,
    check,
    limits_from_pack_config,
    pack_config,
)
from components.policy.gpu_rules import gpu_count_cap, gpu_pool_one_zone, gpu_pool_spot, gpu_pool_tainted
from components.policy.model import STACK, UNKNOWN, Limits, Resource, Violation
from components.policy.network_rules import no_public_node_ips, public_endpoint
from components.policy.pools import REQUIRED_TAINT, TAINT_EFFECTS, Pool, gpu_pools, node_pools
from components.policy.store_rules import STORES, store_encrypted, store_protected
from components.policy.version_rules import (
    CHART_TYPES,
    CONTAINER_LISTS,
    KUSTOMIZE_TYPES,
    image_is_pinned,
    pinned_versions,
)

__all__ = [
    "ADVISORY", "CHART_TYPES", "CONTAINER_LISTS", "KUSTOMIZE_TYPES", "MANDATORY", "REQUIRED_TAINT", "RULES", "STACK",
    "STORES", "TAINT_EFFECTS", "UNKNOWN", "Limits", "Pool", "Resource", "Rule", "Violation", "check",
    "gpu_count_cap", "gpu_pool_one_zone", "gpu_pool_spot", "gpu_pool_tainted", "gpu_pools", "image_is_pinned",
    "limits_from_pack_config", "no_public_node_ips", "node_pools", "pack_config", "pinned_versions",
    "public_endpoint", "store_encrypted", "store_protected",
]
