"""Parsing the other sections of a stack config: zones, storage, training, network, autoscaler, guardrails."""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from components import cloud_limits, limits
from components.catalog import regions
from components.clouds.traits import MAX_ETCD_MEMBERS, CloudTraits
from components.spec.durations import duration_problem
from components.spec.fields import _bool, _int, _k, _obj, _Problems, _r, _str_list
from components.spec.model import (
    DEFAULT_CLAIM,
    DEFAULT_NAMESPACE,
    NODE_HEALER_IMAGE,
    NODE_HEALER_MAX_THRESHOLD_S,
    NODE_HEALER_THRESHOLD_S,
    OPERATORS,
    QUOTA_CONFIGMAPS,
    QUOTA_CPUS,
    QUOTA_DEFAULT_CPU_MILLIS,
    QUOTA_DEFAULT_MEMORY_MIB,
    QUOTA_DEPLOYMENTS,
    QUOTA_JOBS,
    QUOTA_MEMORY_GIB,
    QUOTA_MIN_CONFIGMAPS,
    QUOTA_MIN_CPU_MILLIS,
    QUOTA_MIN_DEPLOYMENTS,
    QUOTA_MIN_JOBS,
    QUOTA_MIN_MEMORY_MIB,
    QUOTA_MIN_NETWORK_POLICIES,
    QUOTA_MIN_SERVICES,
    QUOTA_MIN_STORED_PODS,
    QUOTA_NETWORK_POLICIES,
    QUOTA_PODS,
    QUOTA_SERVICES,
    QUOTA_STORED_PODS,
    AutoscalerSpec,
    GuardrailSpec,
    NetworkSpec,
    NodeHealerSpec,
    QuotaSpec,
    StorageSpec,
    TrainingSpec,
)
from components.spec.namespaces import reserved_namespace

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
# Allowed keys of each structured value; anything else is a typo worth reporting.
_STORAGE_KEYS = {"protect", "tier", "sizeGb", "adopt", "zone"}
_TRAINING_KEYS = {"operator", "namespace", "etcdReplicas", "nodeHealer", "quota"}
_NODE_HEALER_KEYS = {"enabled", "image", "notReadySeconds"}
# training.quota's object counts: key, QuotaSpec field, default, least (components/spec/model.py says why each).
_QUOTA_COUNTS = (
    ("jobs", "jobs", QUOTA_JOBS, QUOTA_MIN_JOBS),
    ("services", "services", QUOTA_SERVICES, QUOTA_MIN_SERVICES),
    ("configMaps", "config_maps", QUOTA_CONFIGMAPS, QUOTA_MIN_CONFIGMAPS),
    ("deployments", "deployments", QUOTA_DEPLOYMENTS, QUOTA_MIN_DEPLOYMENTS),
    ("networkPolicies", "network_policies", QUOTA_NETWORK_POLICIES, QUOTA_MIN_NETWORK_POLICIES),
    ("storedPods", "stored_pods", QUOTA_STORED_PODS, QUOTA_MIN_STORED_PODS),
)
_QUOTA_KEYS = {"enabled", "cpus", "memoryGiB", "gpus", "pods", "defaultCpuMillis", "defaultMemoryMiB",
               *(k for k, *_ in _QUOTA_COUNTS)}
# An image reference with a tag or digest and nothing a shell or YAML would split on; the full
# grammar is torchfleet/jobs/image_ref.py's (the CLI's), this only refuses what is clearly wrong.
_PINNED_IMAGE = re.compile(r"^[a-z0-9][a-z0-9._/:-]*[a-z0-9](:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}|@sha256:[a-f0-9]{64})$")
_NETWORK_KEYS = {
    "cidr", "publicAccessCidrs", "natGateways", "dnsEndpoint", "privateOnly", "privateAccessCidrs", "clusterZones",
}
_AUTOSCALER_KEYS = {"scaleDownUnneededTime", "scaleDownDelayAfterAdd"}
_GUARDRAIL_KEYS = {"maxGpus", "allowOnDemandGpus", "restrictPublicEndpoint"}


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
    if len(set(zones)) < traits.min_zones:
        p.add(key, f"at least {traits.min_zones} zones on {cloud}, got {len(set(zones))}: the control plane needs "
                   f"subnets in {traits.min_zones} zones (components/clouds/traits.py cites it); add another zone "
                   "of the region")
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


