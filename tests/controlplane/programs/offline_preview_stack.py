"""The smallest stack with a cloud stack's Kubernetes provider, for tests/controlplane/test_pulumi_preview_offline.py.

As components/clouds/aws/__init__.py and azure/cluster.py make it: the cluster's kubeconfig *contents* and
its id as `clusterIdentifier`, the kubeconfig through offline_preview.provider_kubeconfig; the program
starts with the environment check components/config.load runs before any resource. One ConfigMap and one Helm release
(a local chart), whose value the test changes, stand for the stack's Kubernetes objects.
"""

from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s

from components.clouds import offline_preview, unreachable

unreachable.check_environment()
config = pulumi.Config("offline")
provider = k8s.Provider(
    "cluster-k8s",
    kubeconfig=offline_preview.provider_kubeconfig(pulumi.Output.secret(config.require("kubeconfig"))),
    cluster_identifier=config.get("clusterIdentifier"),  # left out only by the test's control stack
)
# The value in an annotation: a change of a ConfigMap's data is a replacement in pulumi-kubernetes (ConfigMaps
# are immutable to it unless the provider sets enableConfigMapMutable), an annotation's an update.
k8s.core.v1.ConfigMap(
    "settings",
    metadata={"name": f"offline-preview-{pulumi.get_stack()}", "namespace": "default",
              "annotations": {"torchfleet.io/value": config.require("value")}},
    data={"kept": "as is"},
    opts=pulumi.ResourceOptions(provider=provider),
)
# A Helm release, as the AWS autoscaler and device plugin and Azure's device plugin are, from a local chart.
k8s.helm.v3.Release(
    "chart",
    name=f"offline-{pulumi.get_stack()}",
    chart=str(Path(__file__).parent / "offline-chart"),
    namespace="default",
    values={"value": config.require("value")},
    opts=pulumi.ResourceOptions(provider=provider),
)
