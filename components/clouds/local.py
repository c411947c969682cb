"""The `local` cloud: the training layer on the current kubeconfig context (kind, minikube, k3d).

No cloud resources: CPU-only, one etcd member, and a hostPath volume as the shared store,
which is ReadWriteMany in practice only because a one-node cluster has one disk.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from components.clouds.base import ClusterHandle, SharedStore
from components.spec import PlatformSpec

# Inside the kind/minikube node container, so it survives pod restarts but not the cluster.
LOCAL_STORE_PATH = "/var/lib/torchfleet/shared"


class LocalCluster(pulumi.ComponentResource):
    def __init__(self, name: str, spec: PlatformSpec, opts: pulumi.ResourceOptions | None = None):
        super().__init__("torchfleet:clouds:LocalCluster", name, None, opts)
        # No kubeconfig argument: the provider uses the current context, or `kubernetes:context`
        # from the stack config (the provider reads its own config namespace).
        provider = k8s.Provider(f"{name}-k8s", opts=pulumi.ResourceOptions(parent=self))
        self.handle = ClusterHandle(
            name=pulumi.Output.from_input("local"),
            kubeconfig=pulumi.Output.secret(""),
            provider=provider,
            zones=spec.zones,
            gpu_pools=(),
            store=SharedStore(
                kind="hostpath",
                volume_source={"hostPath": {"path": LOCAL_STORE_PATH, "type": "DirectoryOrCreate"}},
                capacity="20Gi",
            ),
        )
        self.register_outputs({"clusterName": self.handle.name})
