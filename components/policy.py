"""Guardrail rules, written once: the offline `torchfleet check` and the CrossGuard pack (policy/) run them.

Pure Python, no pulumi import: a rule is a function over a list of resources, each a plain dict

    {"type": "aws:eks/nodeGroup:NodeGroup", "name": "...", "inputs": {...engine property names...},
     "options": {"protect": bool, "propertyDependencies": {"subnetIds": [urn, ...]}}, "urn": "..."}

which is what both the recording mock monitor (Recorded) and pulumi-policy (PolicyResource) see.
`check(resources, max_gpus=..., allow_on_demand_gpus=..., restrict_public_endpoint=...)` returns every
violation, each naming its rule, the resource and why, and whether it is only advisory (a rule
whose level the stack's limits set: public-endpoint is advisory unless the stack restricts it).
During a real `pulumi preview` some values are not known yet; the pack passes them as UNKNOWN and
a rule never judges an unknown value (it is judged again at `pulumi up`).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from components import catalog
from components.spec import GPU_TAINT, LABEL_POOL, GuardrailSpec

Resource = dict[str, Any]


class _Unknown:
    """A value the engine does not know during preview (an id, a computed output)."""

    _instance: _Unknown | None = None

    def __new__(cls) -> _Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "<unknown during preview>"


UNKNOWN = _Unknown()
STACK = "(stack)"  # the `resource` of a violation of the whole stack (the GPU cap)


@dataclass(frozen=True)
class Violation:
    rule: str
    resource: str
    why: str
    urn: str | None = None  # lets CrossGuard attach the violation to the resource
    advisory: bool = False  # reported, but does not fail the check (see Rule.level)

    def line(self) -> str:
        return f"{self.rule}  {self.resource}  {self.why}"


@dataclass(frozen=True)
class Limits:
    """What a stack allows; the defaults are spec.GuardrailSpec's (documented in README "Guardrails")."""

    max_gpus: int = GuardrailSpec().max_gpus
    allow_on_demand_gpus: bool = GuardrailSpec().allow_on_demand_gpus
    restrict_public_endpoint: bool = GuardrailSpec().restrict_public_endpoint


# ---------------------------------------------------------------- helpers


def _get(obj: Any, *path: str | int) -> Any:
    """obj[path...] or None when any step is missing; UNKNOWN when a step is not known yet."""
    for step in path:
        if obj is UNKNOWN:
            return UNKNOWN
        if isinstance(step, int):
            obj = obj[step] if isinstance(obj, list) and len(obj) > step else None
        else:
            obj = obj.get(step) if isinstance(obj, dict) else None
        if obj is None:
            return None
    return obj


def _number(value: Any) -> Any:
    """A count as int: the engine sends every number as a float (protobuf Struct), 8 arrives as 8.0."""
    if value is UNKNOWN or value is None:
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        return None
    return int(value)


def _truthy(value: Any) -> bool:
    # pulumi-aws types some booleans as strings ("true"), e.g. launch template network interfaces.
    return value is True or (isinstance(value, str) and value.lower() == "true")


def _urn_key(urn: str) -> str:
    """'<type>::<name>' of a URN (urn:pulumi:stack::project::parent$type::name)."""
    parts = urn.split("::")
    return f"{parts[2].split('$')[-1]}::{'::'.join(parts[3:])}" if len(parts) >= 4 else urn


def _key(r: Resource) -> str:
    return f"{r['type']}::{r['name']}"


def _deps(r: Resource, prop: str) -> list[str]:
    """Keys of the resources an input property was computed from (engine propertyDependencies)."""
    urns = ((r.get("options") or {}).get("propertyDependencies") or {}).get(prop) or []
    return [_urn_key(u) for u in urns]


def _v(rule: str, r: Resource, why: str, label: str | None = None) -> Violation:
    return Violation(rule, label or r["name"], why, r.get("urn"))


# ---------------------------------------------------------------- GPU pools across clouds

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


def _list(value: Any) -> Any:
    """A list input as a list ([] when absent), or UNKNOWN when it or any item is not known yet."""
    if value is UNKNOWN or (isinstance(value, list) and UNKNOWN in value):
        return UNKNOWN
    return list(value) if isinstance(value, list) else []


