"""TrainingPlatform: picks the cloud, then wires cluster -> shared store -> training layer."""

from __future__ import annotations

import importlib

import pulumi

from components.clouds.base import CloudCluster
from components.kube.dataset_volumes import DatasetVolumes
from components.kube.training import TrainingLayer, TrainingLayerArgs
from components.spec import PlatformSpec

# The one place a cloud is chosen (TorchX schedulers/__init__.py, SkyPilot clouds). Imported on
# use: each cloud SDK takes seconds to import, and a stack needs only its own.
CLOUDS: dict[str, str] = {
    "aws": "components.clouds.aws:AwsCluster",
    "gcp": "components.clouds.gcp:GcpCluster",
    "azure": "components.clouds.azure:AzureCluster",
    "local": "components.clouds.local:LocalCluster",
}


def cloud_cluster_class(cloud: str) -> type[CloudCluster]:
    module, cls = CLOUDS[cloud].split(":")
    return getattr(importlib.import_module(module), cls)


class TrainingPlatform(pulumi.ComponentResource):
    def __init__(self, name: str, spec: PlatformSpec, opts: pulumi.ResourceOptions | None = None):
        super().__init__("torchfleet:platform:TrainingPlatform", name, None, opts)
        cluster = cloud_cluster_class(spec.cloud)(f"{name}-{spec.cloud}", spec, pulumi.ResourceOptions(parent=self))
        handle = cluster.handle
        training = TrainingLayer(
            f"{name}-training",
            TrainingLayerArgs(spec=spec, cluster=handle),
            pulumi.ResourceOptions(parent=self, providers=[handle.provider], depends_on=handle.ready),
        )
        datasets = {}
        if handle.datasets is not None:
            volumes = DatasetVolumes(
                f"{name}-datasets",
                spec.training.namespace,
                handle.datasets,
                [*handle.ready, *training.namespace_ready],
                pulumi.ResourceOptions(parent=self, providers=[handle.provider]),
            )
            # The CLI checks `--dataset NAME` against the stack file; this shows what was made.
            datasets = {"datasets": {n: c.metadata.name for n, c in volumes.claims.items()}}
        self.outputs: dict[str, pulumi.Input] = {
            "cloud": spec.cloud,
            "clusterName": handle.name,
            "kubeconfig": handle.kubeconfig,
            "zones": list(handle.zones),
            "gpuPools": [p.name for p in handle.gpu_pools],
            **training.outputs,
            **handle.outputs,
            **datasets,
        }
        self.register_outputs(self.outputs)
