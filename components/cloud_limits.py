"""A stack config against each cloud's own limits (issue 12): its regions and zones, the Kubernetes
versions its managed service offers, the GPUs a region has, its network ranges, its project ids,
and the names it derives from the stack name. Each check adds "key: what is wrong; what would be
right" problems to spec.parse's list. Pure Python: the limits are data in components/catalog/,
components/clouds/traits.py and components/limits.py, each citing its source.
"""

from __future__ import annotations

import datetime
import difflib
import ipaddress
import re
from typing import TYPE_CHECKING, Any, Protocol

from components import limits
from components.catalog import gpu_zones, kubernetes, regions
from components.clouds.traits import CLOUD_TRAITS, CloudTraits

if TYPE_CHECKING:
    from components.spec.model import GpuPoolSpec


class Problems(Protocol):
    def add(self, key: str, message: str) -> None: ...


K8S_MINOR = re.compile(r"^1\.\d{2}$")  # a minor version, as the managed services take it: "1.35"
# https://cloud.google.com/resource-manager/docs/creating-managing-projects#before_you_begin:
# 6 to 30 characters, lowercase letters, digits and hyphens, starting with a letter, not ending
# with a hyphen.
GCP_PROJECT_ID = re.compile(r"^[a-z][-a-z0-9]{4,28}[a-z0-9]$")
# Private ranges a cluster network may use (RFC 1918, and RFC 6598's shared space).
PRIVATE_RANGES = tuple(
    ipaddress.IPv4Network(c) for c in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10")
)
REGION_EXAMPLE = {"aws": "us-west-2", "gcp": "us-central1", "azure": "eastus"}


def short_repr(value: Any, limit: int = 100) -> str:
    """repr() of a user's value, cut short: a problem line stays one line whatever was written."""
    try:
        text = repr(value)
    except ValueError:  # an int past Python's digit limit for str()
        return "<a number too long to print>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def gcp_project(p: Problems, project: Any) -> None:
    if project and (not isinstance(project, str) or not GCP_PROJECT_ID.match(project)):
        p.add(
            "gcp:project",
            f"{short_repr(project)} is not a project id: 6-30 lowercase letters, digits and '-', starting with a "
            "letter and not ending with '-' (the id, not the display name: `gcloud projects list` shows both)",
        )


def other_clouds_keys(p: Problems, raw: dict, cloud: str) -> None:
    """Keys of another cloud's provider (gcp:project on an AWS stack) would be ignored: say so."""
    own = set(CLOUD_TRAITS[cloud].config_namespaces)
    for key in raw:
        namespace = key.split(":", 1)[0]
        if namespace in own:
            continue
        for other, traits in CLOUD_TRAITS.items():
            if namespace in traits.config_namespaces:
                p.add(key, f"a key of {other}'s provider, but torchfleet:cloud is {cloud}: it would be ignored; "
                           "remove it")


def region(p: Problems, raw: dict, cloud: str, traits: CloudTraits) -> str | None:
    """The region (location on Azure), if it is one the catalog (catalog/regions.yaml) knows."""
    key = traits.region_key
    if key is None:
        return None
    value = raw.get(key)
    example = REGION_EXAMPLE.get(cloud, "")
    if value is None or value == "":
        p.add(key, f"required for cloud {cloud}")
        return None
    if not isinstance(value, str):
        p.add(key, f"expected one region name like {example}, got {short_repr(value)}")
        return None
    known = regions.load().get(cloud)
    if known is None or value in known.regions:
        return value
    # Azure's display names ("East US 2") are not location names ("eastus2").
    squeezed = re.sub(r"[^a-z0-9-]", "", value.lower())
    close = difflib.get_close_matches(squeezed, sorted(known.regions), n=1, cutoff=0.7)
    hint = f"did you mean {close[0]}?" if close else f"e.g. {example}"
    p.add(
        key,
        f"unknown {cloud} region {short_repr(value)}; {hint} ({len(known.regions)} regions known as of "
        f"{known.checked}: {known.source}; a newer one goes into components/catalog/regions.yaml)",
    )
    return None


