"""JobRequest: a job as the flags describe it, validated against its target, sized from the catalog.

Every check here runs before anything is sent; each failure is a UsageError whose message
starts with the flag and says what would be valid. The checks of one flag on its own are in
flag_checks.py, a pod's requests in sizing.py.
"""

from __future__ import annotations

import difflib
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field

from components import catalog
from components.catalog import regions
from components.spec import TRAINING_UID
from torchfleet.jobs.egress import parse_egress
from torchfleet.jobs.errors import Problems, UsageError
from torchfleet.jobs.flag_checks import (
    check_image,
    check_name,
    check_run_as_user,
    check_zone,
    parse_cpus,
    parse_env,
    parse_memory,
    parse_nodes,
    training_command,
)
from torchfleet.jobs.mounts import DEFAULT_MOUNT, normalize_mount
from torchfleet.jobs.sizing import Sizing, cpu_fit_problems, size, size_cpu
from torchfleet.jobs.target import Target, require_cpu_pool
from torchfleet.jobs.workdir import Workdir

# A CPU job (--cpu) is sized by hand; the defaults fit two workers on a laptop's kind node.
DEFAULT_CPUS = "1"
DEFAULT_MEMORY = "2Gi"
RECOVERY_MODES = ("restart", "inplace")


def new_rdzv_id(name: str) -> str:
    """A rendezvous id of its own for each submission: ``<name>-<8 hex digits>``.

    torch's etcd-v2 backend keeps a run's rendezvous, closed once the run has ended, for 7,200 s
    (torch/distributed/elastic/rendezvous/etcd_rendezvous_backend.py, ``_DEFAULT_TTL``): under the job's
    name alone, ``torchfleet delete X && torchfleet submit X`` within 2 hours of a finished or failed run
    met that closed rendezvous and every node exited 1 (``RendezvousClosedError``).
    """
    return f"{name}-{secrets.token_hex(4)}"


@dataclass(frozen=True)
class JobRequest:
    name: str
    gpu: str | None  # None: a CPU job (--cpu)
    min_nodes: int
    max_nodes: int
    gpus_per_node: int
    image: str
    command: tuple[str, ...]
    sizing: Sizing
    zone: str | None = None  # the node label value (topology.kubernetes.io/zone)
    env: tuple[tuple[str, str], ...] = ()
    mount: str = DEFAULT_MOUNT
    overrides: tuple[str, ...] = ()  # a sweep's --key=value (or Hydra's key=value), appended to the command
    sweep: str | None = None
    # The pods' uid: the training image's user by default. The group stays TRAINING_UID, which
    # owns the shared store (mode 2775), so another uid can still write there.
    run_as_user: int = TRAINING_UID
    egress: tuple[str, ...] = ()  # --allow-egress CIDRs, normalized
    # "restart": torchrun restarts every worker at a membership change (the operator's job);
    # "inplace": survivors keep training (torchft), an Indexed Job and a Lighthouse (inplace_job.py)
    recovery: str = "restart"
    rdzv_id: str = ""  # restart mode: the rendezvous of this submission (new_rdzv_id), set by build_request
    workdir: Workdir | None = None  # --workdir: the packed code the pods unpack and run in (workdir.py)
    notes: tuple[str, ...] = field(default=(), compare=False)  # said to the user, not errors

    @property
    def cpu(self) -> bool:
        return self.gpu is None

    @property
    def nproc_per_node(self) -> int:
        # A CPU job runs one training process per pod (gloo); a GPU job one per GPU.
        return 1 if self.cpu else self.gpus_per_node

    @property
    def job_dir(self) -> str:
        return f"{self.mount.rstrip('/')}/{self.name}"

    @property
    def checkpoint_dir(self) -> str:
        # The training image writes checkpoints under <mount>/<job>/checkpoints.
        return f"{self.job_dir}/checkpoints"

    @property
    def output_dir(self) -> str:
        return f"{self.job_dir}/output"


# ---------------------------------------------------------------- the request


_AZURE_ZONE = re.compile(r"[1-3]")
_AZURE_ZONE_LABEL = re.compile(r"([a-z0-9]+)-([1-3])")


