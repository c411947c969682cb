"""Resource options as small functions: mocks do not apply them, so tests call these directly."""

from __future__ import annotations

import pulumi

# EKS control planes take 10-15 minutes to create and longer to upgrade; GPU node groups wait
# on spot capacity. The provider defaults (30/60 min) time out mid-upgrade in practice.
CLUSTER_TIMEOUTS = pulumi.CustomTimeouts(create="40m", update="90m", delete="40m")
NODEGROUP_TIMEOUTS = pulumi.CustomTimeouts(create="60m", update="90m", delete="60m")


def cluster_options(parent: pulumi.Resource, protect: bool) -> pulumi.ResourceOptions:
    return pulumi.ResourceOptions(parent=parent, custom_timeouts=CLUSTER_TIMEOUTS, protect=protect)


def nodegroup_options(parent: pulumi.Resource, depends_on: list[pulumi.Resource]) -> pulumi.ResourceOptions:
    # The cluster autoscaler owns the desired size; a later `pulumi up` must not reset it.
    return pulumi.ResourceOptions(
        parent=parent,
        depends_on=depends_on,
        custom_timeouts=NODEGROUP_TIMEOUTS,
        ignore_changes=["scalingConfig.desiredSize"],
    )


def store_options(parent: pulumi.Resource, protect: bool) -> pulumi.ResourceOptions:
    """The shared store holds checkpoints and data: `pulumi destroy` must not delete it unless
    the stack says storage.protect: false."""
    return pulumi.ResourceOptions(parent=parent, protect=protect, retain_on_delete=protect)
