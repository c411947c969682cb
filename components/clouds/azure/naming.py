"""Names and address ranges Azure derives from the spec: pure functions, tested without mocks.

AKS agent pool names are the odd ones out: lowercase letters and digits only, starting with a
letter, at most 12 characters for Linux pools
(https://learn.microsoft.com/azure/aks/create-node-pools#limitations). So the contract name
`gpu-<gpu>-<zone>` (GpuPoolSpec.name) cannot be the pool name. The mapping is:

    GpuPoolSpec gpu-t4-1        -> agent pool t4z1         (the catalog's default machine type of the GPU)
    GpuPoolSpec gpu-a100-80gb-2 -> agent pool a10080gbz2
    any other machine type       -> agent pool t4z1 + 4 hex digits of sha256("<gpu>/<zone>/<vm size>"),
                                    the prefix cut to 8 characters (zone 1, the second A100 80GB type: a10080gbc427)

An AKS scale-set pool has exactly one VM size, so a GpuPoolSpec listing several machine types
becomes one agent pool per machine type, all with the same labels; the contract name stays on
every one of them as the `torchfleet-pool-name` tag (Azure tag names cannot hold the label's '/').
A pool's name depends on its VM size only, never on its place in `machineTypes`: the name is a path
parameter and `vmSize` is force-new, so a name tied to the position (it was `t4z1m1` for the second
type) replaced pools whenever the list was reordered or its first entry removed, deleting the old one
first with its running spot nodes. Reordering now changes nothing; a type added or removed creates or
deletes its own pool only. Stacks made before keep `<gpu>z<zone>` for the default type; a pool of another
type that was named `...m<i>` is created under its new name and the old one deleted after (one time;
docs/day-2-azure.md).
The autoscaler does not balance pools across zones (cluster.py autoscaler_profile: a job keeps its
pods in one zone), and it turns scale-set tags into template labels anyway (azure_template.go).
"""

from __future__ import annotations

import hashlib
import ipaddress
import re

from components import catalog
from components.cloud_limits import first_free  # the same pick spec.parse checks a network.cidr with
from components.clouds.traits import CLOUD_TRAITS
from components.spec import GpuPoolSpec

POOL_NAME_RE = re.compile(r"^[a-z][a-z0-9]{0,11}$")
POOL_HASH_CHARS = 4
MANAGER_AGENT_POOL = "manager"
# Azure tag names cannot contain '/' (nor <, >, %, &, \, ?), so tags use dashes.
# https://learn.microsoft.com/azure/azure-resource-manager/management/tag-resources#limitations
TAG_STACK = "torchfleet-stack"
TAG_POOL_NAME = "torchfleet-pool-name"


def tags(stack: str, **extra: str) -> dict[str, str]:
    """Tags for every Azure resource of the stack."""
    return {TAG_STACK: stack, **extra}


def agent_pool_name(pool: GpuPoolSpec, machine_index: int = 0) -> str:
    """The AKS agent pool name for one machine type of a GPU pool (see the module docstring): a function of
    the GPU, the zone and the VM size, never of the type's index in `machineTypes`."""
    vm_size = pool.machines[machine_index].type
    base = re.sub(r"[^a-z0-9]", "", pool.gpu.lower())
    name = f"{base}z{pool.zone}"
    offer = catalog.offering(pool.gpu, "azure")
    if offer is None or vm_size != offer.default_machine.type:
        digest = hashlib.sha256(f"{pool.gpu}/{pool.zone}/{vm_size}".encode()).hexdigest()[:POOL_HASH_CHARS]
        name = name[: 12 - POOL_HASH_CHARS] + digest
    if not POOL_NAME_RE.match(name):
        # Only reachable if the catalog grows a GPU key too long for AKS: fail at synth, loudly.
        raise ValueError(f"AKS agent pool name {name!r} for {pool.name} is not 1-12 lowercase letters/digits")
    return name


def storage_account_name(subscription_id: str, stack: str, name: str) -> str:
    """A storage account name: 3-24 lowercase letters and digits, unique across all of Azure.

    Deterministic (so `pulumi up` is idempotent) but salted with the subscription, so two teams
    using the same stack name do not collide on the global namespace.
    """
    prefix = "tf" + re.sub(r"[^a-z0-9]", "", stack.lower())[:12]
    digest = hashlib.sha256(f"{subscription_id}/{stack}/{name}".encode()).hexdigest()
    return (prefix + digest)[:24]