def _items(value: Any) -> list:
    """The known items of a list input, for rules that look at each item on its own."""
    return [v for v in value if v is not UNKNOWN] if isinstance(value, list) else []


def _count_only(value: Any) -> Any:
    """A list whose length is what matters: known even when its items are not (ids in preview)."""
    return list(value) if isinstance(value, list) else (UNKNOWN if value is UNKNOWN else None)


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


# ---------------------------------------------------------------- the rules


def gpu_pool_tainted(resources: list[Resource], limits: Limits) -> Iterator[Violation]:
    """Only pods that tolerate the GPU taint (training pods) may land on GPU nodes."""
    want = "{}={}:{}".format(*REQUIRED_TAINT)
    for pool in gpu_pools(resources):
        if pool.taints is UNKNOWN:
            continue
        if REQUIRED_TAINT not in pool.taints:
            yield _v("gpu-pool-tainted", pool.resource, f"GPU pool has no taint {want}", pool.label)


def gpu_pool_one_zone(resources: list[Resource], limits: Limits) -> Iterator[Violation]:
    """All pods of one job stay in one zone: a pool that spans zones lets the autoscaler split them."""
    for pool in gpu_pools(resources):
        if pool.zones is UNKNOWN:
            continue
        if pool.zones is None:
            yield _v("gpu-pool-one-zone", pool.resource, "GPU pool is not pinned to a zone", pool.label)
        elif len(pool.zones) != 1:
            yield _v(
                "gpu-pool-one-zone", pool.resource,
                f"GPU pool must be in exactly one zone, has {len(pool.zones)}: {pool.zones}", pool.label,
            )


def gpu_pool_spot(resources: list[Resource], limits: Limits) -> Iterator[Violation]:
    """On-demand GPUs cost several times their spot price: the stack must ask for them."""
    if limits.allow_on_demand_gpus:
        return
    for pool in gpu_pools(resources):
        if pool.spot is False:
            yield _v(
                "gpu-pool-spot", pool.resource,
                "GPU pool is on-demand; use spot or set guardrails.allowOnDemandGpus: true", pool.label,
            )


def gpu_count_cap(resources: list[Resource], limits: Limits) -> Iterator[Violation]:
    """Cost guardrail: every GPU pool at its maximum stays within guardrails.maxGpus."""
    total, parts = 0, []
    for pool in gpu_pools(resources):
        per_node, nodes = pool.gpus_per_node, pool.max_nodes
        if nodes is UNKNOWN:
            continue
        if per_node is None:
            yield _v("gpu-count-cap", pool.resource,
                     f"cannot count GPUs per node of {list(pool.machine_types)}: not in the GPU catalog", pool.label)
            continue
        if not isinstance(nodes, int):
            yield _v("gpu-count-cap", pool.resource, "GPU pool has no maximum node count", pool.label)
            continue
        total += nodes * per_node
        parts.append(f"{pool.label}={nodes}x{per_node}")
    if total > limits.max_gpus:
        yield Violation(
            "gpu-count-cap", STACK,
            f"GPU pools can reach {total} GPUs ({', '.join(parts)}), over guardrails.maxGpus={limits.max_gpus}",
        )


# Stores and how to tell they are encrypted at rest. Filestore and Azure Storage encrypt every
# byte at rest and cannot be turned off:
#   https://cloud.google.com/docs/security/encryption/default-encryption
#   https://learn.microsoft.com/azure/storage/common/storage-service-encryption
# EFS encrypts only when asked at creation: https://docs.aws.amazon.com/efs/latest/ug/encryption-at-rest.html
STORES: dict[str, Callable[[dict], Any] | None] = {
    "aws:efs/fileSystem:FileSystem": lambda inputs: inputs.get("encrypted"),
    "gcp:filestore/instance:Instance": None,
    "azure-native:storage:StorageAccount": None,
    "azure-native:storage:FileShare": None,
}


def store_encrypted(resources: list[Resource], limits: Limits) -> Iterator[Violation]:
    for r in resources:
        encrypted = STORES.get(r["type"])
        if encrypted is None:
            continue
        value = encrypted(r["inputs"])
        if value is not UNKNOWN and not _truthy(value):
            yield _v("store-encrypted", r, "shared store is not encrypted at rest; set encrypted: true")


