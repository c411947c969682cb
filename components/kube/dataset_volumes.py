"""DatasetVolumes: each declared dataset's read-only PV/PVC in the training namespace (kube/datasets.py),
and the egress the cloud's driver needs from inside training pods, if any."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.clouds.dataset_access import DatasetAccess, DatasetVolume
from components.kube import datasets


class DatasetVolumes(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        namespace: str,
        access: DatasetAccess,
        wait_for: Sequence[pulumi.Input[pulumi.Resource]],
        opts: pulumi.ResourceOptions | None = None,
    ):
        """`wait_for`: the training namespace and the cluster's readiness, besides the driver and the
        identity bindings in `access.ready` (a component's depends_on does not reach its children)."""
        super().__init__("torchfleet:kube:DatasetVolumes", name, None, opts)
        self._name = name
        ready = [*wait_for, *access.ready]
        self.claims: dict[str, k8s.core.v1.PersistentVolumeClaim] = {}
        for volume in access.volumes:
            pv = self._create_volume(namespace, volume, ready)
            claim = datasets.persistent_volume_claim(namespace, volume.name)
            self.claims[volume.name] = k8s.core.v1.PersistentVolumeClaim(
                f"{name}-{volume.name}-claim",
                metadata=claim["metadata"],
                spec=claim["spec"],
                opts=pulumi.ResourceOptions(parent=self, depends_on=[*ready, pv]),
            )
        if access.egress:
            policy = datasets.storage_egress_policy(namespace, access.egress)
            k8s.networking.v1.NetworkPolicy(
                f"{name}-egress",
                metadata=policy["metadata"],
                spec=policy["spec"],
                opts=pulumi.ResourceOptions(parent=self, depends_on=ready),
            )
        self.register_outputs({"claims": {n: datasets.claim_name(n) for n in self.claims}})

    def _create_volume(
        self, namespace: str, volume: DatasetVolume, ready: list[Any]
    ) -> k8s.core.v1.PersistentVolume:
        pv = pulumi.Output.from_input(volume.csi).apply(
            lambda csi: datasets.persistent_volume(namespace, volume.name, csi, volume.mount_options)
        )
        return k8s.core.v1.PersistentVolume(
            f"{self._name}-{volume.name}-volume",
            metadata=pv.apply(lambda m: m["metadata"]),
            spec=pv.apply(lambda m: m["spec"]),
            opts=pulumi.ResourceOptions(parent=self, depends_on=ready),
        )