def kubernetes_version(p: Problems, value: Any, cloud: str, traits: CloudTraits, default: str) -> str:
    key = "torchfleet:kubernetesVersion"
    if value is not None and value != "" and not isinstance(value, str):
        p.add(key, f'expected a minor version like "1.35" (quoted), got {short_repr(value)}')
        return default
    version = value or default
    if not K8S_MINOR.match(version):
        p.add(key, f'expected a minor version like "1.35" (quoted), got {short_repr(version)}')
        return version
    service = kubernetes.service_for(cloud)
    offered = service.minors if service else traits.kubernetes_versions
    buildable = traits.kubernetes_versions
    ended = standard_support_ended(service, traits)
    allowed = [v for v in offered if (not buildable or v in buildable) and v not in ended]
    if allowed and version not in allowed:
        if service:
            why = f"{service.name.upper()} offers {', '.join(offered)} ({service.source}, as of {service.checked})"
        else:
            why = f"{cloud} supports {', '.join(offered)}"
        if buildable and set(buildable) != set(offered):
            why += f", and the cluster autoscaler image Torchfleet pins exists for {', '.join(buildable)}"
        if version in ended:
            why += f", but standard support for {version} ended on {ended[version]}: {traits.standard_support_why}"
        elif ended:
            why += f"; standard support has ended for {', '.join(ended)}: {traits.standard_support_why}"
        p.add(key, f"{why}; use one of {', '.join(allowed)}, got {short_repr(version)}")
    return version


def standard_support_ended(service: kubernetes.Service | None, traits: CloudTraits) -> dict[str, str]:
    """The offered minors whose standard support ended before the catalog's check, with that day,
    where the cloud module's cluster can only start in standard support (traits.standard_support_until)."""
    if service is None or not traits.standard_support_until:
        return {}
    checked = datetime.date.fromisoformat(service.checked)
    return {
        v: end
        for v, end in traits.standard_support_until.items()
        if v in service.minors and datetime.date.fromisoformat(end) < checked
    }


def stack_name(p: Problems, stack: str, cloud: str, zones: tuple[str, ...]) -> None:
    """The stack name flows into cloud names (the EKS cluster, tags): refuse one that breaks them."""
    fix = "rename the stack (`pulumi stack rename`, and its file stacks/Pulumi.<stack>.yaml)"
    rule = limits.NAME_RULES["pulumi-stack"]
    if (why := rule.problem(stack)) is not None:
        p.add("stack", f"{short_repr(stack)} is not a Pulumi stack name: {why} ({rule.source}); {fix}")
        return
    for kind, name, what in limits.derived_names(cloud, stack, zones):
        rule = limits.NAME_RULES[kind]
        if (why := rule.problem(name)) is None:
            continue
        if len(name) > rule.max_len:
            advice = f"{fix} to at most {rule.max_len - (len(name) - len(stack))} characters"
        else:
            advice = f"{fix} using only {rule.allowed}"
        made = f"the stack name {short_repr(stack)} makes {what} {short_repr(name)}"
        p.add("stack", f"{made}: {why} ({rule.source}); {advice}")


def region_offers(p: Problems, cloud: str, region: str, entries: Any, pools: list[GpuPoolSpec]) -> None:
    """Where the catalog knows a region's GPUs (catalog/regions.yaml `gpus`), a pool must use one of them."""
    known = regions.region(cloud, region)
    if known is None or known.gpus is None:
        return
    reported = set()
    for pool in pools:
        if pool.gpu in known.gpus or pool.gpu in reported:
            continue
        reported.add(pool.gpu)
        index = next(
            (i for i, e in enumerate(entries) if isinstance(e, dict) and str(e.get("gpu", "")).lower() == pool.gpu), 0
        )
        elsewhere = [r.name for r in regions.load()[cloud].regions.values() if r.gpus and pool.gpu in r.gpus]
        other = f"a region that has it, e.g. {', '.join(elsewhere[:3])}" if elsewhere else "another region"
        p.add(
            f"torchfleet:gpuPools[{index}].gpu",
            f"{pool.gpu} is not offered in {region} (it offers {', '.join(known.gpus)}); pick one of those or {other}",
        )