def store_resource_group(stack: str) -> str:
    """The kept store's resource group: one fixed name per stack (at most 90 characters: letters,
    digits, - _ . ( ), not ending with '.'), so a `pulumi up` after a destroy that kept the store
    finds it (storage.adopt) instead of creating an empty twin next to it."""
    name = f"torchfleet-{stack}-store"
    if len(name) > 90:
        digest = hashlib.sha256(stack.encode()).hexdigest()[:8]
        name = f"torchfleet-{stack[:62].rstrip('.')}-{digest}-store"
    return name


def dns_prefix(stack: str) -> str:
    """The cluster's DNS prefix: letters, digits and '-', starting with a letter, <= 54 chars."""
    cleaned = re.sub(r"[^a-z0-9-]", "-", stack.lower()).strip("-")
    return f"tf-{cleaned}"[:54].rstrip("-")


def node_subnet_cidr(vnet_cidr: str) -> str:
    """The first half of the virtual network: nodes only (pods use the overlay range)."""
    net = ipaddress.ip_network(vnet_cidr)
    return str(next(net.subnets(prefixlen_diff=1)))


def endpoint_subnet_cidr(vnet_cidr: str) -> str:
    """A /24 (or smaller) at the start of the second half: the file share's private endpoint."""
    net = ipaddress.ip_network(vnet_cidr)
    second = list(net.subnets(prefixlen_diff=1))[1]
    return str(next(second.subnets(new_prefix=max(24, second.prefixlen))))


def apiserver_subnet_cidr(vnet_cidr: str) -> str:
    """The last /28 of the virtual network: the API server's delegated subnet (API Server VNet Integration).

    A /28 is the smallest AKS takes ("The minimum supported API server subnet size is a /28":
    aks-docs api-server-vnet-integration.md). At the end of the second half it overlaps neither the node
    half nor the endpoint /24 at the start (spec.parse accepts /20 or larger, so the half holds both), and
    the subnets of existing stacks keep their ranges.
    """
    net = ipaddress.ip_network(vnet_cidr)
    return str(list(net.subnets(new_prefix=28))[-1])


# Candidates for the service and pod (overlay) ranges; the first that does not overlap the
# virtual network wins. AKS's own default service CIDR 10.0.0.0/16 overlaps the default
# `network.cidr` 10.0.0.0/16, and overlapping ranges are rejected by the API
# (https://learn.microsoft.com/azure/aks/azure-cni-overlay#ip-address-planning).
# The candidates are data in clouds/traits.py, so spec.parse refuses a network.cidr that leaves
# no room before anything is created.
_SERVICE_CANDIDATES = CLOUD_TRAITS["azure"].service_range_candidates
_POD_CANDIDATES = CLOUD_TRAITS["azure"].pod_range_candidates


def cluster_ranges(vnet_cidr: str) -> dict[str, str]:
    """service_cidr, dns_service_ip and pod_cidr that overlap neither the vnet nor each other."""
    vnet = ipaddress.ip_network(vnet_cidr)
    service = first_free(_SERVICE_CANDIDATES, vnet)
    pods = first_free(_POD_CANDIDATES, vnet, service)
    if service is None or pods is None:
        raise ValueError(
            f"network.cidr {vnet_cidr} leaves no room for AKS service and pod ranges; use e.g. 10.0.0.0/16"
        )
    return {
        "service_cidr": str(service),
        # The tenth address, as AKS's own default (10.0.0.10) does.
        "dns_service_ip": str(service.network_address + 10),
        "pod_cidr": str(pods),
    }


def taint(taint: dict[str, str]) -> str:
    """A taint as AKS's nodeTaints take it: key=value:Effect."""
    return f"{taint['key']}={taint['value']}:{taint['effect']}"


def hashed_pool_name(prefix: str, settings: dict) -> str:
    """PREFIX + 8 hex digits of the settings AKS cannot change: 11 characters, inside AKS's 12 (POOL_NAME_RE),
    so a change of any of them is a new pool by name (manager_pool.py, cpu_pool.py)."""
    text = "|".join(f"{k}={settings[k]}" for k in sorted(settings))
    return prefix + hashlib.sha256(text.encode()).hexdigest()[:8]


def is_hashed_pool_name(prefix: str, name: str | None) -> bool:
    """Whether an agent pool name is one hashed_pool_name(PREFIX, ...) makes (torchfleet/preview/plans.py asks)."""
    return bool(name) and re.fullmatch(rf"{prefix}[0-9a-f]{{8}}", name) is not None
