"""Parsing the node pools: the manager pool, the optional CPU pool and the GPU pools (one GPU type in one zone each)."""

from __future__ import annotations

from typing import Any

from components import catalog
from components.catalog import host_encryption, machines
from components.clouds.traits import CLOUD_TRAITS, CloudTraits
from components.spec.fields import _bool, _int, _k, _obj, _Problems, _r, _str_list, _unknown_keys
from components.spec.model import DEFAULT_MANAGER_MACHINE, CpuPoolSpec, GpuPoolSpec, NodePoolSpec

# Allowed keys of each structured value; anything else is a typo worth reporting.
_MANAGER_KEYS = {"machineType", "minNodes", "maxNodes", "diskSizeGb", "encryptionAtHost"}
_CPU_POOL_KEYS = {"machineType", "minNodes", "maxNodes", "spot", "zones", "diskSizeGb", "encryptionAtHost"}
_GPU_POOL_KEYS = {"gpu", "maxNodes", "minNodes", "machineTypes", "spot", "zones", "diskSizeGb", "encryptionAtHost"}


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
    at_host = _encryption_at_host(p, key, obj, cloud, [machine], f"{key}.machineType", _manager_sizes_with_it())
    return NodePoolSpec(
        machine_type=machine, min_nodes=lo, max_nodes=hi, disk_size_gb=disk or 100, encryption_at_host=at_host
    )


def _parse_cpu_pool(p: _Problems, value: Any, cloud: str, zones: list[str]) -> CpuPoolSpec | None:
    """torchfleet:cpuPool: optional; where the CLI's pods without a GPU run (spec/model.py CpuPoolSpec). Scales
    from zero (minNodes 0 by default); on demand unless spot: true (a Lighthouse runs there, and a reclaim stops
    its job's quorum until the Deployment's next pod is up)."""
    key = _k("cpuPool")
    if value is None:
        return None
    if cloud == "local":
        p.add(key, "the local stack has no node pools (CPU pods run on its one node); remove this key")
        return None
    obj = _obj(p, key, value, _CPU_POOL_KEYS)
    if not isinstance(value, dict):  # said once by _obj
        return None
    traits = CLOUD_TRAITS[cloud]
    lo, hi = _parse_min_max(p, key, obj, default_min=0, traits=traits)
    example = DEFAULT_MANAGER_MACHINE[cloud]
    machine = obj.get("machineType", example)
    rules = machines.rules(cloud)
    if not isinstance(machine, str) or not machine:
        p.add(f"{key}.machineType", f"expected one machine type like {example}, got {_r(machine)}")
        machine = example
    elif catalog.find_machine(cloud, machine):
        p.add(f"{key}.machineType", f"{machine} is a GPU machine; the CPU pool is for pods without a GPU "
                                    f"(list it under {_k('gpuPools')})")
    elif rules and (why := rules.problem(machine)) is not None:
        p.add(f"{key}.machineType", why)
    spot = _bool(p, f"{key}.spot", obj.get("spot"), False)
    disk = _int(p, f"{key}.diskSizeGb", obj.get("diskSizeGb"), 100, minimum=20, **_disk_max(traits))
    pool_zones = _str_list(p, f"{key}.zones", obj.get("zones"))
    if pool_zones == []:
        p.add(f"{key}.zones", f"an empty list names no zone; leave the key out for every zone of {_k('zones')} "
                              f"{zones}, or list this pool's")
    for z in pool_zones or []:
        if z not in zones:
            p.add(f"{key}.zones", f"{_r(z)} is not one of {_k('zones')} {zones}")
    at_host = _encryption_at_host(p, key, obj, cloud, [machine], f"{key}.machineType", _manager_sizes_with_it())
    return CpuPoolSpec(machine_type=machine, zones=tuple(sorted(pool_zones or zones)), min_nodes=lo, max_nodes=hi,
                       spot=bool(spot), disk_size_gb=disk or 100, encryption_at_host=at_host)


