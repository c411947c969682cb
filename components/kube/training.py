"""The training layer (under construction: the training-layer issue fills it in)."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.clouds.base import ClusterHandle
from components.spec import PlatformSpec


@dataclass
class TrainingLayerArgs:
    spec: PlatformSpec
    cluster: ClusterHandle


class TrainingLayer(pulumi.ComponentResource):
    def __init__(self, name: str, args: TrainingLayerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("torchfleet:kube:TrainingLayer", name, None, opts)
        training = args.spec.training
        ns = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata={"name": training.namespace},
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.outputs = {
            "namespace": ns.metadata.name,
            "sharedClaim": training.claim_name,
            "operator": training.operator,
        }
        self.register_outputs(self.outputs)