def store_protected(resources: list[Resource], limits: Limits) -> Iterator[Violation]:
    """Checkpoints and data live on the store: `pulumi destroy` must not take it."""
    for r in resources:
        if r["type"] in STORES and not (r.get("options") or {}).get("protect"):
            yield _v("store-protected", r, "shared store is not protected (resource option protect)")


def no_public_node_ips(resources: list[Resource], limits: Limits) -> Iterator[Violation]:
    """Nodes reach the internet through NAT; a public IP per node is an open door and a cost."""
    rule = "no-public-node-ips"
    by_key = {_key(r): r for r in resources}
    reported: set[str] = set()
    for r in resources:
        i, t = r["inputs"], r["type"]
        if t == "aws:ec2/launchTemplate:LaunchTemplate":
            for nic in _items(i.get("networkInterfaces")):
                if _truthy(nic.get("associatePublicIpAddress")):
                    yield _v(rule, r, "launch template gives nodes a public IP (associatePublicIpAddress)")
        elif t == "aws:eks/nodeGroup:NodeGroup":
            for key in _deps(r, "subnetIds"):
                subnet = by_key.get(key)
                if subnet and _truthy(subnet["inputs"].get("mapPublicIpOnLaunch")) and key not in reported:
                    reported.add(key)
                    yield _v(rule, subnet, f"node subnet of {r['name']} maps public IPs on launch")
        elif t == "gcp:container/cluster:Cluster":
            private = _get(i, "privateClusterConfig", "enablePrivateNodes")
            pools = [p for p in resources if p["type"] == "gcp:container/nodePool:NodePool"
                     and _key(r) in _deps(p, "cluster")]
            pools_private = pools and all(_truthy(_get(p["inputs"], "networkConfig", "enablePrivateNodes"))
                                          for p in pools)
            if private is not UNKNOWN and not _truthy(private) and not pools_private:
                yield _v(rule, r, "GKE nodes get public IPs; set privateClusterConfig.enablePrivateNodes: true")
        elif t == "gcp:container/nodePool:NodePool":
            if _get(i, "networkConfig", "enablePrivateNodes") is False:
                yield _v(rule, r, "node pool turns private nodes off (networkConfig.enablePrivateNodes: false)")
        elif t == "azure-native:containerservice:AgentPool":
            if _truthy(i.get("enableNodePublicIP")):
                yield _v(rule, r, "AKS pool gives nodes public IPs (enableNodePublicIP)")
        elif t == "azure-native:containerservice:ManagedCluster":
            for profile in _items(i.get("agentPoolProfiles")):
                if _truthy(profile.get("enableNodePublicIP")):
                    yield _v(rule, r, "AKS pool gives nodes public IPs (enableNodePublicIP)",
                             f"{r['name']}/{profile.get('name')}")


# ---------------------------------------------------------------- the cluster API endpoint


def _open_cidrs(cidrs: list) -> list[str]:
    """The CIDRs of an allow-list that let in the whole internet (0.0.0.0/0, ::/0)."""
    found = []
    for c in cidrs:
        try:
            if isinstance(c, str) and ipaddress.ip_network(c, strict=False).prefixlen == 0:
                found.append(c)
        except ValueError:
            continue
    return found


_NARROW = "narrow network.publicAccessCidrs to your VPN or office range, or set it to [] (private endpoint)"


