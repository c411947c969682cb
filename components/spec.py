"""The platform spec: frozen dataclasses built from stack config, and the one validator.

Pure Python (no pulumi import) so every rule is tested without mocks. `parse(raw)` takes the
stack's config as a dict keyed by full config key ("torchfleet:gpuPools", "aws:region"), with
structured values already decoded, and returns a PlatformSpec or raises ConfigError listing
every problem at once, each naming its key path and what would be valid. The checks against each
cloud's own limits (regions, versions, networks, derived names) live in cloud_limits.py.
"""

from __future__ import annotations

import difflib
import ipaddress
import re
from dataclasses import dataclass, field
from typing import Any

from components import catalog, cloud_limits, limits
from components.catalog import machines, regions
from components.clouds.traits import CLOUD_TRAITS, MAX_ETCD_MEMBERS, CloudTraits

NS = "torchfleet"
DEFAULT_KUBERNETES_VERSION = "1.33"
DEFAULT_NAMESPACE = "elastic-job"
DEFAULT_CLAIM = "shared-data"
OPERATORS = ("torchelastic", "kubeflow")
# On-demand machines for the manager pool (etcd, controllers, autoscaler) when config names none.
DEFAULT_MANAGER_MACHINE = {
    "aws": "m6i.large",
    "gcp": "e2-standard-4",
    "azure": "Standard_D4s_v5",
    "local": "",
}

# The contract between pools, jobs and the CLI (README.md, "Names, labels, taints").
LABEL_POOL = "torchfleet.io/pool"
LABEL_GPU = "torchfleet.io/gpu"
LABEL_CAPACITY = "torchfleet.io/capacity"
LABEL_GPU_PRESENT = "nvidia.com/gpu.present"
LABEL_ZONE = "topology.kubernetes.io/zone"
GPU_RESOURCE = "nvidia.com/gpu"
# Value always set: the EKS cluster autoscaler drops node-template taints without a value.
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
# AKS puts this on every spot pool itself; declared so there is no diff, tolerated by jobs.
AKS_SPOT_TAINT = {"key": "kubernetes.azure.com/scalesetpriority", "value": "spot", "effect": "NoSchedule"}
MANAGER_POOL_NAME = "manager"
# The training image's user (training-image/Dockerfile USER): jobs run as it, the shared store's
# root belongs to it. Numeric so runAsNonRoot can be verified.
TRAINING_UID = 10001
# On every pod of a training job (the job builder sets them; network policies select on them).
LABEL_ROLE = "torchfleet.io/role"
ROLE_TRAINING = "training"
LABEL_JOB = "torchfleet.io/job"

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_DURATION = re.compile(r"^\d+(s|m|h)$")
# Past this a number counts nothing real, and would leave the program as a float (maxSize: 1e+20).
_INT_CEILING = 2**31 - 1
_r = cloud_limits.short_repr


