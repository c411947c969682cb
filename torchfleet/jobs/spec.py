"""JobRequest: a job as the flags describe it, validated against its target, sized from the catalog.

Every check here runs before anything is sent; each failure is a UsageError whose message
starts with the flag and says what would be valid.
"""

from __future__ import annotations

import difflib
import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from components import catalog
from components.catalog import regions
from components.spec import TRAINING_UID
from torchfleet.jobs import image_ref
from torchfleet.jobs.egress import parse_egress
from torchfleet.jobs.errors import Problems, UsageError
from torchfleet.jobs.mounts import DEFAULT_MOUNT, normalize_mount
from torchfleet.jobs.target import Target

# The operators name pods and their Services "<job>-worker-<index>", and a Service name is a
# DNS-1035 label of at most 63 characters.
_POD_SUFFIX = "-worker-"
_DNS1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
# Kubernetes label values: at most 63 characters, alphanumeric at both ends, '-', '_', '.' inside
# (https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#syntax-and-character-set).
LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
LABEL_VALUE_MAX = 63
# Zones as every cloud writes them in topology.kubernetes.io/zone: us-west-2a, us-central1-a, eastus-1.
_ZONE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
# Kubernetes keeps uids in an int32 (runAsUser: 0 to 2147483647, apimachinery IsValidUserID).
UID_MAX = 2**31 - 1
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Kubernetes supports clusters of up to 5,000 nodes; a job cannot use more
# (https://kubernetes.io/docs/setup/best-practices/cluster-large/).
MAX_NODES = 5000
_NODES = re.compile(r"^\s*(\d+)\s*(?::\s*(\d+)\s*)?$")
# One job per combination: a few more values per --param multiply into thousands of jobs, each
# asking for GPUs. A sweep beyond this is more likely a typo than a plan.
MAX_SWEEP_JOBS = 256
_PARAM_KEY = re.compile(r"^[+~]{0,2}[A-Za-z_][\w.\-/@]*$")  # Hydra override keys (a.b, +new, ~drop)
# Environment the CLI sets itself; a user value would break the per-job folders or identity.
# POD_IP: the pod's address from the downward API, which torchrun advertises (--local-addr).
RESERVED_ENV = ("TORCHFLEET_JOB", "TORCHFLEET_CHECKPOINT_DIR", "TORCHFLEET_OUTPUT_DIR", "POD_IP")
# A CPU job (--cpu) is sized by hand; the defaults fit two workers on a laptop's kind node.
DEFAULT_CPUS = "1"
DEFAULT_MEMORY = "2Gi"
CPU_MACHINE = "cpu"  # the machine annotation of a CPU job
_CPUS = re.compile(r"^\s*(?:(\d+(?:\.\d{1,3})?)|(\d+)m)\s*$")
_MEMORY = re.compile(r"^\s*(\d+)\s*(Mi|Gi)\s*$")


@dataclass(frozen=True)
class Sizing:
    """What one pod (one node's worth of the job) requests, derived from its machine type."""

    machine: str
    gpus: int  # 0: a CPU job
    cpu_millis: int
    memory_mib: int
    shm_mib: int
    loader_workers: int  # data-loader processes per GPU (per training process)


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
    overrides: tuple[str, ...] = ()  # Hydra-style key=value, appended to the command (sweeps)
    sweep: str | None = None
    # The pods' uid: the training image's user by default. The group stays TRAINING_UID, which
    # owns the shared store (mode 2775), so another uid can still write there.
    run_as_user: int = TRAINING_UID
    egress: tuple[str, ...] = ()  # --allow-egress CIDRs, normalized
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


# ---------------------------------------------------------------- flag parsers


def parse_nodes(text: str) -> tuple[int, int]:
    """``--nodes 2:8`` -> (2, 8); ``--nodes 4`` -> (4, 4)."""
    m = _NODES.match(text or "")
    if not m:
        raise UsageError(f"--nodes: expected MIN:MAX (e.g. 2:8) or a single count (e.g. 4), got {text!r}")
    lo = int(m.group(1))
    hi = int(m.group(2)) if m.group(2) is not None else lo
    if lo < 1:
        raise UsageError(f"--nodes: the minimum must be at least 1, got {text!r}")
    if lo > hi:
        raise UsageError(f"--nodes: the minimum ({lo}) must not exceed the maximum ({hi}); e.g. {hi}:{lo}")
    if hi > MAX_NODES:
        raise UsageError(f"--nodes: at most {MAX_NODES} nodes (the largest cluster Kubernetes supports), got {text!r}")
    return lo, hi


