"""The node count an agent pool update sends: the live count, kept within the pool's new bounds.

With the autoscaler on, AKS still checks every agent pool PUT for minCount <= count <= maxCount
(the refusal reads "agentPoolProfile.count was 0. It must be greater or equal to minCount:1":
kubernetes-sigs/cluster-api-provider-azure#5947, Azure/AKS#1481). `ignore_changes=["count"]` made
Pulumi send the count stored at creation (0 for a GPU pool) with every later update, so raising
minNodes above it failed (issue 29). The program reads the pool's live count instead
(containerservice.get_agent_pool, API 2025-09-01) and sends it clamped to [minNodes, maxNodes]:
raising minNodes grows the pool to the new minimum, lowering maxNodes shrinks it to the new maximum,
and anything else sends back what is running. A pool that does not exist yet (the first `up`, a new
or replaced pool) starts at minNodes.

When it is read matters. AKS runs one pool operation at a time (pools.py chains them), and each takes
minutes; a count read when the program starts and sent after the pools before it were updated can be
stale by then, and a stale count in a PUT is a resize the autoscaler did not ask for (AKS then adds
or removes nodes; it removes them without draining: aks-docs create-node-pools.md, and
hashicorp/terraform-provider-azurerm#4543 is the same race from Terraform). So each pool's count is
read once the operation before its own has finished (node_count's `after`: the previous pool in the
chain, or the cluster), seconds before its PUT, not at the start of the `up`.

Why not `ignoreChanges: [count]` whenever the live count is already within the new bounds (the
provider would then resend its recorded count): ignoreChanges is a resource option, fixed when the
resource is registered, and the live count can only be read once the cluster's name is known (it is
auto-named: an Output), so the program cannot decide it per run; and the recorded count is whatever
was sent last (0 at creation for a GPU pool), which AKS refuses as soon as minNodes rises above it
(the bug above). A preview shows the count read at that moment.
"""

from __future__ import annotations

import pulumi
from pulumi_azure_native import containerservice


def clamp(live: int | None, min_nodes: int, max_nodes: int) -> int:
    """The count to send: the live one within [min, max], min where there is none."""
    if live is None:
        return min_nodes
    return max(min_nodes, min(int(live), max_nodes))


def not_found(error: Exception) -> bool:
    """ARM's answer for a pool that does not exist: HTTP 404, code NotFound/ResourceNotFound."""
    text = str(error).lower()
    return "404" in text or "notfound" in text.replace(" ", "")


def live_count(resource_group: str, cluster: str, pool: str) -> int | None:
    """The pool's live node count, or None where the cluster or the pool does not exist (yet)."""
    try:
        found = containerservice.get_agent_pool(
            resource_group_name=resource_group, resource_name=cluster, agent_pool_name=pool
        )
    except Exception as error:  # the invoke raises the provider's error as a plain Exception
        if not_found(error):
            return None
        raise
    return found.count


def node_count(
    resource_group: pulumi.Input[str], cluster: pulumi.Input[str], pool: str, min_nodes: int, max_nodes: int,
    after: pulumi.Resource | None = None,
) -> pulumi.Output[int]:
    """count for an AgentPool: read once the resource group and cluster names are known and `after` (the
    resource whose operation precedes this pool's) has finished, so the count is seconds old when sent (a
    first preview, or one after a replaced `after`, shows it as unknown)."""
    waits = [after.id] if after is not None else []
    return pulumi.Output.all(resource_group, cluster, *waits).apply(
        lambda names: clamp(live_count(names[0], names[1], pool), min_nodes, max_nodes)
    )