def zone_offers(p: Problems, cloud: str, region: str, entries: Any, zones: list[str]) -> None:
    """A GPU pool's zones must offer its GPU, where catalog/gpu_zones.yaml has a list for that GPU
    (GCP review F7: a100-80gb in us-central1-b was accepted; creating the node pool fails there)."""
    known = gpu_zones.load().get(cloud)
    if known is None or not isinstance(entries, list):
        return
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            continue
        gpu = str(entry.get("gpu", "")).lower()
        offered = known.offers(gpu, region)
        explicit = entry.get("zones")
        pool_zones = [str(z) for z in explicit] if isinstance(explicit, list) and explicit else zones
        # A pool zone outside torchfleet:zones is reported by the pool parser already.
        missing = [z for z in pool_zones if offered is not None and z in zones and z not in offered]
        if not missing:
            continue
        inherited = "" if explicit else " (inherited from torchfleet:zones)"
        usable = [z for z in offered or () if z in zones]
        if usable:
            fix = f"set gpuPools[{i}].zones to {usable}"
        elif offered:
            fix = f"add one of them to torchfleet:zones and set gpuPools[{i}].zones to it"
        else:
            fix = "pick another region or GPU"
        where = f"zones of {region} that offer it: {', '.join(offered)}" if offered else f"no zone of {region} has it"
        p.add(
            f"torchfleet:gpuPools[{i}].zones",
            f"{gpu} is not offered in {', '.join(missing)}{inherited}; {where} "
            f"(components/catalog/gpu_zones.yaml, from the lists it cites of {known.date} and later); {fix}",
        )


def network_range(p: Problems, key: str, net: ipaddress.IPv4Network, cloud: str, traits: CloudTraits) -> None:
    largest, smallest = traits.network_prefix_range
    if not any(net.subnet_of(r) for r in PRIVATE_RANGES):
        p.add(key, f"{net} is not a private range; use one inside 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16, "
                   "e.g. 10.0.0.0/16")
    elif net.prefixlen < largest:
        p.add(key, f"{net} is larger than {cloud} allows (/{largest} to /{smallest}); use e.g. 10.0.0.0/16")
    elif net.prefixlen > 20:
        p.add(key, f"{net} is too small for per-zone node subnets; use /20 or larger, e.g. 10.0.0.0/16")
    elif traits.service_range_candidates:
        # The cloud module takes the first service range free of the network, then the first pod
        # range free of both (azure/naming.py cluster_ranges): refuse here what it would refuse there.
        service = first_free(traits.service_range_candidates, net)
        if service is None or first_free(traits.pod_range_candidates, net, service) is None:
            p.add(
                key,
                f"{net} overlaps every range {cloud} can give Kubernetes services and pods "
                f"({', '.join(traits.service_range_candidates + traits.pod_range_candidates)}); "
                "use a smaller range that leaves one of each free, e.g. 10.0.0.0/16",
            )


# GKE's Pod range per node: twice the max pods (64, components/clouds/gcp/network.py), a /25.
_GKE_POD_ADDRESSES_PER_NODE = 128
# "Clients with an IP address in the range 172.17.0.0/16 can't connect to Basic-tier Filestore
# instances" (https://cloud.google.com/filestore/docs/network-ip-requirements; GCP review F8).
_FILESTORE_BASIC_BLOCKED = ipaddress.IPv4Network("172.17.0.0/16")


def gcp_network_fits(p: Problems, key: str, cidr: str, tier: str | None, nodes: int) -> None:
    """The GKE address plan (gcp/network.py address_plan: Pods get the upper half of network.cidr,
    nodes its first sixteenth) must hold every node the pools can reach, and Basic Filestore must
    accept the node range as clients."""
    try:
        net = ipaddress.IPv4Network(cidr)
    except (ValueError, TypeError):
        return  # reported by network_range
    if net.prefixlen > 28:
        return
    pods = next(net.subnets(prefixlen_diff=1), None)
    capacity = pods.num_addresses // _GKE_POD_ADDRESSES_PER_NODE if pods else 0
    if nodes > capacity:
        p.add(
            key,
            f"{net} gives GKE's Pod range room for {capacity} nodes (64 pods each), but the pools reach {nodes} "
            "(the manager's maxNodes plus every GPU pool's maxNodes per zone); use a larger range, e.g. 10.0.0.0/16",
        )
    node_range = next(net.subnets(prefixlen_diff=4))
    if (tier or "").startswith("BASIC_") and node_range.overlaps(_FILESTORE_BASIC_BLOCKED):
        p.add(key, f"{net}: its node range {node_range} is in 172.17.0.0/16, whose clients Basic-tier Filestore "
                   "refuses; use another range, e.g. 10.0.0.0/16")


def first_free(candidates: tuple[str, ...], *taken: ipaddress.IPv4Network) -> ipaddress.IPv4Network | None:
    for c in candidates:
        net = ipaddress.IPv4Network(c)
        if not any(net.overlaps(t) for t in taken):
            return net
    return None