def public_endpoint(resources: list[Resource], limits: Limits) -> Iterator[Violation]:
    """The Kubernetes API endpoint is not reachable from the whole internet.

    A stolen kubeconfig or an API server CVE is then exploitable from anywhere. Per cloud:
    EKS vpcConfig.publicAccessCidrs (default 0.0.0.0/0 while endpointPublicAccess, which defaults
    to true): https://docs.aws.amazon.com/eks/latest/userguide/cluster-endpoint.html
    GKE: a public endpoint (privateClusterConfig.enablePrivateEndpoint not true) without master
    authorized networks is open to all:
    https://cloud.google.com/kubernetes-engine/docs/how-to/authorized-networks
    AKS: a public API server without apiServerAccessProfile.authorizedIPRanges is open to all:
    https://learn.microsoft.com/azure/aks/api-server-authorized-ip-ranges
    """
    rule = "public-endpoint"
    for r in resources:
        i, t = r["inputs"], r["type"]
        if t == "aws:eks/cluster:Cluster":
            public = _get(i, "vpcConfig", "endpointPublicAccess")
            cidrs = _get(i, "vpcConfig", "publicAccessCidrs")
            if public is UNKNOWN or cidrs is UNKNOWN or (public is not None and not _truthy(public)):
                continue
            opened = _open_cidrs(_items(cidrs)) if cidrs else ["0.0.0.0/0 (the default)"]
            if opened:
                yield _v(rule, r, f"EKS API endpoint is public to {', '.join(opened)}; {_NARROW}")
        elif t == "gcp:container/cluster:Cluster":
            private = _get(i, "privateClusterConfig", "enablePrivateEndpoint")
            networks = i.get("masterAuthorizedNetworksConfig")
            if private is UNKNOWN or _truthy(private) or networks is UNKNOWN:
                continue
            if networks is None:
                yield _v(rule, r, f"GKE control plane is public with no master authorized networks; {_NARROW}")
                continue
            opened = _open_cidrs([b.get("cidrBlock") for b in _items(networks.get("cidrBlocks"))
                                  if isinstance(b, dict)])
            if opened:
                yield _v(rule, r, f"GKE master authorized networks let in {', '.join(opened)}; {_NARROW}")
        elif t == "azure-native:containerservice:ManagedCluster":
            profile = i.get("apiServerAccessProfile")
            if profile is UNKNOWN:
                continue
            profile = profile or {}
            private, ranges = profile.get("enablePrivateCluster"), profile.get("authorizedIPRanges")
            if private is UNKNOWN or _truthy(private) or ranges is UNKNOWN:
                continue
            if not ranges:
                yield _v(rule, r, f"AKS API server is public with no authorized IP ranges; {_NARROW}")
            elif opened := _open_cidrs(_items(ranges)):
                yield _v(rule, r, f"AKS authorized IP ranges let in {', '.join(opened)}; {_NARROW}")


# ---------------------------------------------------------------- pinned versions

# Helm takes a version constraint ("^1.2", ">=1", "1.x", "*") and picks the newest match: only an
# exact version is pinned. https://helm.sh/docs/intro/using_helm/#helm-install-installing-a-package
_EXACT_VERSION = re.compile(r"^v?\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.+-]+)?$")
_GIT_REF = re.compile(r"^(v?\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.+-]+)?|[0-9a-f]{40})$")
CHART_TYPES = ("kubernetes:helm.sh/v3:Release", "kubernetes:helm.sh/v4:Chart")
KUSTOMIZE_TYPES = ("kubernetes:kustomize/v2:Directory", "kubernetes:kustomize:Directory")
CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")


def image_is_pinned(image: Any) -> bool:
    """A digest, or a tag other than `latest` (a registry port is not a tag)."""
    if not isinstance(image, str) or not image:
        return False
    if "@sha256:" in image:
        return True
    last = image.rsplit("/", 1)[-1]
    tag = last.split(":", 1)[1] if ":" in last else ""
    return bool(tag) and tag != "latest"


