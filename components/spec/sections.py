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
    OPERATORS,
    AutoscalerSpec,
    GuardrailSpec,
    NetworkSpec,
    StorageSpec,
    TrainingSpec,
)
from components.spec.namespaces import reserved_namespace

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
# Allowed keys of each structured value; anything else is a typo worth reporting.
_STORAGE_KEYS = {"protect", "tier", "sizeGb", "adopt"}
_TRAINING_KEYS = {"operator", "namespace", "etcdReplicas"}
_NETWORK_KEYS = {"cidr", "publicAccessCidrs", "natGateways", "dnsEndpoint"}
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


def _parse_storage(p: _Problems, value: Any, traits: CloudTraits) -> StorageSpec:
    key = _k("storage")
    obj = _obj(p, key, value, _STORAGE_KEYS)
    protect = _bool(p, f"{key}.protect", obj.get("protect"), True)
    adopt = _bool(p, f"{key}.adopt", obj.get("adopt"), False)
    if not traits.storage_tiers:
        for k in ("tier", "sizeGb"):
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
    return StorageSpec(protect=protect, tier=tier, size_gb=size, adopt=adopt)


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
    most = traits.max_public_access_cidrs
    if public and most is not None and len(public) > most:
        p.add(
            f"{key}.publicAccessCidrs",
            f"at most {most} CIDRs on {cloud} (the API endpoint's allow-list; components/clouds/traits.py cites "
            f"the limit), got {len(public)}: merge neighbouring ranges into wider ones",
        )
    nat = obj.get("natGateways", default.nat)
    if nat not in ("single", "perZone"):
        p.add(f"{key}.natGateways", f"must be 'single' (cheaper) or 'perZone' (zone-redundant), got {_r(nat)}")
    return NetworkSpec(
        cidr=cidr,
        public_access_cidrs=tuple(public) if public is not None else default.public_access_cidrs,
        nat=nat,
        dns_endpoint=_parse_dns_endpoint(p, f"{key}.dnsEndpoint", obj, cloud, traits),
    )


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
