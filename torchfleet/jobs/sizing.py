"""What one pod of a job requests: its share of a GPU machine's allocatable CPU and memory, or a CPU job's own."""

from __future__ import annotations

from dataclasses import dataclass

from components import catalog

CPU_MACHINE = "cpu"  # the machine annotation of a CPU job


@dataclass(frozen=True)
class Sizing:
    """What one pod (one node's worth of the job) requests, derived from its machine type."""

    machine: str
    gpus: int  # 0: a CPU job
    cpu_millis: int
    memory_mib: int
    shm_mib: int
    loader_workers: int  # data-loader processes per GPU (per training process)



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


def cpu_fit_problems(node: tuple[str, int, float] | None, cpu_millis: int | None, memory_mib: int | None) -> list[str]:
    """Why a CPU job's pod fits no node of the pool it runs on (``node``: its machine, vCPUs, GiB).

    A pod is scheduled whole on one node: asking more than a node has leaves it Pending for good,
    and the cluster autoscaler adds no node for it, since a new node of the pool would not fit it
    either (issue 23: `--cpu --cpus 100000 --memory 100000Gi` was accepted). The bound is the
    machine's whole capacity, which no pod can exceed whatever the cloud reserves; what a node
    leaves to pods (its allocatable) is less, by an amount each cloud sets.
    """
    if node is None:
        return []
    machine, vcpus, memory_gib = node
    where = f"a CPU job's pods run on the CPU pool, whose {machine} has {vcpus} vCPUs and {memory_gib:g} GiB"
    fix = "ask for less (the node keeps some for itself), or pick a larger torchfleet:cpuPool.machineType"
    problems = []
    if cpu_millis is not None and cpu_millis > vcpus * 1000:
        problems.append(f"--cpus: {cpu_millis / 1000:g} cores per pod, but {where}; {fix}")
    if memory_mib is not None and memory_mib > memory_gib * 1024:
        problems.append(f"--memory: {memory_mib}Mi per pod, but {where}; {fix}")
    return problems


def size(machine: catalog.Machine, gpus_per_node: int) -> Sizing:
    """Requests for a pod using ``gpus_per_node`` of the machine's GPUs: its share of what is allocatable.

    The blog tuned data-loader processes per GPU by hand to keep CPU preprocessing from starving
    the GPUs; here each GPU's training process keeps one core and its share of the rest feeds it.
    """
    share = gpus_per_node / machine.gpus
    cpu = int(allocatable_cpu_millis(machine) * share) // 100 * 100
    memory = int(allocatable_memory_mib(machine) * share) // 256 * 256
    return _sized(machine.type, gpus_per_node, cpu, memory)


def allocatable_cpu_millis(machine: catalog.Machine) -> int:
    """What a node of this machine leaves to pods, by the reservations above."""
    return machine.vcpus * 1000 - _reserved_cpu_millis(machine.vcpus)


def allocatable_memory_mib(machine: catalog.Machine) -> int:
    total_mib = machine.memory_gib * 1024
    return total_mib - _reserved_memory_mib(total_mib)


def beside_sidecar(sizing: Sizing, cpu_millis: int, memory_mib: int) -> Sizing:
    """The pod's requests less a sidecar's that an admission webhook adds to it (GKE's Cloud Storage
    FUSE sidecar, components/kube/datasets.py): the scheduler sums both, and a pod sized to its whole
    share plus a sidecar fits no node and stays Pending. A CPU job keeps what the user asked for."""
    if sizing.gpus == 0 or (cpu_millis, memory_mib) == (0, 0):
        return sizing
    cpu = (sizing.cpu_millis - cpu_millis) // 100 * 100
    memory = (sizing.memory_mib - memory_mib) // 256 * 256
    return _sized(sizing.machine, sizing.gpus, cpu, memory)


def _sized(machine: str, gpus_per_node: int, cpu: int, memory: int) -> Sizing:
    cores_per_gpu = cpu // 1000 // gpus_per_node
    workers = max(1, cores_per_gpu - 1)
    # /dev/shm is memory-backed and counts against the pod's memory: a quarter of it carries the
    # loaders' batches (Docker's 64 MiB default makes multi-worker loaders crash with "bus error").
    shm = max(512, min(memory // 4, 16384)) // 256 * 256
    return Sizing(machine, gpus_per_node, cpu, memory, shm, workers)


def size_cpu(cpu_millis: int, memory_mib: int) -> Sizing:
    """A CPU job's requests, as given; /dev/shm a quarter of the memory, one loader per spare core."""
    shm = max(64, memory_mib // 4 // 64 * 64)
    return Sizing(CPU_MACHINE, 0, cpu_millis, memory_mib, shm, max(1, cpu_millis // 1000 - 1))
