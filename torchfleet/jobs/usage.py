"""What a job has used so far: machine-hours, GPU-hours and their cost, for `status` and `list` (issue 21).

Read from the job's pods: each pod holds one machine (the jobs are sized one pod per node,
sizing.py) from when its container started until it ended (its termination time) or now. Pods the
controller has already deleted (replaced after a reclaim, or cleaned up) are gone from the API, so
the figures are a floor ("at least"). The price is the node's region's spot or on-demand price from
components/catalog/spot_prices.yaml (issue 32: the node's topology.kubernetes.io/region and its
cloud's spot label, else the stack's region and on demand), with its date; a machine or region
without a row there is priced at its on-demand list price from components/catalog/prices.yaml (one
region per cloud), and the basis beside the figure says which. The machine is the node's own
instance type where the nodes can be read, else the one the job was sized for (its annotation).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from components import catalog
from components import spec as platform
from components.catalog import prices, spot_prices
from torchfleet.jobs import manifests, pod_template

if TYPE_CHECKING:
    from kubernetes import client

INSTANCE_TYPE = "node.kubernetes.io/instance-type"
REGION = "topology.kubernetes.io/region"  # well-known label, set by each cloud's node controller
# A node's capacity type as each cloud labels it: EKS managed node groups' eks.amazonaws.com/capacityType
# (docs.aws.amazon.com/eks/latest/userguide/managed-node-groups.html), GKE's cloud.google.com/gke-spot
# (cloud.google.com/kubernetes-engine/docs/concepts/spot-vms), AKS's kubernetes.azure.com/scalesetpriority
# (learn.microsoft.com/azure/aks/spot-node-pool).
SPOT_LABELS = {"eks.amazonaws.com/capacityType": "SPOT", "cloud.google.com/gke-spot": "true",
               "kubernetes.azure.com/scalesetpriority": "spot"}


def is_spot(labels: dict[str, str] | None) -> bool:
    return any((labels or {}).get(key) == value for key, value in SPOT_LABELS.items())


@dataclass(frozen=True)
class Usage:
    machine_hours: float
    gpu_hours: float
    usd: float | None  # None: some machine has no list price
    basis: str | None  # where the price comes from; None without one
    # "no spot price known for n1-standard-8 in gcp/us-central1 (why)": spot nodes priced at the list price
    no_spot_price: tuple[str, ...] = ()

    def text(self) -> str:
        used = f"at least {self.gpu_hours:.2f} GPU-hours ({self.machine_hours:.2f} machine-hours)"
        if self.usd is None:
            return used + (", no list price to cost them" if self.basis is None else ", a machine without a list price")
        ceiling = "; spot pays less" if "list price" in (self.basis or "") else ""
        missing = "".join(f"; {line}" for line in self.no_spot_price)
        return f"{used}, at most {self.usd:.2f} USD so far ({self.basis}{ceiling}{missing})"

    def as_dict(self) -> dict[str, Any]:
        return {"machineHours": round(self.machine_hours, 4), "gpuHours": round(self.gpu_hours, 4),
                "usd": None if self.usd is None else round(self.usd, 4), "priceBasis": self.basis,
                "noSpotPrice": list(self.no_spot_price)}


def _started(pod: client.V1Pod) -> datetime | None:
    times = [s.state.running.started_at if s.state and s.state.running else
             s.state.terminated.started_at if s.state and s.state.terminated else None
             for s in (pod.status and pod.status.container_statuses) or []]
    times = [t for t in times if t is not None]
    return min(times) if times else (pod.status and pod.status.start_time) or None


def _ended(pod: client.V1Pod, now: datetime) -> datetime:
    statuses = (pod.status and pod.status.container_statuses) or []
    if statuses and all(s.state and s.state.terminated for s in statuses):
        return max(s.state.terminated.finished_at or now for s in statuses)
    return now


def pod_hours(pod: client.V1Pod, now: datetime) -> float:
    """Hours the pod has held its machine; 0 for one that never started (Pending)."""
    start = _started(pod)
    if start is None:
        return 0.0
    return max(0.0, (_ended(pod, now) - start).total_seconds() / 3600)


def _gpus_per_pod(job: dict[str, Any]) -> int:
    spec = (manifests.worker_spec(job).get("template") or {}).get("spec") or {}
    container = (spec.get("containers") or [{}])[0]
    value = ((container.get("resources") or {}).get("limits") or {}).get(platform.GPU_RESOURCE, 0)
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def of_job(job: dict[str, Any], pods: Sequence[client.V1Pod], cloud: str, node_labels, now: datetime,
           region: str | None = None) -> Usage:
    """The job's usage from its current ``pods``; ``node_labels(name)`` may return None (nodes unreadable).
    ``region``: the stack's, for pods whose node (or its region label) cannot be read."""
    meta = job.get("metadata") or {}
    sized = (meta.get("annotations") or {}).get(pod_template.ANNOTATION_MACHINE)
    gpu = (meta.get("labels") or {}).get(platform.LABEL_GPU)
    gpus = _gpus_per_pod(job)
    table = prices.of(cloud)
    machine_hours = usd = 0.0
    priced = table is not None
    bases: list[str] = []
    no_spot: list[str] = []
    for pod in pods:
        hours = pod_hours(pod, now)
        if hours <= 0:
            continue
        machine_hours += hours
        node = pod.spec and pod.spec.node_name
        labels = node_labels(node) if node else None
        machine = (labels or {}).get(INSTANCE_TYPE) or sized
        price = None
        row = spot_prices.price(cloud, (labels or {}).get(REGION) or region, machine) if machine else None
        if row is not None:
            price = row.usd(is_spot(labels))
            bases.append(row.basis(is_spot(labels)))
        elif table is not None and machine:
            price = catalog.list_price(gpu, cloud, machine) if gpu else prices.machine_price(cloud, machine)
            bases.append(f"on-demand list price, {table.region}, priced {table.priced}")
            if is_spot(labels):
                no_spot.append(spot_prices.missing(cloud, (labels or {}).get(REGION) or region, machine))
        if price is None:
            priced = False
        else:
            usd += hours * price
    if not bases and table is not None:
        bases.append(f"on-demand list price, {table.region}, priced {table.priced}")
    basis = "; ".join(dict.fromkeys(bases)) or None
    return Usage(machine_hours, machine_hours * gpus, usd if priced else None, basis, tuple(dict.fromkeys(no_spot)))
