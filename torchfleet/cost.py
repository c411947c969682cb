"""The most a stack or a job can cost per hour, at on-demand list prices (issue 13, cost at a glance).

`torchfleet check` prints a stack's: every GPU pool at its maxNodes on its priciest machine type,
plus the manager pool at its maxNodes. `torchfleet submit`/`sweep` print a job's: its most nodes on
the priciest machine it can land on, one machine per node. A job whose pools are all spot is priced
at the spot price of the stack's region, any other at that region's on-demand price, where
components/catalog/spot_prices.yaml has a dated row for the machine there (issue 32); else at the
on-demand list price of components/catalog/prices.yaml (one region per cloud), and a note under the
lines says "no spot price known for <machine> in <cloud>/<region>" with the file's reason. Spot prices
move, so the figure is the dated snapshot printed beside it, not a forecast. Storage, network and the managed
control plane are not counted there; `check`'s idle estimate (idle_estimate) counts them with no job.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from components import catalog
from components import spec as platform
from components.catalog import prices, spot_prices
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
    spot: bool = False  # every pool it can land on is spot
    regional: str | None = None  # "spot, us-central1, snapshot of 2026-07-30": from spot_prices.yaml
    machine_priced: bool = False  # a machine type priced from the catalogs (not a fixed fee such as a cluster's)

    @property
    def total(self) -> float:
        return self.nodes * self.usd if self.usd is not None else 0.0

    @property
    def each(self) -> str:
        if self.usd is None:
            return self.machine
        return f"{self.machine} at {usd_text(self.usd)}" + (f" ({self.regional})" if self.regional else "")

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
    region: str | None = None  # the stack's region; None without a stack

    @property
    def total(self) -> float:
        return sum(line.total for line in self.lines)

    @property
    def unpriced(self) -> list[Line]:
        return [line for line in self.lines if line.usd is None]

    def notes(self) -> list[str]:
        """One line per machine priced from prices.yaml where the stack's region or its spot price was
        wanted: never silently another region's figure (issue 32)."""
        basis = prices.of(self.cloud)
        found = []
        for line in self.lines:
            if line.usd is None or line.regional is not None or not line.machine_priced:
                continue
            if self.region is not None and basis is not None and self.region != basis.region:
                found.append(f"{spot_prices.missing(self.cloud, self.region, line.machine)}; "
                             f"priced at the on-demand list price of {basis.region} ({PRICES_NAME})")
            elif line.spot:
                found.append(f"{spot_prices.missing(self.cloud, self.region or basis.region, line.machine)}; "
                             "spot pool priced at the on-demand list price, a ceiling")
        for line in self.lines:  # an old snapshot says its age (issue 32)
            row = spot_prices.price(self.cloud, self.region, line.machine) if line.regional else None
            old = spot_prices.stale(row.priced) if row is not None else None
            if old:
                found.append(old)
        return list(dict.fromkeys(found))

    def render(self, subject: str) -> str:
        head = f"{subject}: at most {self.total:.2f} USD/hour"
        if any(line.regional is None for line in self.lines):
            basis = prices.of(self.cloud)
            where = f"{basis.region}, priced {basis.priced}" if basis else "no list prices"
            head += f" at on-demand list prices ({where})"
        if any(line.regional is not None for line in self.lines):
            head += f"{';' if ' at on-demand' in head else ''} at {self.region} prices where dated beside a line"
        if self.unpriced:
            head += f"; {len(self.unpriced)} line(s) without a list price not counted"
        width = max(len(line.what) for line in self.lines)
        each_width = max(len(line.each) for line in self.lines)
        return "\n".join([head, *(line.render(width, each_width) for line in self.lines), *self.notes()])


PRICES_NAME = "components/catalog/prices.yaml"