class ConfigError(ValueError):
    """Every problem found in a stack config, each as 'key: what is wrong; what would be valid'."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("invalid stack config:\n  - " + "\n  - ".join(self.problems))


# ---------------------------------------------------------------- the spec


@dataclass(frozen=True)
class NodePoolSpec:
    machine_type: str
    min_nodes: int
    max_nodes: int
    disk_size_gb: int = 100


@dataclass(frozen=True)
class GpuPoolSpec:
    """One GPU pool: one GPU type in exactly one zone."""

    gpu: str
    zone: str
    machines: tuple[catalog.Machine, ...]
    min_nodes: int
    max_nodes: int
    spot: bool = True
    disk_size_gb: int = 200
    accelerator: str | None = None  # GCP's guest_accelerator type

    @property
    def name(self) -> str:
        return f"gpu-{self.gpu}-{self.zone}"

    @property
    def machine_types(self) -> list[str]:
        return [m.type for m in self.machines]

    @property
    def gpus_per_node(self) -> int:
        return self.machines[0].gpus

    @property
    def capacity(self) -> str:
        return "spot" if self.spot else "on-demand"

    @property
    def labels(self) -> dict[str, str]:
        return {
            LABEL_POOL: "gpu",
            LABEL_GPU: self.gpu,
            LABEL_CAPACITY: self.capacity,
            LABEL_GPU_PRESENT: "true",
        }


@dataclass(frozen=True)
class StorageSpec:
    protect: bool = True
    tier: str | None = None
    size_gb: int | None = None


@dataclass(frozen=True)
class TrainingSpec:
    operator: str = "torchelastic"
    namespace: str = DEFAULT_NAMESPACE
    etcd_replicas: int = 3
    claim_name: str = DEFAULT_CLAIM
    # Grace period jobs get on a spot notice (seconds): the cloud's notice window.
    termination_grace_s: int = 120


@dataclass(frozen=True)
class NetworkSpec:
    cidr: str = "10.0.0.0/16"
    public_access_cidrs: tuple[str, ...] = ("0.0.0.0/0",)
    nat: str = "single"  # "single" | "perZone"


@dataclass(frozen=True)
class AutoscalerSpec:
    # The blog saw 10 minutes of idle GPUs before scale-down; idle GPUs cost money.
    scale_down_unneeded_time: str = "5m"
    scale_down_delay_after_add: str = "5m"


@dataclass(frozen=True)
class GuardrailSpec:
    max_gpus: int = 64
    allow_on_demand_gpus: bool = False
    # The public-endpoint rule (an API endpoint open to 0.0.0.0/0) is advisory unless this is true.
    restrict_public_endpoint: bool = False


@dataclass(frozen=True)
class PlatformSpec:
    stack: str
    cloud: str
    region: str | None
    zones: tuple[str, ...]
    kubernetes_version: str
    manager_pool: NodePoolSpec
    gpu_pools: tuple[GpuPoolSpec, ...]
    storage: StorageSpec = field(default_factory=StorageSpec)
    training: TrainingSpec = field(default_factory=TrainingSpec)
    network: NetworkSpec = field(default_factory=NetworkSpec)
    autoscaler: AutoscalerSpec = field(default_factory=AutoscalerSpec)
    guardrails: GuardrailSpec = field(default_factory=GuardrailSpec)
    project: str | None = None  # GCP project

    @property
    def traits(self) -> CloudTraits:
        return CLOUD_TRAITS[self.cloud]

    @property
    def max_gpus(self) -> int:
        """The most GPUs the stack can reach with every pool at its maximum."""
        return sum(p.max_nodes * p.gpus_per_node for p in self.gpu_pools)


# ---------------------------------------------------------------- parsing


class _Problems:
    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, key: str, message: str) -> None:
        self.items.append(f"{key}: {message}")


# Allowed keys of each structured value; anything else is a typo worth reporting.
_TOP_KEYS = {
    "cloud",
    "zones",
    "kubernetesVersion",
    "managerPool",
    "gpuPools",
    "storage",
    "training",
    "network",
    "autoscaler",
    "guardrails",
}
_MANAGER_KEYS = {"machineType", "minNodes", "maxNodes", "diskSizeGb"}
_GPU_POOL_KEYS = {"gpu", "maxNodes", "minNodes", "machineTypes", "spot", "zones", "diskSizeGb"}
_STORAGE_KEYS = {"protect", "tier", "sizeGb"}
_TRAINING_KEYS = {"operator", "namespace", "etcdReplicas"}
_NETWORK_KEYS = {"cidr", "publicAccessCidrs", "natGateways"}
_AUTOSCALER_KEYS = {"scaleDownUnneededTime", "scaleDownDelayAfterAdd"}
_GUARDRAIL_KEYS = {"maxGpus", "allowOnDemandGpus", "restrictPublicEndpoint"}


def _unknown_keys(p: _Problems, key: str, value: dict, allowed: set[str]) -> None:
    for k in value:
        if k not in allowed:
            close = difflib.get_close_matches(k, sorted(allowed), n=1)
            hint = f"did you mean '{close[0]}'?" if close else f"valid keys: {', '.join(sorted(allowed))}"
            p.add(f"{key}.{k if isinstance(k, str) else _r(k)}", f"unknown key; {hint}")


def _obj(p: _Problems, key: str, value: Any, allowed: set[str]) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        p.add(key, f"expected an object with keys {', '.join(sorted(allowed))}, got {_r(value)}")
        return {}
    _unknown_keys(p, key, value, allowed)
    return value


def _int(
    p: _Problems, key: str, value: Any, default: int | None, minimum: int = 0, maximum: int | None = None,
    why: str = "",
) -> int | None:
    """A whole number in [minimum, maximum]; `why` cites where the maximum comes from."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        # Top-level scalars arrive from Pulumi as strings.
        if isinstance(value, str) and value.strip().lstrip("-").isdigit() and len(value) < 20:
            value = int(value)
        else:
            p.add(key, f"expected a whole number, got {_r(value)}")
            return default
    if value < minimum:
        p.add(key, f"must be >= {minimum}, got {_r(value)}")
        return value
    limit = _INT_CEILING if maximum is None else maximum
    if value > limit:
        reason = why or "the largest number a config value takes"
        p.add(key, f"must be <= {limit} ({reason}), got {_r(value)}")
        return default
    return value


