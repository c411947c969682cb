"""PropagationWait: a resource that waits, once, for an access grant to take effect.

A cloud answers "created" for a role grant long before every service honours it: GCP IAM changes
"typically propagate in 2 minutes, but could potentially take 7 minutes or longer"
(https://cloud.google.com/iam/docs/access-change-propagation), and new Azure role assignments "can
take up to five minutes to propagate" (https://learn.microsoft.com/azure/aks/manage-azure-rbac).
A resource that uses the grant the moment it exists fails the first `pulumi up` (issue 20: the GKE
cluster right after its KMS key grant; a ConfigMap and a Helm release right after the AKS RBAC
grant). Resources that need the grant depend on this wait instead of on the grant itself.

It is a Pulumi dynamic resource (the provider runs inside the program, no plugin to install):
`create` sleeps; changing `triggers` (the grants' ids) replaces it, so a new grant is waited for
too. Deleting it does nothing.
"""

from __future__ import annotations

import time
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, Resource, ResourceProvider

# The documented typical figures above (2 minutes for GCP IAM, up to 5 for Azure RBAC).
GCP_IAM_SECONDS = 150
AZURE_RBAC_SECONDS = 300


class _WaitProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        time.sleep(float(props["seconds"]))
        return CreateResult(id_=f"waited-{int(props['seconds'])}s", outs=props)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        changed = olds.get("triggers") != news.get("triggers")
        # A new seconds value alone is no reason to wait again.
        return DiffResult(changes=changed, replaces=["triggers"] if changed else [], delete_before_replace=True)


class PropagationWait(Resource):
    def __init__(
        self,
        name: str,
        seconds: int,
        grants: list[pulumi.CustomResource],
        opts: pulumi.ResourceOptions | None = None,
    ):
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=grants))
        super().__init__(
            _WaitProvider(),
            name,
            {"seconds": seconds, "triggers": [g.id for g in grants]},
            opts,
        )
