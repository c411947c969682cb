"""Who administers the EKS cluster: torchfleet:admins, and nobody else (review: the caller's implicit entry).

The program used to add an access entry for whoever ran it. In CI that is the read-only pull-request role,
so every PR preview planned an AccessEntry and an AmazonEKSClusterAdminPolicy for it and the deletion of the
last deployer's (docs/ci.md: that role is never an admin). terraform-aws-eks's maintainer advises against
its own creator helper for the same churn (terraform-aws-modules/terraform-aws-eks PR #3201; issue #2911).
Now torchfleet:admins is the one source, as on Azure (components/clouds/azure/cluster.py). A caller left
out would create the cluster and then get 401 on every Kubernetes resource of the same `up`, so `pulumi up`
refuses to start when the caller's role is not listed; preview (the CI role) never checks.
"""

from __future__ import annotations

KEY = "torchfleet:admins"


def caller_problem(caller_arn: str, admins: tuple[str, ...]) -> str | None:
    """Why `pulumi up` as `caller_arn` (the role an access entry names: get_session_context's issuer_arn)
    would lose the cluster, or None when it is listed."""
    if caller_arn in admins:
        return None
    return (f"does not list {caller_arn}, who runs this `pulumi up`: the stack grants cluster admin to "
            f"{KEY} only, so the up would create the cluster and then be refused (401) on every Kubernetes "
            f"resource. Add it: pulumi config set --path '{KEY}[{len(admins)}]' {caller_arn} "
            "(or run `pulumi up` as an identity already listed)")


def running_up() -> bool:
    """True in a real `pulumi up`; False in `pulumi preview` (the CI role's) and in torchfleet's offline
    synth (its mocks stand in for a preview: torchfleet/preview/runner.py)."""
    import pulumi
    from pulumi.runtime import settings
    from pulumi.runtime.mocks import MockMonitor

    return not pulumi.runtime.is_dry_run() and not isinstance(settings.get_monitor(), MockMonitor)