def _bool(p: _Problems, key: str, value: Any, default: bool) -> bool:
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    p.add(key, f"expected true or false, got {_r(value)}")
    return default


def _str_list(p: _Problems, key: str, value: Any) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, (str, int)) for v in value):
        p.add(key, f"expected a list of strings, got {_r(value)}")
        return None
    return [str(v) for v in value]


def _k(name: str) -> str:
    return f"{NS}:{name}"


def parse(raw: dict[str, Any], stack: str = "dev") -> PlatformSpec:
    """Build and validate a PlatformSpec from full-key config; raise ConfigError on any problem."""
    p = _Problems()
    for key in raw:
        if key.startswith(f"{NS}:") and key.split(":", 1)[1] not in _TOP_KEYS:
            name = key.split(":", 1)[1]
            close = difflib.get_close_matches(name, sorted(_TOP_KEYS), n=1)
            hint = f"did you mean '{_k(close[0])}'?" if close else f"valid keys: {', '.join(sorted(_TOP_KEYS))}"
            p.add(key, f"unknown key; {hint}")

    cloud = raw.get(_k("cloud"))
    if not isinstance(cloud, str) or cloud not in CLOUD_TRAITS:
        p.add(_k("cloud"), f"must be one of {', '.join(CLOUD_TRAITS)}, got {_r(cloud)}")
        raise ConfigError(p.items)  # nothing else can be checked without knowing the cloud
    traits = CLOUD_TRAITS[cloud]
    cloud_limits.other_clouds_keys(p, raw, cloud)

    region = cloud_limits.region(p, raw, cloud, traits)
    for required in traits.required_keys:
        if not raw.get(required):
            p.add(required, f"required for cloud {cloud}")
    project = raw.get("gcp:project")
    if cloud == "gcp":
        cloud_limits.gcp_project(p, project)

    zones = _parse_zones(p, raw, cloud, traits, region)
    version = cloud_limits.kubernetes_version(
        p, raw.get(_k("kubernetesVersion")), cloud, traits, DEFAULT_KUBERNETES_VERSION
    )
    cloud_limits.stack_name(p, stack, cloud, tuple(zones))

    manager = _parse_manager(p, raw.get(_k("managerPool")), cloud)
    gpu_pools = _parse_gpu_pools(p, raw.get(_k("gpuPools")), cloud, traits, zones)
    if region and gpu_pools:
        cloud_limits.region_offers(p, cloud, region, raw.get(_k("gpuPools")), gpu_pools)
    storage = _parse_storage(p, raw.get(_k("storage")), traits)
    training = _parse_training(p, raw.get(_k("training")), cloud, traits)
    network = _parse_network(p, raw.get(_k("network")), cloud, traits)
    autoscaler = _parse_autoscaler(p, raw.get(_k("autoscaler")))
    if not traits.autoscaler_timings and isinstance(raw.get(_k("autoscaler")), dict):
        for name in raw[_k("autoscaler")]:
            p.add(f"{_k('autoscaler')}.{name}", f"{cloud}'s built-in autoscaler has no such setting; remove this key")
    guardrails = _parse_guardrails(p, raw.get(_k("guardrails")))

    if p.items:
        raise ConfigError(p.items)
    return PlatformSpec(
        stack=stack,
        cloud=cloud,
        region=region,
        zones=tuple(zones),
        kubernetes_version=version,
        manager_pool=manager,
        gpu_pools=tuple(gpu_pools),
        storage=storage,
        training=training,
        network=network,
        autoscaler=autoscaler,
        guardrails=guardrails,
        project=project if isinstance(project, str) else None,
    )