def parse_env(items: Sequence[str]) -> tuple[tuple[str, str], ...]:
    seen: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not _ENV_NAME.match(key):
            raise UsageError(f"--env: expected NAME=VALUE with NAME like MY_VAR, got {item!r}")
        if key in RESERVED_ENV:
            raise UsageError(f"--env {key}: set by torchfleet for every job; reserved: {', '.join(RESERVED_ENV)}")
        seen[key] = value  # the last one wins, as in a shell
    return tuple(seen.items())


def parse_params(items: Sequence[str]) -> list[tuple[str, list[str]]]:
    """``--param lr=0.1,0.01`` (repeatable) -> [("lr", ["0.1", "0.01"]), ...]."""
    params: list[tuple[str, list[str]]] = []
    for item in items:
        key, sep, values = item.partition("=")
        choices = [v.strip() for v in values.split(",")]
        if not sep or not _PARAM_KEY.match(key) or not all(choices):
            raise UsageError(f"--param: expected KEY=V1,V2,... (e.g. lr=0.1,0.01), got {item!r}")
        if any(k == key for k, _ in params):
            raise UsageError(f"--param {key}: given twice; list all values once, e.g. {key}=1,2,3")
        if len(set(choices)) != len(choices):
            raise UsageError(f"--param {key}: repeated values in {item!r}")
        params.append((key, choices))
    if not params:
        raise UsageError("--param: a sweep needs at least one, e.g. --param lr=0.1,0.01")
    jobs = math.prod(len(values) for _, values in params)
    if jobs > MAX_SWEEP_JOBS:
        raise UsageError(f"--param: {jobs} combinations, at most {MAX_SWEEP_JOBS} jobs per sweep; "
                         "sweep fewer values, or split the sweep")
    return params


def parse_cpus(text: str) -> int:
    """``--cpus 2`` / ``1.5`` / ``500m`` -> millicores."""
    m = _CPUS.match(text or "")
    millis = (round(float(m.group(1)) * 1000) if m.group(1) else int(m.group(2))) if m else 0
    if millis < 100:
        raise UsageError(f"--cpus: expected cores per pod, at least 0.1 (e.g. 2, 1.5 or 500m), got {text!r}")
    return millis


def parse_memory(text: str) -> int:
    """``--memory 4Gi`` / ``512Mi`` -> MiB."""
    m = _MEMORY.match(text or "")
    mib = int(m.group(1)) * (1024 if m.group(2) == "Gi" else 1) if m else 0
    if mib < 256:
        raise UsageError(f"--memory: expected memory per pod in Mi or Gi, at least 256Mi (e.g. 4Gi), got {text!r}")
    return mib


def combinations(params: list[tuple[str, list[str]]]) -> list[tuple[str, ...]]:
    """Every combination, as Hydra overrides in flag order: [("lr=0.1", "batch=64"), ...]."""
    keys = [k for k, _ in params]
    return [tuple(f"{k}={v}" for k, v in zip(keys, values, strict=True))
            for values in itertools.product(*(vs for _, vs in params))]


def check_name(name: str, max_nodes: int, flag: str = "NAME") -> None:
    longest = len(name) + len(_POD_SUFFIX) + len(str(max(max_nodes - 1, 0)))
    if not _DNS1035.fullmatch(name or ""):
        raise UsageError(
            f"{flag}: {name!r} is not a valid job name; use lowercase letters, digits and '-', "
            "starting with a letter (e.g. resnet-lr01)"
        )
    if longest > 63:
        raise UsageError(
            f"{flag}: {name!r} is too long; pod names are <job>-worker-<n> and must fit 63 characters, "
            f"so at most {63 - longest + len(name)} characters here"
        )


def check_lookup_name(name: str) -> None:
    """A job name given to status, logs or delete: checked before it reaches the API (in a URL
    path and a label selector)."""
    if not (_DNS1035.fullmatch(name or "") and len(name) <= LABEL_VALUE_MAX):
        raise UsageError(f"NAME: {name!r} is not a job name; job names are lowercase letters, digits and '-', "
                         f"starting with a letter, at most {LABEL_VALUE_MAX} characters (see `torchfleet list`)")


def check_label_value(flag: str, value: str) -> None:
    if len(value) > LABEL_VALUE_MAX or not LABEL_VALUE.fullmatch(value):
        raise UsageError(f"{flag}: {value!r} cannot be a Kubernetes label value; at most {LABEL_VALUE_MAX} "
                         "letters, digits, '-', '_' or '.', beginning and ending with a letter or digit")