def _parse_storage(
    p: _Problems, value: Any, traits: CloudTraits, cloud: str = "", region: str | None = None
) -> StorageSpec:
    key = _k("storage")
    obj = _obj(p, key, value, _STORAGE_KEYS)
    protect = _bool(p, f"{key}.protect", obj.get("protect"), True)
    adopt = _bool(p, f"{key}.adopt", obj.get("adopt"), False)
    if not traits.storage_tiers:
        for k in ("tier", "sizeGb", "zone"):
            if k in obj:
                p.add(f"{key}.{k}", "this cloud's store grows by itself; remove this key")
        return StorageSpec(protect=protect, adopt=adopt)
    tier = obj.get("tier") or traits.default_storage_tier
    if not isinstance(tier, str) or tier not in traits.storage_tiers:
        p.add(f"{key}.tier", f"must be one of {', '.join(traits.storage_tiers)}, got {_r(tier)}")
        return StorageSpec(protect=protect, adopt=adopt)
    minimum = traits.storage_tiers[tier]
    size = _int(
        p, f"{key}.sizeGb", obj.get("sizeGb"), minimum, maximum=traits.storage_max_gb.get(tier),
        why=f"the largest {tier} store; components/clouds/traits.py cites it",
    )
    if size is not None and size < minimum:
        p.add(f"{key}.sizeGb", f"tier {tier} needs at least {minimum} GiB, got {size}")
    zone = _storage_zone(p, f"{key}.zone", obj, tier, traits, cloud, region)
    return StorageSpec(protect=protect, tier=tier, size_gb=size, adopt=adopt, zone=zone)


def _storage_zone(
    p: _Problems, key: str, obj: dict, tier: str, traits: CloudTraits, cloud: str, region: str | None
) -> str | None:
    """storage.zone: the zone of a zonal store. Any zone of the region: it need not stay in
    torchfleet:zones (nodes in the region's other zones mount it), and dropping it from there must not
    move the checkpoints (GCP review B1)."""
    if "zone" not in obj:
        return None
    zone = obj["zone"]
    if tier not in traits.zonal_storage_tiers:
        p.add(key, f"a {tier} store spans the region, it has no zone; remove this key")
        return None
    known = regions.region(cloud, region) if region else None
    if known is not None and known.zones:
        if zone not in known.zones:
            p.add(key, f"zone {_r(zone)} is not in region {region}; its zones: {', '.join(known.zones)}")
            return None
    elif not isinstance(zone, str) or traits.zone_pattern is None or not re.match(
        traits.zone_pattern.replace("{region}", re.escape(region or "")), zone
    ):
        p.add(key, f"zone {_r(zone)} is not in region {region}; expected like {traits.zone_example}")
        return None
    return zone


def _parse_training(p: _Problems, value: Any, cloud: str, traits: CloudTraits) -> TrainingSpec:
    key = _k("training")
    obj = _obj(p, key, value, _TRAINING_KEYS)
    operator = obj.get("operator", OPERATORS[0])
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
    elif (why := reserved_namespace(namespace)) is not None:
        p.add(f"{key}.namespace", f"{why}; the layer would declare it and put a default-deny policy in it: "
              f"give a namespace of the training jobs' own, e.g. {DEFAULT_NAMESPACE}")
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
        node_healer=_parse_node_healer(p, f"{key}.nodeHealer", obj.get("nodeHealer")),
        quota=_parse_quota(p, f"{key}.quota", obj.get("quota")),
    )


