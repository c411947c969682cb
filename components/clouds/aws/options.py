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


# Create-only inputs a cluster made before issue 29 holds with another value: a change would replace
# the cluster (terraform-provider-aws internal/service/eks/cluster.go: access_config's
# bootstrap_cluster_creator_admin_permissions is ForceNew, default true). New clusters get the
# program's value; existing ones keep theirs (cluster.py explains the creator's entry).
CLUSTER_CREATE_ONLY = ["accessConfig.bootstrapClusterCreatorAdminPermissions"]


def cluster_options(parent: pulumi.Resource, depends_on: list[pulumi.Resource]) -> pulumi.ResourceOptions:
    # The cluster's name is fixed (subnet and ASG tags name it before it exists), so a change
    # that replaces it must delete the old one first: Pulumi creates replacements first by default.
    return pulumi.ResourceOptions(
        parent=parent,
        depends_on=depends_on,
        custom_timeouts=CLUSTER_TIMEOUTS,
        delete_before_replace=True,
        ignore_changes=CLUSTER_CREATE_ONLY,
    )


def named_options(parent: pulumi.Resource, depends_on: list[pulumi.Resource] | None = None) -> pulumi.ResourceOptions:
    """A resource whose cloud name is fixed (an add-on's name, a Helm release's): delete before replace."""
    return pulumi.ResourceOptions(parent=parent, depends_on=depends_on, delete_before_replace=True)


# The state's desired size, repeated (Pulumi sends the recorded value of an ignored path).
DESIRED_SIZE = "scalingConfig.desiredSize"


def nodegroup_options(
    parent: pulumi.Resource, depends_on: list[pulumi.Resource], keep_recorded_size: bool = False
) -> pulumi.ResourceOptions:
    # The provider sends min, max and desired together on any scaling change. With min and max unchanged
    # the desired size is ignored (keep_recorded_size, live.py keeps_recorded_size): nothing of the scaling
    # differs, nothing is sent, and no preview shows the autoscaler's moves. With min or max changed it is
    # not: the state's value is stale once the autoscaler moved it (a raised minNodes above it fails, a
    # lowered maxNodes resets a busy group), so the program sends the group's live size (live.py
    # desired_size). Node groups are name-prefixed (nodegroups.py), so a replacement is created first.
    return pulumi.ResourceOptions(parent=parent, depends_on=depends_on, custom_timeouts=NODEGROUP_TIMEOUTS,
                                  ignore_changes=[DESIRED_SIZE] if keep_recorded_size else None)


def kept_options(parent: pulumi.Resource, keep: bool, import_id: str | None) -> pulumi.ResourceOptions:
    """What `pulumi destroy` keeps (the store while storage.protect is true, the audit log group):
    retained, never protected, and adopted again by id when storage.adopt is true."""
    return pulumi.ResourceOptions(parent=parent, retain_on_delete=keep, import_=import_id)