def _manager_sizes_with_it() -> list[str]:
    rules = machines.rules("azure")
    return [m for m in rules.examples if host_encryption.supported(m)] if rules else []


def _encryption_at_host(
    p: _Problems, key: str, obj: dict, cloud: str, types: list[str], machine_key: str, alternatives: list[str]
) -> bool:
    """AKS's enableEncryptionAtHost for one pool: on by default on Azure, refused on a size the
    catalog records without it (the pool create would fail; catalog/host_encryption.yaml)."""
    if cloud != "azure":
        if "encryptionAtHost" in obj:
            p.add(f"{key}.encryptionAtHost", f"only Azure pools set encryption at host; remove this key on {cloud}")
        return False
    on = _bool(p, f"{key}.encryptionAtHost", obj.get("encryptionAtHost"), True)
    without = [t for t in types if isinstance(t, str) and host_encryption.supported(t) is False]
    if on and without:
        p.add(
            machine_key,
            f"{', '.join(without)} cannot encrypt at host (Resource SKUs EncryptionAtHostSupported False, "
            f"components/catalog/host_encryption.yaml); sizes that can: {', '.join(alternatives) or 'none recorded'}; "
            f"or set {key}.encryptionAtHost: false",
        )
    return on


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
        if pool_zones == []:
            # Issue 23 (a doubt, decided): [] silently meant every zone, where an empty
            # network.publicAccessCidrs means none; name no zone by leaving the key out.
            p.add(f"{pk}.zones", f"an empty list names no zone; leave the key out for every zone of {_k('zones')} "
                  f"{zones}, or list this pool's, e.g. [{zones[0] if zones else 'a zone'}]")
        for z in pool_zones or []:
            if z not in zones:
                p.add(f"{pk}.zones", f"{_r(z)} is not one of {_k('zones')} {zones}")
        offer = _resolve_offering(p, pk, entry.get("gpu"), cloud)
        if offer is None:
            continue
        machines = _pool_machines(p, pk, entry, offer)
        with_it = [m.type for m in offer.machines if host_encryption.supported(m.type)]
        at_host = _encryption_at_host(p, pk, entry, cloud, [m.type for m in machines], f"{pk}.machineTypes", with_it)
        _spot_only(p, pk, entry, spot, machines, offer)
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
                pools.append(GpuPoolSpec(offer.gpu, zone, machines, lo, hi, spot, disk, offer.accelerator, at_host))
    return pools


def _spot_only(
    p: _Problems, key: str, entry: dict, spot: bool, machines: tuple[catalog.Machine, ...], offer: catalog.Offering
) -> None:
    """An on-demand pool of a machine sold only as spot would be created and never get a node: every
    scale-up fails (GCP review m6: h100 with spot: false gave a3-highgpu-1g)."""
    only = [m.type for m in machines if m.spot_only]
    if spot or not only:
        return
    on_demand = [m.type for m in offer.machines if not m.spot_only]
    instead = f", or machineTypes: [{on_demand[0]}] (offered on demand)" if on_demand else ""
    where = f"{key}.spot" if "machineTypes" not in entry else f"{key}.machineTypes"
    p.add(where, f"{', '.join(only)} is offered only as spot, not on demand (components/catalog/gpus.yaml cites "
                 f"{offer.source}); set spot: true{instead}")


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
    elif offer.cloud == "aws" and len({(m.vcpus, m.memory_gib) for m in machines}) > 1:
        # One EKS node group takes every type, and the AWS cluster autoscaler plans with the first
        # type only: a pod sized for a larger one never scales the group up from zero
        # (cluster-autoscaler/cloudprovider/aws/README.md: "the instance types should have the same
        # amount of RAM and number of CPU cores"; AWS review M2). Azure and GCP make a pool per type.
        detail = ", ".join(f"{m.type}={m.vcpus} vCPU/{m.memory_gib} GiB" for m in machines)
        p.add(
            f"{key}.machineTypes",
            f"on aws the machines of one pool need the same vCPUs and memory, got {detail}; list one size, "
            "or add a second pool entry for the other",
        )
    return tuple(machines)
