"""Fake nodes shaped like a stack's pools, as the cluster autoscaler would add them.

Each GPU pool of a stack becomes nodes with exactly what its autoscaler template promises: the pool
labels of the contract (components/spec/model.py: pool, GPU, capacity, gpu.present), the zone, the
GPU taint (and AKS's spot taint on Azure spot pools), and the machine's GPUs, vCPUs and memory as
capacity. The manager pool becomes on-demand nodes, one per zone, tainted as the Azure manager pool is
(torchfleet.io/pool=manager:NoSchedule; each cloud's form: components/spec/model.py MANAGER_TAINTS), which only the
platform's pods tolerate; the CPU pool (torchfleet:cpuPool) becomes one node per zone labelled and tainted
torchfleet.io/pool=cpu, where the CLI's CPU jobs, readers, TensorBoard pods and Lighthouses go. kwok plays their
kubelets (cluster.py); the scheduler places real pods on them by those labels, taints and sizes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from components.spec import (
    AKS_SPOT_TAINT,
    CPU_POOL_NAME,
    CPU_TAINT,
    GPU_RESOURCE,
    GPU_TAINT,
    LABEL_ZONE,
    MANAGER_POOL_NAME,
    MANAGER_TAINTS,
    PlatformSpec,
    parse,
)
from tests.controlplane.kwok_stages import NODE_ANNOTATION
from torchfleet.preview.stack_file import load_stack_file

REPO = Path(__file__).resolve().parents[2]
LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_MANAGER = "torchfleet.io/pool"


def stack_spec(stack: str) -> PlatformSpec:
    """The PlatformSpec of stacks/Pulumi.STACK.yaml, parsed and validated as `pulumi up` would."""
    return parse(load_stack_file(REPO / "stacks" / f"Pulumi.{stack}.yaml"), stack=stack)


def node(name: str, labels: dict[str, str], taints: list[dict[str, str]], capacity: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {NODE_ANNOTATION: "fake"},
            "labels": {**labels, LABEL_HOSTNAME: name, "kubernetes.io/os": "linux", "type": "kwok"},
        },
        "spec": {"taints": taints},
        "status": {"capacity": capacity, "allocatable": capacity},
    }


def gpu_nodes(spec: PlatformSpec, per_pool: int = 2) -> list[dict[str, Any]]:
    """PER_POOL nodes of each GPU pool, each of the pool's first (template) machine type."""
    out = []
    for pool in spec.gpu_pools:
        machine = pool.machines[0]
        taints = [dict(GPU_TAINT)]
        if spec.cloud == "azure" and pool.spot:
            taints.append(dict(AKS_SPOT_TAINT))
        capacity = {
            "cpu": str(machine.vcpus),
            "memory": f"{machine.memory_gib}Gi",
            "pods": "110",
            GPU_RESOURCE: str(machine.gpus),
            "ephemeral-storage": f"{pool.disk_size_gb}Gi",
        }
        labels = {**pool.labels, LABEL_ZONE: pool.zone}
        out += [node(f"{pool.name}-{i}", labels, taints, capacity) for i in range(per_pool)]
    return out


# The manager nodes' taint: the Azure form, whose key (torchfleet.io/pool) is also the CPU pool's, so the tier
# shows that tolerating the CPU pool's taint does not reach the manager nodes.
MANAGER_TAINT = MANAGER_TAINTS["azure"]


def manager_nodes(zones: list[str], cpu: str = "4", memory: str = "16Gi") -> list[dict[str, Any]]:
    """One tainted on-demand manager node per zone: etcd, its gate, the controllers and the healer land here,
    which tolerate the taint (components/kube/transforms.py set_manager_selector), and nothing of a researcher's."""
    capacity = {"cpu": cpu, "memory": memory, "pods": "110", "ephemeral-storage": "100Gi"}
    return [
        node(f"{MANAGER_POOL_NAME}-{zone}", {LABEL_MANAGER: MANAGER_POOL_NAME, LABEL_ZONE: zone},
             [dict(MANAGER_TAINT)], capacity)
        for zone in zones
    ]


def cpu_nodes(zones: list[str], cpu: str = "4", memory: str = "16Gi") -> list[dict[str, Any]]:
    """One CPU pool node per zone, as a cloud's cpuPool template promises: the pool label and taint (CPU jobs,
    readers, TensorBoard and Lighthouses select and tolerate them: torchfleet/jobs/pod_template.py cpu_pool)."""
    capacity = {"cpu": cpu, "memory": memory, "pods": "110", "ephemeral-storage": "100Gi"}
    return [
        node(f"{CPU_POOL_NAME}-{zone}", {LABEL_MANAGER: CPU_POOL_NAME, LABEL_ZONE: zone}, [dict(CPU_TAINT)], capacity)
        for zone in zones
    ]