def _parse_quota(p: _Problems, key: str, value: Any) -> QuotaSpec:
    """The training namespace's ResourceQuota and LimitRange (components/kube/compute_quota.py)."""
    obj = _obj(p, key, value, _QUOTA_KEYS)
    enabled = _bool(p, f"{key}.enabled", obj.get("enabled"), True)
    cpus = _int(p, f"{key}.cpus", obj.get("cpus"), QUOTA_CPUS, minimum=1)
    memory = _int(p, f"{key}.memoryGiB", obj.get("memoryGiB"), QUOTA_MEMORY_GIB, minimum=1)
    gpus = _int(p, f"{key}.gpus", obj.get("gpus"), None, minimum=0)
    # Two at least: one training pod and the reader pod of `torchfleet cp`.
    pods = _int(p, f"{key}.pods", obj.get("pods"), QUOTA_PODS, minimum=2)
    # At least the LimitRange's min (the API server refuses a LimitRange whose defaultRequest is below it).
    cpu_default = _int(p, f"{key}.defaultCpuMillis", obj.get("defaultCpuMillis"), QUOTA_DEFAULT_CPU_MILLIS,
                       minimum=QUOTA_MIN_CPU_MILLIS)
    memory_default = _int(p, f"{key}.defaultMemoryMiB", obj.get("defaultMemoryMiB"), QUOTA_DEFAULT_MEMORY_MIB,
                          minimum=QUOTA_MIN_MEMORY_MIB)
    # The least of each count lets the platform's own objects, one job and the reader exist (model.py).
    counts = {}
    for name, field, default, least in _QUOTA_COUNTS:
        count = _int(p, f"{key}.{name}", obj.get(name), default, minimum=least)
        counts[field] = count if isinstance(count, int) and count >= least else default
    # Fewer pods stored than running would make `pods` a cap no one reaches (count/pods counts running ones too).
    stored = counts["stored_pods"]
    if isinstance(pods, int) and pods >= 2 and stored < pods:
        p.add(f"{key}.storedPods", f"must be at least {key}.pods ({pods}): it counts every pod, running and "
              f"finished, got {stored}")
    # A default above the cap would refuse every container that asks for nothing.
    if isinstance(cpus, int) and isinstance(cpu_default, int) and cpus >= 1 and cpu_default > cpus * 1000:
        p.add(f"{key}.defaultCpuMillis", f"must not exceed the namespace's cap ({key}.cpus: {cpus} CPUs = "
              f"{cpus * 1000} millicores), got {cpu_default}")
    if isinstance(memory, int) and isinstance(memory_default, int) and memory >= 1 and memory_default > memory * 1024:
        p.add(f"{key}.defaultMemoryMiB", f"must not exceed the namespace's cap ({key}.memoryGiB: {memory} GiB = "
              f"{memory * 1024} MiB), got {memory_default}")
    return QuotaSpec(
        enabled=enabled,
        cpus=cpus if isinstance(cpus, int) and cpus >= 1 else QUOTA_CPUS,
        memory_gib=memory if isinstance(memory, int) and memory >= 1 else QUOTA_MEMORY_GIB,
        gpus=gpus if isinstance(gpus, int) and gpus >= 0 else None,
        pods=pods if isinstance(pods, int) and pods >= 2 else QUOTA_PODS,
        default_cpu_millis=(cpu_default if isinstance(cpu_default, int) and cpu_default >= QUOTA_MIN_CPU_MILLIS
                            else QUOTA_DEFAULT_CPU_MILLIS),
        default_memory_mib=(memory_default if isinstance(memory_default, int) and memory_default >= QUOTA_MIN_MEMORY_MIB
                            else QUOTA_DEFAULT_MEMORY_MIB),
        **counts,
    )


def _parse_node_healer(p: _Problems, key: str, value: Any) -> NodeHealerSpec:
    """The node healer (components/kube/node_healer.py): on by default, its image and threshold."""
    obj = _obj(p, key, value, _NODE_HEALER_KEYS)
    enabled = _bool(p, f"{key}.enabled", obj.get("enabled"), True)
    image = obj.get("image", NODE_HEALER_IMAGE)
    if not isinstance(image, str) or not _PINNED_IMAGE.match(image) or image.endswith(":latest"):
        p.add(f"{key}.image", "expected an image reference pinned to a tag or sha256 digest (not latest), e.g. "
              f"{NODE_HEALER_IMAGE} (the training image, which holds elastic_trainer.node_healer), got {_r(image)}")
    seconds = _int(
        p, f"{key}.notReadySeconds", obj.get("notReadySeconds"), NODE_HEALER_THRESHOLD_S, minimum=0,
        maximum=NODE_HEALER_MAX_THRESHOLD_S, why="past an hour a silent node's index has waited longer than any "
        "restart is worth; disable the healer instead (enabled: false)",
    )
    return NodeHealerSpec(
        enabled=enabled,
        image=image if isinstance(image, str) else NODE_HEALER_IMAGE,
        not_ready_seconds=NODE_HEALER_THRESHOLD_S if seconds is None else seconds,
    )


def _parse_network(
    p: _Problems, value: Any, cloud: str, traits: CloudTraits, zones: tuple[str, ...] = ()
) -> NetworkSpec:
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
    most = traits.max_public_access_cidrs
    if public and most is not None and len(public) > most:
        p.add(
            f"{key}.publicAccessCidrs",
            f"at most {most} CIDRs on {cloud} (the API endpoint's allow-list; components/clouds/traits.py cites "
            f"the limit), got {len(public)}: merge neighbouring ranges into wider ones",
        )
    private_only = _bool(p, f"{key}.privateOnly", obj.get("privateOnly"), False)
    _public_or_private(p, key, public, private_only, cloud, traits)
    private_cidrs, cluster_zones = _eks_network(p, key, obj, private_only, cloud, traits, zones)
    nat = obj.get("natGateways", default.nat)
    if nat not in ("single", "perZone"):
        p.add(f"{key}.natGateways", f"must be 'single' (cheaper) or 'perZone' (zone-redundant), got {_r(nat)}")
    return NetworkSpec(
        cidr=cidr,
        public_access_cidrs=tuple(public) if public is not None else default.public_access_cidrs,
        private_only=private_only,
        private_access_cidrs=private_cidrs,
        cluster_zones=cluster_zones,
        nat=nat,
        dns_endpoint=_parse_dns_endpoint(p, f"{key}.dnsEndpoint", obj, cloud, traits),
    )