def _parse_zones(p: _Problems, raw: dict, cloud: str, traits: CloudTraits, region: str | None) -> list[str]:
    key = _k("zones")
    zones = _str_list(p, key, raw.get(key))
    if traits.zone_pattern is None:
        if zones:
            p.add(key, f"the {cloud} stack has no zones; remove this key")
        return ["local"]
    if not zones:
        p.add(key, f"list at least one zone of the region, e.g. [{traits.zone_example}]")
        return []
    if len(set(zones)) != len(zones):
        p.add(key, f"each zone once, got {zones}")
    if traits.max_zones and len(set(zones)) > traits.max_zones:
        p.add(key, f"at most {traits.max_zones} zones on {cloud}, got {len(set(zones))}; pick {traits.max_zones}")
    known = regions.region(cloud, region) if region else None
    if known is not None and not known.zones:
        p.add(
            key,
            f"location {region} has no availability zones, and every GPU pool lives in one zone; "
            f"pick a location with zones, e.g. eastus, westus2",
        )
    elif known is not None:
        for i, zone in enumerate(zones):
            if zone not in known.zones:
                listed = ", ".join(f'"{z}"' if cloud == "azure" else z for z in known.zones)
                where = f"location {region}" if cloud == "azure" else f"region {region}"
                p.add(f"{key}[{i}]", f"zone {_r(zone)} is not in {where}; its zones: {listed}")
    elif region or "{region}" not in traits.zone_pattern:  # Azure's zones need no region to check
        pattern = re.compile(traits.zone_pattern.replace("{region}", re.escape(region or "")))
        for i, zone in enumerate(zones):
            if not pattern.match(zone):
                where = f"region {region}" if "{region}" in traits.zone_pattern else cloud
                p.add(f"{key}[{i}]", f"zone {_r(zone)} is not in {where}; expected like {traits.zone_example}")
    return list(dict.fromkeys(zones))  # a repeated zone is reported above, not again by every pool


def _parse_min_max(
    p: _Problems, key: str, obj: dict, default_min: int, traits: CloudTraits | None = None
) -> tuple[int, int]:
    most = traits.max_nodes_per_pool if traits else None
    why = "the most nodes one node pool holds on this cloud; components/clouds/traits.py cites the quota"
    lo = _int(p, f"{key}.minNodes", obj.get("minNodes"), default_min, maximum=most, why=why)
    hi = _int(p, f"{key}.maxNodes", obj.get("maxNodes"), None, minimum=1, maximum=most, why=why)
    if hi is None and "maxNodes" not in obj:
        p.add(f"{key}.maxNodes", "required: the most nodes the autoscaler may add (>= 1)")
    if lo is not None and hi is not None and lo > hi:
        p.add(f"{key}.minNodes", f"minNodes ({lo}) must not exceed maxNodes ({hi})")
    return lo or 0, hi or 0