def zone_names(target: Target, zone: str) -> tuple[str, str]:
    """(the zone as stack config names it, the node label value) for ``--zone``.

    They differ on Azure only: config says "1", AKS labels the node
    ``topology.kubernetes.io/zone=eastus-1`` (components/clouds/azure topology_zones), so a
    node selector on "1" would never match.
    """
    if target.cloud != "azure":
        return zone, zone
    if _AZURE_ZONE.fullmatch(zone):
        if not target.region:
            raise UsageError(f"--zone: Azure labels nodes <region>-<zone>; without --stack give it whole, "
                             f"e.g. eastus-{zone}")
        return zone, f"{target.region}-{zone}"
    m = _AZURE_ZONE_LABEL.fullmatch(zone)
    if not m or (target.region and m.group(1) != target.region):
        where = target.region or "eastus"
        raise UsageError(f"--zone: expected an Azure zone like 1 or {where}-1, got {zone!r}")
    return m.group(2), zone


def check_zone_exists(target: Target, pool_zone: str, label: str) -> None:
    """A zone the job's pods can land in: one of the stack's, or without a stack one the cloud has
    (components/catalog/regions.yaml). A node selector on a zone no node has leaves every pod Pending."""
    if target.cloud == "local":
        raise UsageError(f"--zone: the local stack's nodes (kind, minikube) carry no zone label, so the pods would "
                         f"stay Pending on {label!r}; drop --zone")
    if target.zones is not None:
        if pool_zone not in target.zones:
            raise UsageError(f"--zone: stack {target.stack} has no zone {pool_zone!r}; its zones: "
                             f"{', '.join(target.zones) or 'none'}")
        return
    known = regions.load().get(target.cloud)
    if known is None:
        return
    if target.cloud == "azure":  # the label is <location>-<zone>
        location, _, number = label.rpartition("-")
        found = regions.region("azure", location)
        if found is not None and number in found.zones:
            return
        every = [f"{name}-{z}" for name, r in known.regions.items() for z in r.zones]
    else:
        every = [z for r in known.regions.values() for z in r.zones]
        if label in every:
            return
    close = difflib.get_close_matches(label, every, n=1)
    hint = f"did you mean {close[0]!r}?" if close else f"e.g. {every[0] if every else 'none known'}"
    raise UsageError(f"--zone: {label!r} is not a zone of {target.cloud} (components/catalog/regions.yaml); {hint}")


