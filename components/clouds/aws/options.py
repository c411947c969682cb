"""Resource options as small functions: mocks do not apply them, so tests call these directly.

What `pulumi destroy` does with each (README "Destroying"): nothing is `protect`ed (a protected
resource makes the whole destroy fail in its preview, so the cluster and NAT would keep billing);
the data is `retainOnDelete` instead, and `storage.adopt` imports it back (torchfleet/preview/plans.py
reads these options back for the tests and `torchfleet synth`).
"""

from __future__ import annotations

import pulumi

# EKS control planes take 10-15 minutes to create and longer to upgrade; GPU node groups wait
# on spot capacity. The provider defaults (30/60 min) time out mid-upgrade in practice.
CLUSTER_TIMEOUTS = pulumi.CustomTimeouts(create="40m", update="90m", delete="40m")
NODEGROUP_TIMEOUTS = pulumi.CustomTimeouts(create="60m", update="90m", delete="60m")


def cluster_options(parent: pulumi.Resource, depends_on: list[pulumi.Resource]) -> pulumi.ResourceOptions:
    # The cluster's name is fixed (subnet and ASG tags name it before it exists), so a change
    # that replaces it must delete the old one first: Pulumi creates replacements first by default.
    return pulumi.ResourceOptions(
        parent=parent, depends_on=depends_on, custom_timeouts=CLUSTER_TIMEOUTS, delete_before_replace=True
    )


def named_options(parent: pulumi.Resource, depends_on: list[pulumi.Resource] | None = None) -> pulumi.ResourceOptions:
    """A resource whose cloud name is fixed (an add-on's name, a Helm release's): delete before replace."""
    return pulumi.ResourceOptions(parent=parent, depends_on=depends_on, delete_before_replace=True)


def nodegroup_options(parent: pulumi.Resource, depends_on: list[pulumi.Resource]) -> pulumi.ResourceOptions:
    # The cluster autoscaler owns the desired size; a later `pulumi up` must not reset it. Node
    # groups are name-prefixed (nodegroups.py), so a replacement is created before the old one goes.
    return pulumi.ResourceOptions(
        parent=parent,
        depends_on=depends_on,
        custom_timeouts=NODEGROUP_TIMEOUTS,
        ignore_changes=["scalingConfig.desiredSize"],
    )


def kept_options(parent: pulumi.Resource, keep: bool, import_id: str | None) -> pulumi.ResourceOptions:
    """What `pulumi destroy` keeps (the store while storage.protect is true, the audit log group):
    retained, never protected, and adopted again by id when storage.adopt is true."""
    return pulumi.ResourceOptions(parent=parent, retain_on_delete=keep, import_=import_id)