def _machine_line(what: str, cloud: str, nodes: int, gpu: str | None, machine_types: Sequence[str],
                  region: str | None = None, spot: bool = False) -> Line:
    """The priciest of the machine types (a pool may be given any of them), or the reason none is priced.
    Each is priced in ``region`` at spot or on demand from spot_prices.yaml where it has a row, else at
    its on-demand list price (prices.yaml), which Estimate.notes then names."""
    priced = []
    for machine in machine_types:
        row = spot_prices.price(cloud, region, machine)
        if row is not None:
            priced.append((row.usd(spot), machine, row.basis(spot)))
            continue
        usd = catalog.list_price(gpu, cloud, machine) if gpu else prices.machine_price(cloud, machine)
        priced.append((usd, machine, None))
    known = [(usd, machine, regional) for usd, machine, regional in priced if usd is not None]
    if known:
        usd, machine, regional = max(known, key=lambda k: k[0])
        return Line(what, nodes, machine, usd, spot=spot, regional=regional, machine_priced=True)
    table = prices.of(cloud)
    machine = machine_types[0]
    why = (table.unpriced.get(machine) if table else None) or f"no list price for {machine} in the catalog"
    return Line(what, nodes, machine, None, why)


def stack_estimate(spec: platform.PlatformSpec) -> Estimate | None:
    """Every GPU pool at maxNodes plus the manager and CPU pools at maxNodes, each in the stack's region at its
    capacity type (a spot pool at the spot price) where spot_prices.yaml has the row; None for the
    local stack."""
    if spec.cloud not in ("aws", "gcp", "azure"):
        return None
    lines = [_machine_line(p.name, spec.cloud, p.max_nodes, p.gpu, p.machine_types, spec.region, p.spot)
             for p in spec.gpu_pools]
    manager = spec.manager_pool
    lines.append(_machine_line("manager", spec.cloud, manager.max_nodes, None, [manager.machine_type], spec.region))
    cpu = spec.cpu_pool  # torchfleet:cpuPool at maxNodes too (issue 30); from zero, so no idle line
    if cpu is not None:
        lines.append(_machine_line("cpu", spec.cloud, cpu.max_nodes, None, [cpu.machine_type], spec.region, cpu.spot))
    return Estimate(spec.cloud, tuple(lines), spec.region)


# AKS Standard tier (azure/cluster.py sku): "$0.10 per cluster per hour"
# (https://azure.microsoft.com/pricing/details/kubernetes-service/, read 2026-11-28).
AKS_STANDARD_TIER_USD = 0.10
# EKS: "$0.10 per cluster per hour" in standard support, $0.60 in extended support
# (https://aws.amazon.com/blogs/containers/amazon-eks-extended-support-for-kubernetes-versions-pricing/).
EKS_STANDARD_USD = 0.10
EKS_EXTENDED_USD = 0.60
# A NAT gateway's hour in us-east-1 (https://aws.amazon.com/vpc/pricing/, $0.045 per NAT gateway-hour,
# plus $0.045 per GB processed) and its Elastic IP: every public IPv4 address is $0.005 per hour since
# 2024-02-01 (https://aws.amazon.com/blogs/aws/new-aws-public-ipv4-address-charge-public-ip-insights/).
AWS_NAT_GATEWAY_USD = 0.045
AWS_PUBLIC_IPV4_USD = 0.005
# GKE Standard's cluster management fee, "$0.10 per cluster per hour"; the free tier's monthly credit
# covers zonal and Autopilot clusters only, and gcp/cluster.py makes a regional one
# (https://cloud.google.com/kubernetes-engine/pricing).
GKE_MANAGEMENT_USD = 0.10

HOURS_PER_MONTH = 730  # the vendors' monthly figures (AWS, Azure and GCP calculators) use 730 hours