def _parse_manager(p: _Problems, value: Any, cloud: str) -> NodePoolSpec:
    key = _k("managerPool")
    if cloud == "local":
        obj = _obj(p, key, value, _MANAGER_KEYS)
        return NodePoolSpec(machine_type="", min_nodes=0, max_nodes=0)
    obj = _obj(p, key, value if value is not None else {"maxNodes": 3}, _MANAGER_KEYS)
    traits = CLOUD_TRAITS[cloud]
    lo, hi = _parse_min_max(p, key, {"maxNodes": 3, **obj}, default_min=1, traits=traits)
    machine = obj.get("machineType") or DEFAULT_MANAGER_MACHINE[cloud]
    rules = machines.rules(cloud)
    if not isinstance(machine, str):
        example = DEFAULT_MANAGER_MACHINE[cloud]
        p.add(f"{key}.machineType", f"expected one machine type like {example}, got {_r(machine)}")
        machine = DEFAULT_MANAGER_MACHINE[cloud]
    elif catalog.find_machine(cloud, machine):
        p.add(f"{key}.machineType", f"{machine} is a GPU machine; the manager pool is for control pods")
    elif rules and (why := rules.problem(machine)) is not None:
        p.add(f"{key}.machineType", why)
    disk = _int(p, f"{key}.diskSizeGb", obj.get("diskSizeGb"), 100, minimum=20, **_disk_max(traits))
    return NodePoolSpec(machine_type=machine, min_nodes=lo, max_nodes=hi, disk_size_gb=disk or 100)


def _disk_max(traits: CloudTraits) -> dict[str, Any]:
    why = "the largest root disk this cloud's nodes take; components/clouds/traits.py cites it"
    return {"maximum": traits.max_disk_gb, "why": why}


def _resolve_offering(p: _Problems, key: str, gpu: Any, cloud: str) -> catalog.Offering | None:
    known = catalog.load()
    if gpu is None:  # not "unknown GPU None": the key is missing (or misspelt, reported apart)
        p.add(f"{key}.gpu", f"required; {cloud} offers: {', '.join(catalog.offered_on(cloud))}")
        return None
    if not isinstance(gpu, str) or gpu.lower() not in known:
        p.add(f"{key}.gpu", f"unknown GPU {_r(gpu)}; the catalog has: {', '.join(catalog.gpu_keys())}")
        return None
    gpu = gpu.lower()
    offer = catalog.offering(gpu, cloud)
    if offer is None:
        p.add(f"{key}.gpu", f"{gpu} is not offered on {cloud}; {cloud} offers: {', '.join(catalog.offered_on(cloud))}")
        return None
    if not offer.available:
        p.add(
            f"{key}.gpu",
            f"{gpu} on {cloud} was retired on {offer.retired} ({offer.reason}); use {offer.replacement} instead",
        )
        return None
    return offer


def _parse_gpu_pools(p: _Problems, value: Any, cloud: str, traits: CloudTraits, zones: list[str]) -> list[GpuPoolSpec]:
    key = _k("gpuPools")
    if not traits.gpu_pools:
        if value:
            p.add(key, f"the {cloud} stack is CPU-only and has no GPU pools; remove this key")
        return []
    if not value:
        p.add(key, "list at least one GPU pool, e.g. [{gpu: t4, maxNodes: 4}]")
        return []
    if not isinstance(value, list):
        p.add(key, f"expected a list of pools, got {_r(value)}")
        return []
    pools: list[GpuPoolSpec] = []
    seen: dict[tuple[str, str], int] = {}
    for i, entry in enumerate(value):
        pk = f"{key}[{i}]"
        if not isinstance(entry, dict):
            p.add(pk, f"expected an object like {{gpu: t4, maxNodes: 4}}, got {_r(entry)}")
            continue
        _unknown_keys(p, pk, entry, _GPU_POOL_KEYS)
        lo, hi = _parse_min_max(p, pk, entry, default_min=0, traits=traits)
        spot = _bool(p, f"{pk}.spot", entry.get("spot"), True)
        disk = _int(p, f"{pk}.diskSizeGb", entry.get("diskSizeGb"), 200, minimum=50, **_disk_max(traits)) or 200
        pool_zones = _str_list(p, f"{pk}.zones", entry.get("zones"))
        for z in pool_zones or []:
            if z not in zones:
                p.add(f"{pk}.zones", f"{_r(z)} is not one of {_k('zones')} {zones}")
        offer = _resolve_offering(p, pk, entry.get("gpu"), cloud)
        if offer is None:
            continue
        machines = _pool_machines(p, pk, entry, offer)
        if traits.machine_types_per_pool and len(machines) > traits.machine_types_per_pool:
            hint = f"list one, e.g. [{machines[0].type}]"
            p.add(f"{pk}.machineTypes", f"a {cloud} node pool has one machine type; {hint}")
        for zone in pool_zones or zones:
            if (offer.gpu, zone) in seen:
                p.add(
                    f"{pk}.gpu",
                    f"{offer.gpu} in zone {zone} is already {key}[{seen[offer.gpu, zone]}]; "
                    "list each GPU once per zone",
                )
                continue
            seen[offer.gpu, zone] = i
            if machines:
                pools.append(GpuPoolSpec(offer.gpu, zone, machines, lo, hi, spot, disk, offer.accelerator))
    return pools


