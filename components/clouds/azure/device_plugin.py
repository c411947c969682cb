"""The NVIDIA device plugin: AKS installs the GPU driver only, so `nvidia.com/gpu` needs this.

https://learn.microsoft.com/azure/aks/use-nvidia-gpu#install-the-nvidia-device-plugin
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from components.spec import AKS_SPOT_TAINT, GPU_TAINT, LABEL_GPU_PRESENT

CHART = "nvidia-device-plugin"
# Pinned; published in the chart repository below (chart versions carry no "v"). NVIDIA/k8s-device-plugin
# v0.20.0, tagged 2026-08-19, the newest release when read on 2026-11-26 (AWS review, "stale pin"; the
# same pin as clouds/aws/autoscaling.py, which says what was checked).
CHART_VERSION = "0.20.0"
CHART_REPO = "https://nvidia.github.io/k8s-device-plugin"
NAMESPACE = "nvidia-device-plugin"


def plugin_values() -> dict:
    """Chart values: land on every GPU node, whatever taints it carries."""
    return {
        # Our GPU taint and AKS's spot taint; without both the DaemonSet never lands on spot
        # GPU nodes, and pods requesting nvidia.com/gpu stay Pending forever.
        "tolerations": [
            {"key": "CriticalAddonsOnly", "operator": "Exists"},
            {"key": GPU_TAINT["key"], "operator": "Exists", "effect": GPU_TAINT["effect"]},
            {
                "key": AKS_SPOT_TAINT["key"],
                "operator": "Equal",
                "value": AKS_SPOT_TAINT["value"],
                "effect": AKS_SPOT_TAINT["effect"],
            },
        ],
        # The chart's default affinity already selects this label (or NFD's PCI labels); our
        # pools set it, so no NFD is needed.
        "nodeSelector": {LABEL_GPU_PRESENT: "true"},
        "nfd": {"enabled": False},
        "gfd": {"enabled": False},
    }


def create_device_plugin(name: str, parent: pulumi.Resource, provider: k8s.Provider,
                         depends_on: list[pulumi.Resource]) -> k8s.helm.v3.Release:
    return k8s.helm.v3.Release(
        f"{name}-nvidia-device-plugin",
        chart=CHART,
        version=CHART_VERSION,
        repository_opts={"repo": CHART_REPO},
        namespace=NAMESPACE,
        create_namespace=True,
        values=plugin_values(),
        opts=pulumi.ResourceOptions(parent=parent, provider=provider, depends_on=depends_on),
    )