def _public_or_private(p: _Problems, key: str, public: list | None, private_only: bool, cloud: str,
                       traits: CloudTraits) -> None:
    """Who reaches the API server is said, not defaulted, where a private cluster is unreachable from the
    `pulumi up` that creates it (traits.public_access_required; issue 29)."""
    if private_only and public:
        p.add(f"{key}.privateOnly", f"true means no public API endpoint, but {key}.publicAccessCidrs lists "
                                    f"{len(public)} CIDR(s): remove one of the two keys")
    elif traits.public_access_required and not private_only and not public:
        p.add(
            f"{key}.publicAccessCidrs",
            f"required on {cloud}: list the CIDRs that may reach the Kubernetes API (the machines that run "
            "`pulumi up`, CI and researchers, e.g. [\"203.0.113.7/32\"]; your address: `curl -s https://ifconfig.me`), "
            f"or set {key}.privateOnly: true and run `pulumi up` from a bastion or a network peered with the "
            f"cluster's ({_PRIVATE_PATH.get(cloud, 'docs/deploy-azure.md')})",
        )


# Where each cloud's private path (network.privateOnly) is described.
_PRIVATE_PATH = {"aws": "list that network in network.privateAccessCidrs; docs/day-2-aws.md"}


def _eks_network(
    p: _Problems, key: str, obj: dict, private_only: bool, cloud: str, traits: CloudTraits, zones: tuple[str, ...]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """network.privateAccessCidrs and network.clusterZones (AWS: clouds/aws/cluster.py and live.py)."""
    if not traits.eks_network_keys:
        for k in ("privateAccessCidrs", "clusterZones"):
            if k in obj:
                p.add(f"{key}.{k}", f"an EKS setting; {cloud} has no such key: remove it")
        return (), ()
    cidrs = _str_list(p, f"{key}.privateAccessCidrs", obj.get("privateAccessCidrs")) or []
    for i, c in enumerate(cidrs):
        try:
            net = ipaddress.IPv4Network(c)
        except ValueError:
            p.add(f"{key}.privateAccessCidrs[{i}]", f"expected an IPv4 CIDR like 10.8.0.0/16, got {_r(c)}")
            continue
        if net.prefixlen == 0:
            p.add(f"{key}.privateAccessCidrs[{i}]", "0.0.0.0/0 opens the API to every address routed into the VPC; "
                                                    "list the VPN or peered network, e.g. 10.8.0.0/16")
    if private_only and not cidrs:
        p.add(f"{key}.privateAccessCidrs", f"required with {key}.privateOnly: the networks `pulumi up` runs from "
                                           "(VPN, peered VPC, bastion), e.g. [10.8.0.0/16]; EKS's cluster security "
                                           "group admits nothing else on 443")
    chosen = _str_list(p, f"{key}.clusterZones", obj.get("clusterZones")) or []
    for i, z in enumerate(chosen):
        if z not in zones:
            p.add(f"{key}.clusterZones[{i}]", f"zone {_r(z)} is not in torchfleet:zones {list(zones)}: the control "
                                              "plane's zones stay in the stack's zones")
    if chosen and len(set(chosen)) < traits.min_zones:
        p.add(f"{key}.clusterZones", f"at least {traits.min_zones} zones (the same EKS rule as torchfleet:zones), "
                                     f"got {chosen}")
    return tuple(cidrs), tuple(dict.fromkeys(chosen))


def _parse_dns_endpoint(p: _Problems, key: str, obj: dict, cloud: str, traits: CloudTraits) -> bool:
    """GKE's IAM-gated DNS control-plane endpoint: on by default where the cloud has one."""
    if not traits.dns_endpoint:
        if "dnsEndpoint" in obj:
            p.add(key, f"{cloud} has no DNS-based control-plane endpoint (GKE only); remove this key and reach "
                       "the API through network.publicAccessCidrs or from inside the network")
        return False
    return _bool(p, key, obj.get("dnsEndpoint"), True)


def _parse_autoscaler(p: _Problems, value: Any, cloud: str) -> AutoscalerSpec:
    key = _k("autoscaler")
    obj = _obj(p, key, value, _AUTOSCALER_KEYS)
    default = AutoscalerSpec()
    out = {}
    for name, attr in (
        ("scaleDownUnneededTime", "scale_down_unneeded_time"),
        ("scaleDownDelayAfterAdd", "scale_down_delay_after_add"),
    ):
        v = obj.get(name, getattr(default, attr))
        if (why := duration_problem(v, cloud)) is not None:
            p.add(f"{key}.{name}", why)
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