def _pool_machines(p: _Problems, key: str, entry: dict, offer: catalog.Offering) -> tuple[catalog.Machine, ...]:
    names = _str_list(p, f"{key}.machineTypes", entry.get("machineTypes"))
    if not names:
        return (offer.default_machine,)
    machines = []
    for name in names:
        m = offer.machine(name)
        if m is None:
            valid = ", ".join(x.type for x in offer.machines)
            p.add(f"{key}.machineTypes", f"{name} has no {offer.gpu} on {offer.cloud}; valid: {valid}")
        else:
            machines.append(m)
    counts = {m.gpus for m in machines}
    if len(counts) > 1:
        detail = ", ".join(f"{m.type}={m.gpus}" for m in machines)
        # The autoscaler sizes a group from one template node, and jobs request a fixed GPU count.
        p.add(f"{key}.machineTypes", f"machines in one pool must have the same GPU count, got {detail}")
    return tuple(machines)


def _parse_storage(p: _Problems, value: Any, traits: CloudTraits) -> StorageSpec:
    key = _k("storage")
    obj = _obj(p, key, value, _STORAGE_KEYS)
    protect = _bool(p, f"{key}.protect", obj.get("protect"), True)
    if not traits.storage_tiers:
        for k in ("tier", "sizeGb"):
            if k in obj:
                p.add(f"{key}.{k}", "this cloud's store grows by itself; remove this key")
        return StorageSpec(protect=protect)
    tier = obj.get("tier") or traits.default_storage_tier
    if not isinstance(tier, str) or tier not in traits.storage_tiers:
        p.add(f"{key}.tier", f"must be one of {', '.join(traits.storage_tiers)}, got {_r(tier)}")
        return StorageSpec(protect=protect)
    minimum = traits.storage_tiers[tier]
    size = _int(
        p, f"{key}.sizeGb", obj.get("sizeGb"), minimum, maximum=traits.storage_max_gb.get(tier),
        why=f"the largest {tier} store; components/clouds/traits.py cites it",
    )
    if size is not None and size < minimum:
        p.add(f"{key}.sizeGb", f"tier {tier} needs at least {minimum} GiB, got {size}")
    return StorageSpec(protect=protect, tier=tier, size_gb=size)


