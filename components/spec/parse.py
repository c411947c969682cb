"""`parse(raw)`: a stack's config to a PlatformSpec, or ConfigError listing every problem at once."""

from __future__ import annotations

import difflib
from typing import Any

from components import cloud_limits
from components.clouds.traits import CLOUD_TRAITS
from components.spec.access import aws_credentials, parse_access
from components.spec.datasets import parse_datasets
from components.spec.fields import _k, _Problems, _r
from components.spec.model import DEFAULT_KUBERNETES_VERSION, NS, ConfigError, PlatformSpec
from components.spec.pools import _parse_cpu_pool, _parse_gpu_pools, _parse_manager
from components.spec.sections import (
    _parse_autoscaler,
    _parse_guardrails,
    _parse_network,
    _parse_storage,
    _parse_training,
    _parse_zones,
)

# Allowed keys of each structured value; anything else is a typo worth reporting.
_TOP_KEYS = {
    "cloud",
    "zones",
    "kubernetesVersion",
    "managerPool",
    "cpuPool",
    "gpuPools",
    "storage",
    "training",
    "network",
    "autoscaler",
    "guardrails",
    "admins",
    "researchers",
    "deployerPrincipalType",
    "kubeLogin",
    "datasets",
    "kubernetesSupport",
}


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
    cpu_pool = _parse_cpu_pool(p, raw.get(_k("cpuPool")), cloud, zones)
    if region and gpu_pools:
        cloud_limits.region_offers(p, cloud, region, raw.get(_k("gpuPools")), gpu_pools)
        cloud_limits.zone_offers(p, cloud, region, raw.get(_k("gpuPools")), zones)
    storage = _parse_storage(p, raw.get(_k("storage")), traits, cloud, region)
    training = _parse_training(p, raw.get(_k("training")), cloud, traits)
    network = _parse_network(p, raw.get(_k("network")), cloud, traits, tuple(zones))
    support = _parse_support(p, raw.get(_k("kubernetesSupport")), cloud, traits)
    autoscaler = _parse_autoscaler(p, raw.get(_k("autoscaler")), cloud)
    if not traits.autoscaler_timings and isinstance(raw.get(_k("autoscaler")), dict):
        for name in raw[_k("autoscaler")]:
            p.add(f"{_k('autoscaler')}.{name}", f"{cloud}'s built-in autoscaler has no such setting; remove this key")
    guardrails = _parse_guardrails(p, raw.get(_k("guardrails")))
    judged = (f"{_k('training')}.etcdReplicas", _k("managerPool"))  # each already wrong: said once
    if (cloud != "local" and manager.max_nodes and training.etcd_replicas > manager.max_nodes
            and not any(item.startswith(judged) for item in p.items)):
        # etcd runs one member per node (required anti-affinity, k8s/base/etcd/statefulset.yaml) on the
        # manager pool: the members beyond maxNodes stay Pending and `pulumi up` fails waiting for them.
        p.add(
            f"{_k('training')}.etcdReplicas",
            f"{training.etcd_replicas} etcd members need as many manager nodes (one member a node), but "
            f"managerPool.maxNodes is {manager.max_nodes}: raise managerPool.maxNodes to at least "
            f"{training.etcd_replicas} or lower etcdReplicas",
        )
    if cloud == "gcp":
        nodes = manager.max_nodes + sum(pool.max_nodes for pool in gpu_pools) if manager else 0
        nodes += cpu_pool.max_nodes if cpu_pool else 0
        cloud_limits.gcp_network_fits(p, f"{_k('network')}.cidr", network.cidr, storage.tier, nodes)
    access = parse_access(p, raw, cloud)
    aws_profile, aws_role_arn = aws_credentials(p, raw) if cloud == "aws" else (None, None)
    datasets = parse_datasets(p, raw.get(_k("datasets")), cloud)
    if storage.adopt and cloud == "local":
        p.add(f"{_k('storage')}.adopt", "the local stack keeps nothing on destroy; remove this key")

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
        cpu_pool=cpu_pool,
        storage=storage,
        training=training,
        network=network,
        autoscaler=autoscaler,
        guardrails=guardrails,
        project=project if isinstance(project, str) else None,
        access=access,
        aws_profile=aws_profile,
        aws_role_arn=aws_role_arn,
        datasets=datasets,
        kubernetes_support=support,
    )


def _parse_support(p: _Problems, value: Any, cloud: str, traits) -> str:
    """torchfleet:kubernetesSupport: EKS's upgrade policy, STANDARD unless the stack says EXTENDED."""
    key = _k("kubernetesSupport")
    if value is None:
        return "STANDARD"
    if not traits.support_types:
        p.add(key, f"an EKS setting; {cloud} has no such key: remove it")
        return "STANDARD"
    if value not in traits.support_types:
        p.add(key, f"must be one of {', '.join(traits.support_types)} (STANDARD: EKS upgrades the minor when its "
                   f"standard support ends; EXTENDED: it stays, billed at the extended-support rate), got {_r(value)}")
        return "STANDARD"
    return value
