"""The most a stack or a job can cost per hour, at on-demand list prices (issue 13, cost at a glance).

`torchfleet check` prints a stack's: every GPU pool at its maxNodes on its priciest machine type,
plus the manager pool at its maxNodes. `torchfleet submit`/`sweep` print a job's: its most nodes on
the priciest machine it can land on, one machine per node. List prices come from
components/catalog/prices.yaml; spot pools pay less (and never more), but spot prices move too
often to ship, so the figure is a ceiling, not a forecast. Storage, network and the managed
control plane are not counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from components import catalog
from components import spec as platform
from components.catalog import prices
from torchfleet.jobs.spec import JobRequest
from torchfleet.jobs.target import Target


@dataclass(frozen=True)
class Line:
    """One pool (or job) at its most: ``nodes`` machines of ``machine`` at ``usd`` each, None unpriced."""

    what: str
    nodes: int
    machine: str
    usd: float | None
    why_unpriced: str | None = None

    @property
    def total(self) -> float:
        return self.nodes * self.usd if self.usd is not None else 0.0

    @property
    def each(self) -> str:
        return f"{self.machine} at {usd_text(self.usd)}" if self.usd is not None else self.machine

    def render(self, width: int, each_width: int) -> str:
        price = f"{self.total:9.2f}" if self.usd is not None else f"{'-':>9}  ({self.why_unpriced})"
        return f"  {self.what:<{width}}  {self.nodes:>4} x {self.each:<{each_width}}{price}"


def usd_text(usd: float) -> str:
    """0.729998 -> 0.73, 0.0832 -> 0.0832, 55.04 -> 55.04: list prices as the vendors print them."""
    return f"{usd:.4f}".rstrip("0").rstrip(".")


@dataclass(frozen=True)
class Estimate:
    cloud: str
    lines: tuple[Line, ...]

    @property
    def total(self) -> float:
        return sum(line.total for line in self.lines)

    @property
    def unpriced(self) -> list[Line]:
        return [line for line in self.lines if line.usd is None]

    def render(self, subject: str) -> str:
        basis = prices.of(self.cloud)
        where = f"{basis.region}, priced {basis.priced}" if basis else "no list prices"
        head = f"{subject}: at most {self.total:.2f} USD/hour at on-demand list prices ({where})"
        if self.unpriced:
            head += f"; {len(self.unpriced)} line(s) without a list price not counted"
        width = max(len(line.what) for line in self.lines)
        each_width = max(len(line.each) for line in self.lines)
        return "\n".join([head, *(line.render(width, each_width) for line in self.lines)])


def _machine_line(what: str, cloud: str, nodes: int, gpu: str | None, machine_types: Sequence[str]) -> Line:
    """The priciest of the machine types (a pool may be given any of them), or the reason none is priced."""
    priced = []
    for machine in machine_types:
        usd = catalog.list_price(gpu, cloud, machine) if gpu else prices.machine_price(cloud, machine)
        priced.append((usd, machine))
    known = [(usd, machine) for usd, machine in priced if usd is not None]
    if known:
        usd, machine = max(known)
        return Line(what, nodes, machine, usd)
    table = prices.of(cloud)
    machine = machine_types[0]
    why = (table.unpriced.get(machine) if table else None) or f"no list price for {machine} in the catalog"
    return Line(what, nodes, machine, None, why)


def stack_estimate(spec: platform.PlatformSpec) -> Estimate | None:
    """Every GPU pool at maxNodes plus the manager pool at maxNodes; None for the local stack."""
    if spec.cloud not in ("aws", "gcp", "azure"):
        return None
    lines = [_machine_line(p.name, spec.cloud, p.max_nodes, p.gpu, p.machine_types) for p in spec.gpu_pools]
    manager = spec.manager_pool
    lines.append(_machine_line("manager", spec.cloud, manager.max_nodes, None, [manager.machine_type]))
    return Estimate(spec.cloud, tuple(lines))


# AKS Standard tier (azure/cluster.py sku): "$0.10 per cluster per hour"
# (https://azure.microsoft.com/pricing/details/kubernetes-service/, read 2026-11-28).
AKS_STANDARD_TIER_USD = 0.10


def idle_estimate(spec: platform.PlatformSpec) -> Estimate | None:
    """What an Azure stack costs per hour with no job running (issue 29): the fixed system pool, the manager
    pool at minNodes and the Standard tier; the share (billed per provisioned GiB and kept by destroy while
    storage.protect) and the load balancer are listed unpriced. None for the other clouds."""
    if spec.cloud != "azure":
        return None
    from components.clouds.azure import cluster as aks  # here: pulumi-azure-native, Azure only

    m = spec.manager_pool
    return Estimate("azure", (
        _machine_line("system pool", "azure", aks.SYSTEM_NODES, None, [aks.SYSTEM_VM_SIZE]),
        _machine_line("manager pool at minNodes", "azure", max(1, m.min_nodes), None, [m.machine_type]),
        Line("AKS Standard tier", 1, "cluster", AKS_STANDARD_TIER_USD),
        Line(f"{spec.storage.size_gb} GiB {spec.storage.tier} share", 1, "share", None,
             "billed per provisioned GiB-month, kept by destroy while storage.protect: "
             "azure.microsoft.com/pricing/details/storage/files"),
        Line("standard load balancer", 1, "LB", None,
             "billed per rule and GB: azure.microsoft.com/pricing/details/load-balancer"),
    ))


def job_estimate(name: str, cloud: str, gpu: str | None, max_nodes: int, machine_types: Sequence[str]) -> Line | None:
    """A GPU job at its most nodes, one machine each; None for a CPU job (it runs on the manager
    pool, which the stack's estimate counts) or where the cloud has no list prices."""
    if gpu is None or prices.of(cloud) is None or not machine_types:
        return None
    return _machine_line(name, cloud, max_nodes, gpu, machine_types)


def job_machine_types(target: Target, req: JobRequest) -> list[str]:
    """The machines a job's pods can land on: with a stack, every type of its GPU's pools (in its
    zone, if given); without one, the machine it was sized for."""
    if target.pools is None:
        return [req.sizing.machine]
    # req.zone is the node label: eastus-1 on Azure for the pool zone "1".
    pools = [p for p in target.pools if p.gpu == req.gpu
             and req.zone in (None, p.zone, f"{target.region}-{p.zone}")]
    return list(dict.fromkeys(m for p in pools for m in p.machine_types)) or [req.sizing.machine]


def for_jobs(target: Target, requests: Sequence[JobRequest]) -> Estimate | None:
    """The jobs together (a sweep's run at once), or None when none of them is a priced GPU job."""
    lines = [job_estimate(r.name, target.cloud, r.gpu, r.max_nodes, job_machine_types(target, r)) for r in requests]
    priced = tuple(line for line in lines if line is not None)
    return Estimate(target.cloud, priced) if priced else None