def resolve_machine(
    target: Target, gpu: str, zone: str | None, max_nodes: int, gpus_per_node: int = 1
) -> tuple[catalog.Machine, list[str]]:
    """The machine a job's pods land on, and notes for the user. Raises UsageError."""
    notes: list[str] = []
    gpu = gpu.lower()
    if target.pools is not None:
        pools = [p for p in target.pools if p.gpu == gpu]
        if not pools:
            have = sorted({p.gpu for p in target.pools})
            detail = (f"its GPU pools have: {', '.join(have)}" if have
                      else "it has no GPU pools (CPU-only): submit a CPU job with --cpu instead of --gpu")
            raise UsageError(f"--gpu: stack {target.stack} has no {gpu!r} pool; {detail}")
        zones = [p.zone for p in pools]
        if zone is not None and zone not in zones:
            raise UsageError(
                f"--zone: stack {target.stack} has no {gpu} pool in {zone!r}; {gpu} zones: {', '.join(zones)}"
            )
        candidates = [p for p in pools if zone is None or p.zone == zone]
        biggest = max(p.max_nodes for p in candidates)
        if max_nodes > biggest:
            where = f"in {zone}" if zone else "in any one zone (all pods of a job share a zone)"
            raise UsageError(
                f"--nodes: at most {biggest} {gpu} nodes {where} on stack {target.stack}, asked for {max_nodes}"
            )
        # The autoscaler sizes new nodes from a pool's first machine type, but a spot pool may be
        # given any type in its list (and the job's pods any of these pools): requests sized for
        # the smallest fit on every node the job can get. For a pool that lists its smallest type
        # first, as the example stacks do, that is machines[0].
        machines = [m for p in candidates for m in p.machines]
        return min(machines, key=lambda m: (m.gpus, m.vcpus, m.memory_gib)), notes
    if not catalog.offered_on(target.cloud):
        raise UsageError(f"--gpu: the {target.cloud} stack is CPU-only (it has no GPU machines); "
                         "submit a CPU job with --cpu instead of --gpu")
    offer = catalog.offering(gpu, target.cloud)
    if gpu not in catalog.load():
        raise UsageError(f"--gpu: unknown GPU {gpu!r}; the catalog has: {', '.join(catalog.gpu_keys())}")
    if offer is not None and not offer.available:
        raise UsageError(f"--gpu: {gpu} on {target.cloud} was retired on {offer.retired} ({offer.reason}); "
                         f"use {offer.replacement} instead")
    if offer is None:
        raise UsageError(f"--gpu: {gpu} is not offered on {target.cloud}; {target.cloud} offers: "
                         f"{', '.join(catalog.offered_on(target.cloud))} (or pick another --cloud)")
    machine = offer.default_machine
    if gpus_per_node > machine.gpus:
        # The default is a one-GPU machine; a multi-GPU node is the smallest with enough GPUs.
        bigger = sorted((m for m in offer.machines if m.gpus >= gpus_per_node), key=lambda m: (m.gpus, m.vcpus))
        if not bigger:
            most = max(m.gpus for m in offer.machines)
            raise UsageError(f"--gpus-per-node: no {gpu} machine on {target.cloud} has {gpus_per_node} GPUs; "
                             f"at most {most}")
        machine = bigger[0]
    notes.append(
        f"no --stack: accepting any catalog GPU and sizing for {machine.type} (the {gpu} machine on {target.cloud}, "
        f"{machine.gpus} GPU(s)); give --stack to check the GPU against the stack's pools"
    )
    return machine, notes


def kind_missing(target: Target) -> str:
    """Why a job with neither --gpu nor --cpu cannot be sized, and what to add."""
    if target.cloud == "local" or target.pools == ():
        where = f"stack {target.stack}" if target.stack else f"the {target.cloud} stack"
        return (f"--gpu or --cpu: required; {where} is CPU-only, so submit with --cpu "
                f"(--cpus {DEFAULT_CPUS} --memory {DEFAULT_MEMORY} by default)")
    have = f" (stack {target.stack} has: {', '.join(sorted({p.gpu for p in target.pools}))})" if target.pools else ""
    return f"--gpu: required, e.g. --gpu t4{have}, or --cpu for a CPU job"