def check_zone(zone: str) -> None:
    check_label_value("--zone", zone)  # it becomes the nodeSelector's topology.kubernetes.io/zone value
    if not _ZONE.fullmatch(zone):
        raise UsageError(f"--zone: expected a zone as the nodes' topology.kubernetes.io/zone label names it "
                         f"(lowercase letters, digits, '-'), e.g. us-west-2a, us-central1-a or eastus-1; got {zone!r}")


def check_image(image: str | None) -> None:
    if not image:
        raise UsageError(f"--image: required, e.g. --image {image_ref.EXAMPLE}")
    ref = image_ref.parse(image)
    # A spot replacement pulls the image again: a moving tag could run different code on
    # different nodes of one job, so the image must name a version.
    if not ref.digest and (not ref.tag or ref.tag == "latest"):
        raise UsageError(f"--image: {image!r} names no fixed version; give REPO:TAG (not latest) or REPO@sha256:...")


def check_run_as_user(uid: int) -> None:
    # The training namespace enforces the `restricted` Pod Security level, which refuses uid 0
    # (runAsNonRoot): https://kubernetes.io/docs/concepts/security/pod-security-standards/#restricted
    if isinstance(uid, bool) or not isinstance(uid, int) or not 0 < uid <= UID_MAX:
        raise UsageError(f"--run-as-user: expected a uid from 1 to {UID_MAX} (the namespace refuses root, "
                         f"Kubernetes keeps uids in 32 bits), got {uid!r}; the training image's user is {TRAINING_UID}")


def training_command(command: Sequence[str]) -> tuple[str, ...]:
    """The user's command as torchrun's script part (after the launcher's own options).

    torchrun runs a script with Python itself, so ``python train.py`` becomes ``train.py``,
    ``python -m pkg.train`` becomes ``--module pkg.train``, and any other program runs
    with ``--no-python``.
    """
    argv = list(command)
    if not argv:
        raise UsageError("the training command is missing: put it after --, e.g. -- python train.py --lr 0.1")
    if not argv[0].strip():
        raise UsageError(f"the training command: the program after -- is empty ({argv[0]!r}); "
                         "e.g. -- python train.py --lr 0.1")
    if any("\0" in arg for arg in argv):
        raise UsageError("the training command: an argument contains a NUL character, which no program can receive")
    if re.fullmatch(r"python(3(\.\d+)?)?", argv[0].rsplit("/", 1)[-1]):
        rest = argv[1:]
        if rest[:1] == ["-m"] and len(rest) > 1:
            if not rest[1].strip():
                raise UsageError("the training command: the module after python -m is empty; e.g. -m team.train")
            return ("--module", *rest[1:])
        if rest and not rest[0].strip():
            raise UsageError(f"the training command {' '.join(argv)!r}: the script after python is empty; "
                             "e.g. -- python train.py")
        if not rest or rest[0].startswith("-"):
            raise UsageError(
                f"the training command {' '.join(argv)!r}: give a script or -m MODULE after python; "
                "interpreter options cannot pass through torchrun (use --env PYTHONUNBUFFERED=1 and the like)"
            )
        return tuple(rest)
    if argv[0].endswith(".py"):
        return tuple(argv)
    return ("--no-python", *argv)


# ---------------------------------------------------------------- sizing


def _reserved_memory_mib(total_mib: int) -> int:
    # GKE's kube-reserved memory table (the most conservative of the three clouds):
    # 25% of the first 4 GiB, 20% of the next 4, 10% of the next 8, 6% of the next 112, 2% above;
    # plus the 100 MiB eviction threshold and ~512 MiB for daemonsets (device plugin, CNI, CSI).
    # https://cloud.google.com/kubernetes-engine/docs/concepts/plan-node-sizes#memory_and_cpu_reservations
    bands = [(4096, 0.25), (4096, 0.20), (8192, 0.10), (114688, 0.06), (float("inf"), 0.02)]
    return int(_banded(total_mib, bands)) + 100 + 512


def _reserved_cpu_millis(vcpus: int) -> int:
    # GKE's table: 6% of the first core, 1% of the next, 0.5% of the next 2, 0.25% above 4;
    # plus 400m for daemonsets, which request CPU on every GPU node.
    bands = [(1000, 0.06), (1000, 0.01), (2000, 0.005), (float("inf"), 0.0025)]
    return int(_banded(vcpus * 1000, bands)) + 400