def _images(obj: Any) -> Iterator[str]:
    """Every container image of a Kubernetes object, at any depth (pod templates, CRD replica specs)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in CONTAINER_LISTS and isinstance(v, list):
                for c in v:
                    if isinstance(c, dict) and "image" in c:
                        yield c["image"]
            yield from _images(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _images(v)


def _remote_ref(directory: str) -> str | None:
    match = re.search(r"[?&]ref=([^&]+)", directory)
    return match.group(1) if match else None


def pinned_versions(resources: list[Resource], limits: Limits) -> Iterator[Violation]:
    """What runs must not change under us: charts, kustomize refs and images are pinned."""
    rule = "pinned-versions"
    for r in resources:
        i, t = r["inputs"], r["type"]
        if t in CHART_TYPES:
            version = i.get("version")
            if version is UNKNOWN:
                continue
            if not isinstance(version, str) or not _EXACT_VERSION.match(version):
                yield _v(rule, r, f"chart {i.get('chart')!r} version {version!r} is not an exact version")
        elif t in KUSTOMIZE_TYPES:
            directory = i.get("directory")
            if isinstance(directory, str) and ("://" in directory or directory.startswith("github.com/")):
                ref = _remote_ref(directory)
                if not ref or not _GIT_REF.match(ref):
                    yield _v(rule, r, f"remote kustomization {directory!r} is not pinned to a tag or commit")
        elif t.startswith("kubernetes:"):
            for image in _images(i):
                if image is not UNKNOWN and not image_is_pinned(image):
                    yield _v(rule, r, f"image {image!r} has no pinned tag or digest")


# ---------------------------------------------------------------- the rule table


MANDATORY, ADVISORY = "mandatory", "advisory"  # CrossGuard's enforcement levels, as its config names them


def _always_mandatory(limits: Limits) -> str:
    return MANDATORY


def _public_endpoint_level(limits: Limits) -> str:
    # Advisory by default: narrowing the endpoint needs the deployer's own range, which no default
    # can know; a stack that sets guardrails.restrictPublicEndpoint makes it a failure.
    return MANDATORY if limits.restrict_public_endpoint else ADVISORY


@dataclass(frozen=True)
class Rule:
    name: str
    description: str
    check: Callable[[list[Resource], Limits], Iterable[Violation]]
    level: Callable[[Limits], str] = _always_mandatory  # advisory violations do not fail the check


RULES: tuple[Rule, ...] = (
    Rule("gpu-pool-tainted", "every GPU pool carries the taint nvidia.com/gpu=present:NoSchedule", gpu_pool_tainted),
    Rule("gpu-pool-one-zone", "every GPU pool is in exactly one zone", gpu_pool_one_zone),
    Rule("gpu-pool-spot", "GPU pools are spot unless guardrails.allowOnDemandGpus is true", gpu_pool_spot),
    Rule("gpu-count-cap", "the GPUs all pools can reach stay within guardrails.maxGpus", gpu_count_cap),
    Rule("store-encrypted", "the shared store is encrypted at rest", store_encrypted),
    Rule("store-protected", "the shared store is protected from deletion", store_protected),
    Rule("no-public-node-ips", "nodes have no public IP addresses", no_public_node_ips),
    Rule("pinned-versions", "charts, remote kustomizations and images are pinned", pinned_versions),
    Rule("public-endpoint", "the Kubernetes API endpoint is not open to 0.0.0.0/0 (advisory unless "
         "guardrails.restrictPublicEndpoint is true)", public_endpoint, _public_endpoint_level),
)


def check(
    resources: list[Resource],
    max_gpus: int = Limits.max_gpus,
    allow_on_demand_gpus: bool = Limits.allow_on_demand_gpus,
    rules: Iterable[Rule] = RULES,
    restrict_public_endpoint: bool = Limits.restrict_public_endpoint,
) -> list[Violation]:
    """Every violation of `rules` in the stack's resources, in rule order; advisory ones marked."""
    limits = Limits(max_gpus=max_gpus, allow_on_demand_gpus=allow_on_demand_gpus,
                    restrict_public_endpoint=restrict_public_endpoint)
    found = []
    for rule in rules:
        advisory = rule.level(limits) == ADVISORY
        found += [replace(v, advisory=True) if advisory else v for v in rule.check(resources, limits)]
    return found


# ---------------------------------------------------------------- the CrossGuard pack's config

def pack_config(limits: Limits) -> dict[str, dict[str, Any]]:
    """A stack's limits as a `pulumi preview --policy-pack-config` file: {policy: {key: value}}."""
    return {
        "gpu-count-cap": {"maxGpus": limits.max_gpus},
        "gpu-pool-spot": {"allowOnDemandGpus": limits.allow_on_demand_gpus},
        # The engine reads a policy's level from its config (enforcementLevel) and hands the pack the rest.
        "public-endpoint": {"enforcementLevel": _public_endpoint_level(limits)},
    }


def limits_from_pack_config(config: dict[str, dict[str, Any]]) -> Limits:
    """The inverse of pack_config; a missing key keeps its documented default."""
    default = Limits()
    return Limits(
        max_gpus=int((config.get("gpu-count-cap") or {}).get("maxGpus", default.max_gpus)),
        allow_on_demand_gpus=bool((config.get("gpu-pool-spot") or {}).get("allowOnDemandGpus",
                                                                            default.allow_on_demand_gpus)),
        restrict_public_endpoint=(config.get("public-endpoint") or {}).get("enforcementLevel") == MANDATORY,
    )
