"""GPU pools across clouds: EKS node groups, GKE node pools and AKS agent pools as one Pool shape."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from components import catalog
from components.policy.inputs import _count_only, _get, _items, _list, _number, _truthy
from components.policy.model import UNKNOWN, Resource
from components.spec import GPU_TAINT, LABEL_POOL

TAINT_EFFECTS = {"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute", "PREFER_NO_SCHEDULE": "PreferNoSchedule"}
REQUIRED_TAINT = (GPU_TAINT["key"], GPU_TAINT["value"], GPU_TAINT["effect"])
_GCP_ZONE = re.compile(r"^[a-z]+-[a-z]+\d+-[a-z]$")


@dataclass(frozen=True)
class Pool:
    """One node pool as the rules see it, whatever cloud it is on."""

    resource: Resource
    label: str
    cloud: str
    machine_types: tuple[str, ...]
    labels: dict[str, str]
    taints: Any  # list of (key, value, effect) or UNKNOWN
    zones: Any  # list of zones/subnets, None: not pinned (all of the cluster's zones), or UNKNOWN
    spot: Any  # bool or UNKNOWN
    max_nodes: Any  # int, None (unbounded/unknown shape) or UNKNOWN
    accelerators: int | None = None  # GPUs attached per node (GKE guestAccelerators)

    @property
    def gpus_per_node(self) -> int | None:
        """GPUs one node brings, from the accelerators or the catalog; None when not countable."""
        if self.accelerators:
            return self.accelerators
        counts = []
        for machine in self.machine_types:
            found = catalog.find_machine(self.cloud, machine) if isinstance(machine, str) else None
            if found is None:
                return None
            counts.append(found[1].gpus)
        # The autoscaler may add any of the group's machines: count the biggest.
        return max(counts) if counts else None

    @property
    def is_gpu(self) -> bool:
        if self.labels.get(LABEL_POOL) == "gpu" or self.accelerators:
            return True
        return any(
            isinstance(m, str) and catalog.find_machine(self.cloud, m) is not None for m in self.machine_types
        )


def _taints(value: Any) -> Any:
    taints = _list(value)
    if taints is UNKNOWN:
        return UNKNOWN
    return [(t.get("key"), t.get("value"), TAINT_EFFECTS.get(t.get("effect"), t.get("effect")))
            for t in taints if isinstance(t, dict)]


def _eks_pool(r: Resource) -> Pool:
    i = r["inputs"]
    # EKS defaults to ON_DEMAND when capacityType is not set.
    capacity = i.get("capacityType", "ON_DEMAND")
    return Pool(
        resource=r,
        label=r["name"],
        cloud="aws",
        machine_types=tuple(_items(i.get("instanceTypes"))),
        labels=i.get("labels") or {},
        taints=_taints(i.get("taints")),
        # One subnet is one zone; a node group over several subnets spreads over several zones.
        zones=_count_only(i.get("subnetIds")),
        spot=UNKNOWN if capacity is UNKNOWN else capacity == "SPOT",
        max_nodes=_number(_get(i, "scalingConfig", "maxSize")),
    )


def _gke_pool(r: Resource) -> Pool:
    i = r["inputs"]
    node = i.get("nodeConfig") or {}
    zones = i.get("nodeLocations")
    if zones is None:
        # Without nodeLocations a pool takes its cluster's zones: one only for a zonal cluster.
        location = i.get("location")
        zones = [location] if isinstance(location, str) and _GCP_ZONE.match(location) else None
    counts = [_number(a.get("count")) for a in _items(node.get("guestAccelerators")) if isinstance(a, dict)]
    accelerators = sum(c for c in counts if isinstance(c, int))
    scaling = i.get("autoscaling") or {}
    n_zones = len(zones) if isinstance(zones, list) else None
    if scaling.get("totalMaxNodeCount") is not None:
        max_nodes = _number(scaling["totalMaxNodeCount"])
    else:
        # GKE's maxNodeCount (and nodeCount) is per zone:
        # https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters.nodePools#nodepoolautoscaling
        per_zone = _number(scaling.get("maxNodeCount", i.get("nodeCount", i.get("initialNodeCount"))))
        max_nodes = UNKNOWN if UNKNOWN in (per_zone, zones) else None
        if max_nodes is None and per_zone is not None and n_zones:
            max_nodes = per_zone * n_zones
    spot = node.get("spot")
    preemptible = node.get("preemptible")
    return Pool(
        resource=r,
        label=r["name"],
        cloud="gcp",
        machine_types=(node["machineType"],) if node.get("machineType") else (),
        labels=node.get("labels") or {},
        taints=_taints(node.get("taints")),
        zones=_count_only(zones),
        spot=UNKNOWN if UNKNOWN in (spot, preemptible) else _truthy(spot) or _truthy(preemptible),
        max_nodes=max_nodes,
        accelerators=accelerators or None,
    )


def _aks_taint(text: Any) -> tuple:
    # AKS writes taints as "key=value:Effect".
    match = re.match(r"^([^=:]+)(?:=([^:]*))?:(\w+)$", text) if isinstance(text, str) else None
    return (match.group(1), match.group(2), match.group(3)) if match else (text, None, None)


def _aks_pool(r: Resource, profile: dict, label: str) -> Pool:
    taints = _list(profile.get("nodeTaints"))
    if taints is not UNKNOWN:
        taints = [_aks_taint(t) for t in taints]
    priority = profile.get("scaleSetPriority", "Regular")
    autoscaling = profile.get("enableAutoScaling")
    # Without the autoscaler an AKS pool has `count` nodes (1 when not set).
    max_nodes = _number(profile.get("maxCount") if _truthy(autoscaling) else profile.get("count", 1))
    zones = profile.get("availabilityZones")
    return Pool(
        resource=r,
        label=label,
        cloud="azure",
        machine_types=(profile["vmSize"],) if profile.get("vmSize") else (),
        labels=profile.get("nodeLabels") or {},
        taints=taints,
        zones=_count_only(zones) if zones else None,
        spot=UNKNOWN if priority is UNKNOWN else priority == "Spot",
        max_nodes=max_nodes,
    )


def node_pools(resources: Iterable[Resource]) -> Iterator[Pool]:
    """Every node pool of the stack: EKS node groups, GKE node pools, AKS agent pools (also inline)."""
    for r in resources:
        if r["type"] == "aws:eks/nodeGroup:NodeGroup":
            yield _eks_pool(r)
        elif r["type"] == "gcp:container/nodePool:NodePool":
            yield _gke_pool(r)
        elif r["type"] == "azure-native:containerservice:AgentPool":
            yield _aks_pool(r, r["inputs"], r["name"])
        elif r["type"] == "azure-native:containerservice:ManagedCluster":
            for profile in _items(r["inputs"].get("agentPoolProfiles")):
                yield _aks_pool(r, profile, f"{r['name']}/{profile.get('name')}")


def gpu_pools(resources: Iterable[Resource]) -> list[Pool]:
    return [p for p in node_pools(resources) if p.is_gpu]