def idle_estimate(spec: platform.PlatformSpec) -> Estimate | None:
    """What a stack costs per hour with no job running (issues 29, 32): the managed control plane, the
    manager pool at minNodes (at least one node: etcd and the controllers run there), the NAT and the
    store; what is billed by use (GB processed, GiB stored) is listed unpriced with where its price is.
    None for the local stack."""
    m = spec.manager_pool
    manager = _machine_line("manager pool at minNodes", spec.cloud, max(1, m.min_nodes), None, [m.machine_type],
                            spec.region)  # on demand, in the stack's region where spot_prices.yaml has it
    if spec.cloud == "aws":
        extended = spec.kubernetes_support == "EXTENDED"
        nats = len(spec.zones) if spec.network.nat == "perZone" else 1
        return Estimate("aws", region=spec.region, lines=(
            Line("EKS control plane", 1, "cluster", EKS_STANDARD_USD),
            manager,
            Line("NAT gateway + its public IPv4", nats, "gateway", AWS_NAT_GATEWAY_USD + AWS_PUBLIC_IPV4_USD),
            *((Line("EKS extended support", 1, "cluster", None,
                    f"{EKS_EXTENDED_USD:.2f}/hour instead of {EKS_STANDARD_USD:.2f} once the minor leaves "
                    "standard support (kubernetesSupport EXTENDED)"),) if extended else ()),
            Line("EFS store", 1, "store", None,
                 "billed per GB-month stored, nothing when empty: aws.amazon.com/efs/pricing"),
        ))
    if spec.cloud == "gcp":
        return Estimate("gcp", region=spec.region, lines=(
            Line("GKE cluster management (regional)", 1, "cluster", GKE_MANAGEMENT_USD),
            manager,
            Line("Cloud NAT", 1, "gateway", None,
                 "billed per VM using it and per GB processed: cloud.google.com/nat/pricing"),
            Line(f"{spec.storage.size_gb} GiB Filestore {spec.storage.tier}", 1, "store", None,
                 "billed per provisioned GiB-month whether used or not: cloud.google.com/filestore/pricing"),
        ))
    if spec.cloud != "azure":
        return None
    from components.clouds.azure import cluster as aks  # here: pulumi-azure-native, Azure only

    return Estimate("azure", region=spec.region, lines=(
        _machine_line("system pool", "azure", aks.SYSTEM_NODES, None, [aks.SYSTEM_VM_SIZE], spec.region),
        manager,
        Line("AKS Standard tier", 1, "cluster", AKS_STANDARD_TIER_USD),
        Line(f"{spec.storage.size_gb} GiB {spec.storage.tier} share", 1, "share", None,
             "billed per provisioned GiB-month, kept by destroy while storage.protect: "
             "azure.microsoft.com/pricing/details/storage/files"),
        Line("standard load balancer", 1, "LB", None,
             "billed per rule and GB: azure.microsoft.com/pricing/details/load-balancer"),
    ))


def job_estimate(name: str, cloud: str, gpu: str | None, max_nodes: int, machine_types: Sequence[str],
                 region: str | None = None, spot: bool = False) -> Line | None:
    """A GPU job at its most nodes, one machine each, in ``region`` at spot or on demand; None for a
    CPU job (it runs on the CPU pool, which the stack's estimate counts at its maxNodes) or where the cloud has
    no list prices."""
    if gpu is None or prices.of(cloud) is None or not machine_types:
        return None
    return _machine_line(name, cloud, max_nodes, gpu, machine_types, region, spot)


def _job_pools(target: Target, req: JobRequest) -> list[platform.GpuPoolSpec]:
    # req.zone is the node label: eastus-1 on Azure for the pool zone "1".
    return [p for p in target.pools or () if p.gpu == req.gpu
            and req.zone in (None, p.zone, f"{target.region}-{p.zone}")]


def job_is_spot(target: Target, req: JobRequest) -> bool:
    """True when every pool the job can land on is spot (it pays spot prices); False with any
    on-demand pool among them (it may land there) or without a stack (no pools known)."""
    pools = _job_pools(target, req)
    return bool(pools) and all(p.spot for p in pools)


def job_line(target: Target, req: JobRequest) -> Line | None:
    """The job at its most nodes, priced in the stack's region at its capacity type (issue 32)."""
    return job_estimate(req.name, target.cloud, req.gpu, req.max_nodes, job_machine_types(target, req),
                        target.region if target.pools is not None else None, job_is_spot(target, req))


def job_machine_types(target: Target, req: JobRequest) -> list[str]:
    """The machines a job's pods can land on: with a stack, every type of its GPU's pools (in its
    zone, if given); without one, the machine it was sized for."""
    if target.pools is None:
        return [req.sizing.machine]
    pools = _job_pools(target, req)
    return list(dict.fromkeys(m for p in pools for m in p.machine_types)) or [req.sizing.machine]


def for_jobs(target: Target, requests: Sequence[JobRequest]) -> Estimate | None:
    """The jobs together (a sweep's run at once), or None when none of them is a priced GPU job."""
    lines = [job_line(target, r) for r in requests]
    priced = tuple(line for line in lines if line is not None)
    return Estimate(target.cloud, priced, target.region if target.pools is not None else None) if priced else None