def _parse_training(p: _Problems, value: Any, cloud: str, traits: CloudTraits) -> TrainingSpec:
    key = _k("training")
    obj = _obj(p, key, value, _TRAINING_KEYS)
    operator = obj.get("operator", "torchelastic")
    if not isinstance(operator, str) or operator not in OPERATORS:
        p.add(f"{key}.operator", f"must be one of {', '.join(OPERATORS)}, got {_r(operator)}")
    namespace = obj.get("namespace", DEFAULT_NAMESPACE)
    longest = limits.max_namespace_length(cloud, DEFAULT_CLAIM)
    if not isinstance(namespace, str) or not _DNS_LABEL.match(namespace):
        p.add(f"{key}.namespace", f"must be a DNS label (lowercase letters, digits, '-'), got {_r(namespace)}")
    elif len(namespace) > longest:
        job = limits.store_owner_job(cloud, namespace, DEFAULT_CLAIM)
        p.add(
            f"{key}.namespace",
            f"at most {longest} characters on {cloud}, got {len(namespace)} ({_r(namespace)}): the job that hands the "
            f"shared store to the training user is named {job!r}, and a Job's name becomes its pods' job-name label "
            "(63 characters at most); shorten the namespace",
        )
    replicas = _int(
        p, f"{key}.etcdReplicas", obj.get("etcdReplicas"), traits.etcd_members, minimum=1,
        maximum=MAX_ETCD_MEMBERS, why="etcd's own advice: no more than seven members, https://etcd.io/docs/v3.5/faq/",
    )
    if replicas is not None and replicas % 2 == 0:
        p.add(f"{key}.etcdReplicas", f"etcd needs an odd member count for a quorum (1, 3, 5), got {replicas}")
    return TrainingSpec(
        operator=operator,
        namespace=namespace,
        etcd_replicas=replicas or traits.etcd_members,
        termination_grace_s=traits.spot_notice_s,
    )


def _parse_network(p: _Problems, value: Any, cloud: str, traits: CloudTraits) -> NetworkSpec:
    key = _k("network")
    obj = _obj(p, key, value, _NETWORK_KEYS)
    default = NetworkSpec()
    cidr = obj.get("cidr", default.cidr)
    try:
        if not isinstance(cidr, str):
            raise TypeError(cidr)
        net = ipaddress.IPv4Network(cidr)  # ip_network() takes ints (16 -> 0.0.0.16/32) and IPv6
    except (ValueError, TypeError):
        p.add(f"{key}.cidr", f"expected an IPv4 CIDR like 10.0.0.0/16, got {_r(cidr)}")
    else:
        cloud_limits.network_range(p, f"{key}.cidr", net, cloud, traits)
    public = _str_list(p, f"{key}.publicAccessCidrs", obj.get("publicAccessCidrs"))
    for c in public or []:
        try:
            ipaddress.ip_network(c)
        except ValueError:
            p.add(f"{key}.publicAccessCidrs", f"expected CIDRs like 203.0.113.0/24, got {_r(c)}")
    nat = obj.get("natGateways", default.nat)
    if nat not in ("single", "perZone"):
        p.add(f"{key}.natGateways", f"must be 'single' (cheaper) or 'perZone' (zone-redundant), got {_r(nat)}")
    return NetworkSpec(
        cidr=cidr,
        public_access_cidrs=tuple(public) if public is not None else default.public_access_cidrs,
        nat=nat,
    )


def _parse_autoscaler(p: _Problems, value: Any) -> AutoscalerSpec:
    key = _k("autoscaler")
    obj = _obj(p, key, value, _AUTOSCALER_KEYS)
    default = AutoscalerSpec()
    out = {}
    for name, attr in (
        ("scaleDownUnneededTime", "scale_down_unneeded_time"),
        ("scaleDownDelayAfterAdd", "scale_down_delay_after_add"),
    ):
        v = obj.get(name, getattr(default, attr))
        if not isinstance(v, str) or not _DURATION.match(v):
            p.add(f"{key}.{name}", f"expected a duration like 5m, 300s or 1h, got {_r(v)}")
        out[attr] = v
    return AutoscalerSpec(**out)


def _parse_guardrails(p: _Problems, value: Any) -> GuardrailSpec:
    key = _k("guardrails")
    obj = _obj(p, key, value, _GUARDRAIL_KEYS)
    default = GuardrailSpec()
    return GuardrailSpec(
        max_gpus=_int(p, f"{key}.maxGpus", obj.get("maxGpus"), default.max_gpus, minimum=1) or default.max_gpus,
        allow_on_demand_gpus=_bool(p, f"{key}.allowOnDemandGpus", obj.get("allowOnDemandGpus"), False),
        restrict_public_endpoint=_bool(p, f"{key}.restrictPublicEndpoint", obj.get("restrictPublicEndpoint"), False),
    )