def _banded(total: float, bands: list[tuple[float, float]]) -> float:
    """What a tiered reservation takes from `total`: each (size, share) band reserves its share."""
    left, reserved = total, 0.0
    for size, share in bands:
        part = min(left, size)
        reserved += part * share
        left -= part
        if left <= 0:
            break
    return reserved


def size(machine: catalog.Machine, gpus_per_node: int) -> Sizing:
    """Requests for a pod using ``gpus_per_node`` of the machine's GPUs: its share of what is allocatable.

    The blog tuned data-loader processes per GPU by hand to keep CPU preprocessing from starving
    the GPUs; here each GPU's training process keeps one core and its share of the rest feeds it.
    """
    share = gpus_per_node / machine.gpus
    cpu = int((machine.vcpus * 1000 - _reserved_cpu_millis(machine.vcpus)) * share) // 100 * 100
    total_mib = machine.memory_gib * 1024
    memory = int((total_mib - _reserved_memory_mib(total_mib)) * share) // 256 * 256
    cores_per_gpu = cpu // 1000 // gpus_per_node
    workers = max(1, cores_per_gpu - 1)
    # /dev/shm is memory-backed and counts against the pod's memory: a quarter of it carries the
    # loaders' batches (Docker's 64 MiB default makes multi-worker loaders crash with "bus error").
    shm = max(512, min(memory // 4, 16384)) // 256 * 256
    return Sizing(machine.type, gpus_per_node, cpu, memory, shm, workers)


def size_cpu(cpu_millis: int, memory_mib: int) -> Sizing:
    """A CPU job's requests, as given; /dev/shm a quarter of the memory, one loader per spare core."""
    shm = max(64, memory_mib // 4 // 64 * 64)
    return Sizing(CPU_MACHINE, 0, cpu_millis, memory_mib, shm, max(1, cpu_millis // 1000 - 1))


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
        f"no --stack: accepting any catalog GPU and sizing for {machine.type} (a {target.cloud} {gpu} machine "
        f"with {machine.gpus} GPU(s)); give --stack to check the GPU against the stack's pools"
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
) -> JobRequest:
    """A job request; ``cpu=True`` makes a CPU job (no GPU, sized from ``cpus``/``memory``).

    The flags that can be checked on their own are checked together, so one UsageError lists
    every problem among them; the GPU, zone and sizing checks that need them valid come after.
    """
    problems = Problems()
    lo, hi = problems.check(parse_nodes, nodes) or (1, 1)
    problems.check(check_run_as_user, run_as_user)
    problems.check(check_name, name, hi)
    problems.check(check_image, image)
    env_pairs = problems.check(parse_env, env) or ()
    egress = problems.check(parse_egress, allow_egress) or ()
    script = problems.check(training_command, command) or ()
    mount_path = problems.check(normalize_mount, mount) or DEFAULT_MOUNT
    if zone is not None:
        problems.check(check_zone, zone)
    if cpu:
        if gpu:
            problems.add(f"--cpu: a CPU job asks for no GPU; drop --gpu {gpu} (or drop --cpu)")
        if gpus_per_node is not None:
            problems.add("--cpu: a CPU job asks for no GPU; drop --gpus-per-node (or drop --cpu)")
        cpu_millis = problems.check(parse_cpus, DEFAULT_CPUS if cpus is None else cpus)
        memory_mib = problems.check(parse_memory, DEFAULT_MEMORY if memory is None else memory)
    else:
        for flag, value in (("--cpus", cpus), ("--memory", memory)):
            if value is not None:
                problems.add(f"{flag}: only with --cpu; a GPU job is sized from its machine type")
        if not gpu:
            problems.add(kind_missing(target))
        if gpus_per_node is not None and gpus_per_node < 1:
            problems.add(f"--gpus-per-node: must be at least 1, got {gpus_per_node}")
    problems.raise_any()
    common = dict(
        name=name, min_nodes=lo, max_nodes=hi, image=image, command=script + tuple(overrides), env=env_pairs,
        mount=mount_path, overrides=tuple(overrides), sweep=sweep, run_as_user=run_as_user, egress=egress,
    )
    if cpu:
        zone_label = None
        if zone:
            pool_zone, zone_label = zone_names(target, zone)
            check_zone_exists(target, pool_zone, zone_label)
        notes = [] if target.cloud == "local" else [
            "--cpu: the pods go to nodes without the GPU taint (on a cloud stack, the manager pool), "
            "never to a GPU node"
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