def build_request(
    target: Target,
    *,
    name: str,
    gpu: str | None,
    nodes: str,
    gpus_per_node: int | None,
    image: str | None,
    command: Sequence[str],
    zone: str | None = None,
    env: Sequence[str] = (),
    mount: str = DEFAULT_MOUNT,
    overrides: Sequence[str] = (),
    sweep: str | None = None,
    run_as_user: int = TRAINING_UID,
    cpu: bool = False,
    cpus: str | None = None,
    memory: str | None = None,
    allow_egress: Sequence[str] = (),
    recovery: str = "restart",
    workdir: Workdir | None = None,
    problems: Problems | None = None,
) -> JobRequest:
    """A job request; ``cpu=True`` makes a CPU job (no GPU, sized from ``cpus``/``memory``).

    The flags that can be checked on their own are checked together, so one UsageError lists
    every problem among them (with ``problems`` already found by the caller: a job file's, --max-cost's); the
    GPU's name is checked with them, the zone and sizing checks that need them valid come after.
    """
    problems = Problems() if problems is None else problems
    lo, hi = problems.check(parse_nodes, nodes) or (1, 1)
    problems.check(check_run_as_user, run_as_user)
    if recovery not in RECOVERY_MODES:
        problems.add(f"--recovery: one of {', '.join(RECOVERY_MODES)}, got {recovery!r}")
    problems.check(check_name, name, hi, recovery=recovery)
    if recovery == "inplace" and gpus_per_node is not None and gpus_per_node > 1:
        problems.add(f"--gpus-per-node: --recovery inplace runs one training process per node (the node is one "
                     f"replica group), got {gpus_per_node}; use 1 (more GPUs: more nodes), or --recovery restart")
    problems.check(check_image, image)
    env_pairs = problems.check(parse_env, env) or ()
    egress = problems.check(parse_egress, allow_egress) or ()
    script = problems.check(training_command, command) or ()
    mount_path = problems.check(normalize_mount, mount) or DEFAULT_MOUNT
    if zone is not None:
        problems.check(check_zone, zone)
    if cpu or recovery == "inplace":  # a CPU job's pods, or an in-place job's Lighthouse, need the CPU pool
        problems.check(require_cpu_pool, target, "--cpu" if cpu else "--recovery inplace (its Lighthouse)")
    if cpu:
        if gpu:
            problems.add(f"--cpu: a CPU job asks for no GPU; drop --gpu {gpu} (or drop --cpu)")
        if gpus_per_node is not None:
            problems.add("--cpu: a CPU job asks for no GPU; drop --gpus-per-node (or drop --cpu)")
        cpu_millis = problems.check(parse_cpus, DEFAULT_CPUS if cpus is None else cpus)
        memory_mib = problems.check(parse_memory, DEFAULT_MEMORY if memory is None else memory)
        for problem in cpu_fit_problems(target.cpu_node, cpu_millis, memory_mib):
            problems.add(problem)
    else:
        for flag, value in (("--cpus", cpus), ("--memory", memory)):
            if value is not None:
                problems.add(f"{flag}: only with --cpu; a GPU job is sized from its machine type")
        if not gpu:
            problems.add(kind_missing(target))
        else:  # its name against the stack's pools or the catalog, with the rest (issue 32)
            problems.check(resolve_machine, target, gpu, None, 0)
        if gpus_per_node is not None and gpus_per_node < 1:
            problems.add(f"--gpus-per-node: must be at least 1, got {gpus_per_node}")
    problems.raise_any()
    common = dict(
        name=name, min_nodes=lo, max_nodes=hi, image=image, command=script + tuple(overrides), env=env_pairs,
        mount=mount_path, overrides=tuple(overrides), sweep=sweep, run_as_user=run_as_user, egress=egress,
        recovery=recovery, rdzv_id=new_rdzv_id(name) if recovery == "restart" else "", workdir=workdir,
    )
    if cpu:
        zone_label = None
        if zone:
            pool_zone, zone_label = zone_names(target, zone)
            check_zone_exists(target, pool_zone, zone_label)
        notes = [] if target.cloud == "local" else [
            "--cpu: the pods go to the CPU pool (torchfleet:cpuPool, label and taint torchfleet.io/pool=cpu), "
            "never to a GPU node nor to the manager pool"
        ]
        sizing = size_cpu(cpu_millis, memory_mib)
        return JobRequest(gpu=None, gpus_per_node=0, sizing=sizing, zone=zone_label, notes=tuple(notes), **common)
    gpus_per_node = 1 if gpus_per_node is None else gpus_per_node
    pool_zone, zone_label = zone_names(target, zone) if zone else (None, None)
    if zone and target.pools is None:  # with a stack, resolve_machine checks the GPU's pools' zones
        check_zone_exists(target, pool_zone, zone_label)
    machine, notes = resolve_machine(target, gpu, pool_zone, hi, gpus_per_node)
    if gpus_per_node > machine.gpus:
        raise UsageError(
            f"--gpus-per-node: {machine.type} has {machine.gpus} {gpu} GPU(s), asked for {gpus_per_node}; "
            f"use at most {machine.gpus} (more GPUs means more nodes: raise --nodes)"
        )
    if target.max_gpus is not None and hi * gpus_per_node > target.max_gpus:
        raise UsageError(
            f"--nodes: {hi} nodes x {gpus_per_node} GPUs exceeds stack {target.stack}'s guardrail of "
            f"{target.max_gpus} GPUs; lower the maximum"
        )
    return JobRequest(
        gpu=gpu.lower(), gpus_per_node=gpus_per_node, sizing=size(machine, gpus_per_node), zone=zone_label,
        notes=tuple(notes), **common,
    )
