"""Rendering for `list` and `status`: plain functions from API objects to rows and text."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from components import spec as platform
from torchfleet.jobs import manifests, pod_template, terminal_text
from torchfleet.jobs import summary as progress_summary
from torchfleet.jobs.indexed_job import recovery_of
from torchfleet.jobs.progress import CheckpointInfo
from torchfleet.jobs.sizing import CPU_MACHINE

if TYPE_CHECKING:  # the kubernetes package takes 0.2 s to import; every torchfleet command would pay it
    from kubernetes import client

# GPU-HOURS and USD: what the job's current pods have used so far (usage.py), at list price
LIST_COLUMNS = ("NAME", "STATE", "NODES", "GPU", "ZONE", "AGE", "RESTARTS", "GPU-HOURS", "USD")


def _parse_time(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, str) and value:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    return None


def age(created: Any, now: datetime) -> str:
    """kubectl's style: 45s, 12m, 5h, 3d."""
    start = _parse_time(created)
    if start is None:
        return "-"
    seconds = max(0, int((now - start).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


# A batch Job's conditions (the `job` operator's, an in-place job) in the operators' words; Running has no
# condition there. Complete and Failed come after SuccessCriteriaMet and FailureTarget, once the Job
# controller has stopped the job's pods.
_INDEXED_JOB_STATES = {"Complete": "Succeeded", "Failed": "Failed", "Suspended": "Suspended"}


def _indexed_job_state(job: dict[str, Any]) -> str:
    status = job.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("status") == "True" and condition.get("type") in _INDEXED_JOB_STATES:
            return _INDEXED_JOB_STATES[condition["type"]]
    return "Running" if status.get("active") or status.get("ready") else "Pending"


# The 2020 ElasticJob controller never sets Failed with restartPolicy ExitCode (a failed pod only makes it
# say Restarting, for ever) and sets Succeeded only once all MAX pods have succeeded, which an elastic job
# that ran on fewer never reaches (pytorch/elastic kubernetes/controllers/job.go). So an ElasticJob's
# outcome is read from its pods, as the training operator decides a PyTorchJob's: a pod that succeeded
# means the run did (torchrun ends every agent together), and an exit other than these retried ones
# (kubeflow/common pkg/util/train/train_util.go, IsRetryableExitCode) means it failed.
RETRYABLE_EXIT_CODES = (130, 137, 138, 143)


def _elasticjob_outcome(pods: Sequence[client.V1Pod]) -> str | None:
    if any(p.status and p.status.phase == "Succeeded" for p in pods):
        return "Succeeded"
    for pod in pods:
        for status in (pod.status and pod.status.container_statuses) or []:
            ended = status.state and status.state.terminated
            if ended and ended.exit_code not in (0, *RETRYABLE_EXIT_CODES):
                return "Failed"
    return None


def state(job: dict[str, Any], pods: Sequence[client.V1Pod] = ()) -> str:
    """The newest condition that holds (Created, Running, Restarting, Succeeded, Failed); an ElasticJob's
    outcome from its ``pods`` (above)."""
    if manifests.is_indexed_job(job):
        return _indexed_job_state(job)
    if job.get("kind") == manifests.ELASTICJOB["kind"]:
        outcome = _elasticjob_outcome(pods)
        if outcome:
            return outcome
    conditions = [c for c in ((job.get("status") or {}).get("conditions") or []) if c.get("status") == "True"]
    if not conditions:
        return "Pending"
    newest = max(
        enumerate(conditions),
        key=lambda ic: (_parse_time(ic[1].get("lastTransitionTime")) or datetime.min.replace(tzinfo=UTC), ic[0]),
    )
    return newest[1].get("type") or "Unknown"


def restarts(job: dict[str, Any], pods: Sequence[client.V1Pod]) -> int:
    """Container restarts in the current pods plus pods the controller replaced after a failure."""
    in_pods = sum(
        cs.restart_count or 0 for p in pods for cs in ((p.status and p.status.container_statuses) or [])
    )
    status = job.get("status") or {}
    if manifests.is_indexed_job(job):  # pods the Job controller replaced (spot reclaims included)
        replaced = status.get("failed") or 0
    else:
        replaced = (((status.get("replicaStatuses") or {}).get("Worker")) or {}).get("failed") or 0
    return in_pods + int(replaced)


def running(pods: Sequence[client.V1Pod]) -> int:
    return sum(1 for p in pods if p.status and p.status.phase == "Running")


def zone_of(job: dict[str, Any], pods: Sequence[client.V1Pod], node_labels) -> str:
    """The zone asked for, else the zone of a node the job runs on (``node_labels`` may return None)."""
    asked = ((job.get("metadata") or {}).get("annotations") or {}).get(pod_template.ANNOTATION_ZONE)
    if asked:
        return asked
    for pod in pods:
        if pod.spec and pod.spec.node_name:
            labels = node_labels(pod.spec.node_name)
            if labels and labels.get(platform.LABEL_ZONE):
                return labels[platform.LABEL_ZONE]
    return "-"


@dataclass(frozen=True)
class JobRow:
    name: str
    state: str
    nodes: str
    gpu: str
    zone: str
    age: str
    restarts: int
    gpu_hours: str = "-"  # usage.py, filled in by `list`
    cost: str = "-"

    def cells(self) -> tuple[str, ...]:
        return (self.name, self.state, self.nodes, self.gpu, self.zone, self.age, str(self.restarts), self.gpu_hours,
                self.cost)


def job_row(job: dict[str, Any], pods: Sequence[client.V1Pod], node_labels, now: datetime) -> JobRow:
    meta = job.get("metadata") or {}
    lo, hi = manifests.min_max(job)
    machine = (meta.get("annotations") or {}).get(pod_template.ANNOTATION_MACHINE)
    cpu_job = "cpu" if machine == CPU_MACHINE else "-"  # --cpu jobs carry no GPU label
    gpu = (meta.get("labels") or {}).get(platform.LABEL_GPU) or cpu_job
    return JobRow(
        name=meta.get("name", "?"),
        state=state(job, pods),
        nodes=f"{running(pods)}/{lo if lo is not None else '?'}/{hi if hi is not None else '?'}",
        gpu=gpu,
        zone=zone_of(job, pods, node_labels),
        age=age(meta.get("creationTimestamp"), now),
        restarts=restarts(job, pods),
    )


def render(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    # every cell escaped: event messages, image names and labels come from the cluster (terminal_text.py)
    rows = [[terminal_text.cell(c) for c in row] for row in rows]
    widths = [max(len(str(x)) for x in col) for col in zip(columns, *rows, strict=True)]
    lines = ["   ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
             for row in (columns, *rows)]
    return "\n".join(lines)


def render_list(rows: Sequence[JobRow]) -> str:
    return render(LIST_COLUMNS, [r.cells() for r in rows])


WIDE_COLUMNS = (*LIST_COLUMNS, "MACHINE", "IMAGE", "SWEEP")


def _image(job: dict[str, Any]) -> str:
    containers = ((manifests.worker_spec(job).get("template") or {}).get("spec") or {}).get("containers") or [{}]
    return containers[0].get("image") or "-"


def render_list_wide(rows: Sequence[JobRow], jobs: Sequence[dict[str, Any]]) -> str:
    """`list -o wide`: the table plus each job's machine type, image and sweep."""
    cells = []
    for row, job in zip(rows, jobs, strict=True):
        meta = job.get("metadata") or {}
        machine = (meta.get("annotations") or {}).get(pod_template.ANNOTATION_MACHINE) or "-"
        sweep = (meta.get("labels") or {}).get(pod_template.LABEL_SWEEP) or "-"
        cells.append((*row.cells(), machine, _image(job), sweep))
    return render(WIDE_COLUMNS, cells)


def row_dict(row: JobRow, job: dict[str, Any]) -> dict[str, Any]:
    """A row as data for `-o json|yaml` (numbers as numbers, nodes split into running/min/max)."""
    lo, hi = manifests.min_max(job)
    meta = job.get("metadata") or {}
    return {
        "name": row.name, "kind": job.get("kind"), "namespace": meta.get("namespace"), "state": row.state,
        "nodes": {"running": int(row.nodes.split("/")[0]), "min": lo, "max": hi}, "gpu": row.gpu, "zone": row.zone,
        "age": row.age, "restarts": row.restarts,
        "machine": (meta.get("annotations") or {}).get(pod_template.ANNOTATION_MACHINE),
        "image": _image(job), "sweep": (meta.get("labels") or {}).get(pod_template.LABEL_SWEEP),
    }


def lighthouse_state(pods: Sequence[client.V1Pod]) -> str:
    """An in-place job's Lighthouse in a few words: without it no step commits (training-image/README.md)."""
    if not pods:
        return "missing (no Lighthouse pod: the groups wait for it; see EVENTS)"
    pod = max(pods, key=lambda p: str(p.metadata.creation_timestamp or ""))
    phase = (pod.status and pod.status.phase) or "?"
    ready = any(c.type == "Ready" and c.status == "True" for c in ((pod.status and pod.status.conditions) or []))
    where = f" on {pod.spec.node_name}" if pod.spec and pod.spec.node_name else ""
    return f"{pod.metadata.name} {phase}{', ready' if ready else ', not ready'}{where}"


def recovery(job: dict[str, Any], lighthouse: Sequence[client.V1Pod]) -> str:
    if recovery_of(job) == "inplace":
        return f"inplace (survivors keep training); Lighthouse: {lighthouse_state(lighthouse)}"
    return "restart (every worker restarts from the last checkpoint when a node comes or goes)"


def pod_restarts(pod: client.V1Pod) -> int:
    return sum(cs.restart_count or 0 for cs in ((pod.status and pod.status.container_statuses) or []))


def render_status(
    job: dict[str, Any],
    pods: Sequence[client.V1Pod],
    events: Sequence[client.CoreV1Event],
    node_labels,
    checkpoint: CheckpointInfo | None,
    now: datetime,
    progress: progress_summary.Summary | None = None,
    all_events: bool = False,
    lighthouse: Sequence[client.V1Pod] = (),
    used: str | None = None,
) -> str:
    meta = job.get("metadata") or {}
    ann = meta.get("annotations") or {}
    row = job_row(job, pods, node_labels, now)
    worker = manifests.worker_spec(job)
    container = ((((worker.get("template") or {}).get("spec") or {}).get("containers")) or [{}])[0]
    gpus = ((container.get("resources") or {}).get("limits") or {}).get(platform.GPU_RESOURCE, "?")
    lo, hi = manifests.min_max(job)
    if checkpoint is not None:
        ckpt = f"step {checkpoint.step} (read from {checkpoint.source})"
        seen = progress.last_checkpoint if progress is not None else None
        if seen is not None and seen.step == checkpoint.step and seen.wall is not None:
            ckpt += f", written {progress_summary.duration(now.timestamp() - seen.wall)} ago"
    else:
        # No store mounted and no checkpoint event in the logs: the job's own status is all we have.
        status = job.get("status") or {}
        since = status.get("startTime") or "not started"
        ckpt = f"none seen yet (job {row.state}, started {since}; the controller's status has no step)"
    fields = [
        ("Job", f"{row.name} ({job.get('kind')}, namespace {meta.get('namespace', '?')})"),
        ("State", row.state),
        ("Nodes", f"{running(pods)} running (min {lo}, max {hi})"),
        ("GPU", f"{row.gpu} x{gpus} per node, sized for {ann.get(pod_template.ANNOTATION_MACHINE, '?')}"
         if row.gpu != "cpu" else "none (a CPU job: " + ", ".join(
             f"{v} {k}" for k, v in ((container.get("resources") or {}).get("requests") or {}).items())
         + " per node)"),
        ("Zone", row.zone),
        ("Image", container.get("image", "?")),
        ("Checkpoints", ann.get(pod_template.ANNOTATION_CHECKPOINTS, "?")),
        ("Last checkpoint", ckpt),
        ("Age", f"{row.age}   Restarts: {row.restarts}"),
        *([("Used", used)] if used else []),  # usage.py: GPU-hours and their cost so far
        ("Recovery", recovery(job, lighthouse)),
    ]
    if progress is not None:  # the trainer's events (torchfleet/jobs/summary.py), after what the job says
        fields += [f for f in progress_summary.render(progress, now.timestamp()) if f[0] != "Last checkpoint"]
    if ann.get(pod_template.ANNOTATION_OVERRIDES):
        fields.append(("Overrides", ann[pod_template.ANNOTATION_OVERRIDES]))
    lines = [f"{label + ':':<17}{value}" for label, value in fields]
    pod_rows = []
    nodes: dict[str, dict[str, str] | None] = {}
    for pod in sorted(pods, key=lambda p: p.metadata.name):
        node = (pod.spec and pod.spec.node_name) or ""
        if node and node not in nodes:
            nodes[node] = node_labels(node)
        pod_rows.append((pod.metadata.name, (pod.status and pod.status.phase) or "?", node or "-",
                         str(pod_restarts(pod)), age(pod.metadata.creation_timestamp, now)))
    lines += ["", "PODS", render(("NAME", "PHASE", "NODE", "RESTARTS", "AGE"), pod_rows) if pod_rows else "  (none)"]
    node_rows = []
    for node, labels in nodes.items():
        if labels is None:
            node_rows.append((node, "?", "?", "?"))  # nodes are not readable with these credentials
        else:
            node_rows.append((node, labels.get(platform.LABEL_ZONE, "-"),
                              labels.get("node.kubernetes.io/instance-type", "-"),
                              labels.get(platform.LABEL_CAPACITY, "-")))
    lines += ["", "NODES",
              render(("NAME", "ZONE", "INSTANCE", "CAPACITY"), node_rows) if node_rows else "  (none)"]
    event_rows = []
    for ev in sorted(events, key=lambda e: _parse_time(e.last_timestamp or e.event_time or
                                                      (e.metadata and e.metadata.creation_timestamp))
                     or datetime.min.replace(tzinfo=UTC)):
        when = ev.last_timestamp or ev.event_time or (ev.metadata and ev.metadata.creation_timestamp)
        obj = ev.involved_object.name if ev.involved_object else "-"
        event_rows.append((age(when, now), ev.type or "-", ev.reason or "-", obj, (ev.message or "").strip()))
    lines += ["", "EVENTS",
              render(("AGE", "TYPE", "REASON", "OBJECT", "MESSAGE"),
                                event_rows if all_events else event_rows[-20:]) if event_rows else "  (none)"]
    return terminal_text.printable("\n".join(lines))
