"""The GPU pool rules: tainted, in one zone, spot, and the stack's GPU cap."""

from __future__ import annotations

from collections.abc import Iterator

from components.policy.model import STACK, UNKNOWN, Limits, Resource, Violation, _v
from components.policy.pools import REQUIRED_TAINT, gpu_pools


def gpu_pool_tainted(resources: list[Resource], limits: Limits) -> Iterator[Violation]:
    """Only pods that tolerate the GPU taint (training pods) may land on GPU nodes."""
    want = "{}={}:{}".format(*REQUIRED_TAINT)
    for pool in gpu_pools(resources):
        if pool.taints is UNKNOWN:
            continue
        if REQUIRED_TAINT not in pool.taints:
            yield _v("gpu-pool-tainted", pool.resource, f"GPU pool has no taint {want}", pool.label)


def gpu_pool_one_zone(resources: list[Resource], limits: Limits) -> Iterator[Violation]:
    """All pods of one job stay in one zone: a pool that spans zones lets the autoscaler split them."""
    for pool in gpu_pools(resources):
        if pool.zones is UNKNOWN:
            continue
        if pool.zones is None:
            yield _v("gpu-pool-one-zone", pool.resource, "GPU pool is not pinned to a zone", pool.label)
        elif len(pool.zones) != 1:
            yield _v(
                "gpu-pool-one-zone", pool.resource,
                f"GPU pool must be in exactly one zone, has {len(pool.zones)}: {pool.zones}", pool.label,
            )


def gpu_pool_spot(resources: list[Resource], limits: Limits) -> Iterator[Violation]:
    """On-demand GPUs cost several times their spot price: the stack must ask for them."""
    if limits.allow_on_demand_gpus:
        return
    for pool in gpu_pools(resources):
        if pool.spot is False:
            yield _v(
                "gpu-pool-spot", pool.resource,
                "GPU pool is on-demand; use spot or set guardrails.allowOnDemandGpus: true", pool.label,
            )


def gpu_count_cap(resources: list[Resource], limits: Limits) -> Iterator[Violation]:
    """Cost guardrail: every GPU pool at its maximum stays within guardrails.maxGpus."""
    total, parts = 0, []
    for pool in gpu_pools(resources):
        per_node, nodes = pool.gpus_per_node, pool.max_nodes
        if nodes is UNKNOWN:
            continue
        if per_node is None:
            yield _v("gpu-count-cap", pool.resource,
                     f"cannot count GPUs per node of {list(pool.machine_types)}: not in the GPU catalog", pool.label)
            continue
        if not isinstance(nodes, int):
            yield _v("gpu-count-cap", pool.resource, "GPU pool has no maximum node count", pool.label)
            continue
        total += nodes * per_node
        parts.append(f"{pool.label}={nodes}x{per_node}")
    if total > limits.max_gpus:
        yield Violation(
            "gpu-count-cap", STACK,
            f"GPU pools can reach {total} GPUs ({', '.join(parts)}), over guardrails.maxGpus={limits.max_gpus}",
        )
