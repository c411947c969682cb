"""TrainingPlatform: picks the cloud, then wires cluster -> shared store -> training layer."""

from __future__ import annotations

import pulumi

from components.clouds.aws import AwsCluster
from components.clouds.azure import AzureCluster
from components.clouds.base import CloudCluster
from components.clouds.gcp import GcpCluster
from components.clouds.local import LocalCluster
from components.kube.training import TrainingLayer, TrainingLayerArgs
from components.spec import PlatformSpec

# The one place a cloud is chosen (TorchX schedulers/__init__.py, SkyPilot clouds).
CLOUDS: dict[str, type[CloudCluster]] = {
    "aws": AwsCluster,
    "gcp": GcpCluster,
    "azure": AzureCluster,
    "local": LocalCluster,
}


class TrainingPlatform(pulumi.ComponentResource):
    def __init__(self, name: str, spec: PlatformSpec, opts: pulumi.ResourceOptions | None = None):
        super().__init__("torchfleet:platform:TrainingPlatform", name, None, opts)
        cluster = CLOUDS[spec.cloud](f"{name}-{spec.cloud}", spec, pulumi.ResourceOptions(parent=self))
        handle = cluster.handle
        training = TrainingLayer(
            f"{name}-training",
            TrainingLayerArgs(spec=spec, cluster=handle),
            pulumi.ResourceOptions(parent=self, providers=[handle.provider], depends_on=handle.ready),
        )
        self.outputs: dict[str, pulumi.Input] = {
            "cloud": spec.cloud,
            "clusterName": handle.name,
            "kubeconfig": handle.kubeconfig,
            "zones": list(handle.zones),
            "gpuPools": [p.name for p in handle.gpu_pools],
            **training.outputs,
            **handle.outputs,
        }
        self.register_outputs(self.outputs)
