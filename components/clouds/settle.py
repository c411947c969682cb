"""DeleteSettle: on `pulumi destroy`, give a cluster's controllers time to finish what the deletes
above them started, before the resources they depend on go.

Deleting etcd's StatefulSet deletes its claims (persistentVolumeClaimRetentionPolicy), and a claim's
volume (reclaimPolicy Delete) is then detached and deleted by the CSI driver's controller, after
Pulumi has moved on: Pulumi owns neither the volumes nor the claims. On EKS that controller is an
add-on Pulumi deletes next; deleted within seconds, it leaves the volumes behind, billing (AWS review
m5). Placed between the driver and what uses its volumes (the users depend on this resource, this
resource on the driver), its delete waits before the driver's: detaching and deleting an EBS volume
takes well under a minute once its pods are gone (EC2 DetachVolume, then DeleteVolume).

A Pulumi dynamic resource (the provider runs inside the program): create and update do nothing,
delete sleeps.
"""

from __future__ import annotations

import time
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, Resource, ResourceProvider, UpdateResult

# Twice the minute a detach and a delete take, so a slow detach still finishes.
CSI_VOLUME_SECONDS = 120


class _SettleProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(id_=f"settle-{int(props['seconds'])}s", outs=props)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        return DiffResult(changes=olds.get("seconds") != news.get("seconds"), replaces=[])

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=news)  # delete reads the seconds from the state's outputs

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        time.sleep(float(props["seconds"]))


class DeleteSettle(Resource):
    def __init__(
        self,
        name: str,
        seconds: int,
        after: list[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ):
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=after))
        super().__init__(_SettleProvider(), name, {"seconds": seconds}, opts)
