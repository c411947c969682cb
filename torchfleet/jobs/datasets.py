"""`--dataset NAME[:PATH]`: mount one of the stack's datasets (torchfleet:datasets) read-only in every pod.

The stack's training layer made a read-only claim `dataset-NAME` per dataset (components/kube/datasets.py);
a job mounts it at PATH (default /data/NAME). NAME is checked against the stack file before anything
is sent, so a typo is an exit-2 error naming the datasets there are, not a pod stuck in
ContainerCreating. On GKE the pods also carry the annotations that inject the Cloud Storage FUSE sidecar
and set its resources, and the pod's own requests leave room for it (sized_for).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, replace
from typing import Any

from components.kube import datasets as kube_datasets
from components.spec.datasets import LOCAL_DATA_HINT
from torchfleet.jobs.errors import UsageError
from torchfleet.jobs.mounts import _within, normalize_mount
from torchfleet.jobs.sizing import beside_sidecar
from torchfleet.jobs.spec import JobRequest

FLAG = "--dataset"
DEFAULT_ROOT = "/data"
VOLUME_PREFIX = "dataset-"


@dataclass(frozen=True)
class DatasetMount:
    name: str
    path: str
    annotations: tuple[tuple[str, str], ...] = ()
    sidecar: tuple[int, int] = (0, 0)  # what the sidecar the cloud injects requests: CPU millicores, MiB

    @property
    def claim(self) -> str:
        return kube_datasets.claim_name(self.name)

    @property
    def volume(self) -> str:
        return f"{VOLUME_PREFIX}{self.name}"


def parse_dataset(item: str, declared: tuple[str, ...] | None, cloud: str, stack: str | None,
                  shared_mount: str) -> DatasetMount:
    """``NAME`` or ``NAME:PATH``, checked against the stack's datasets (``declared``; None: no --stack)."""
    name, sep, path = item.partition(":")
    if declared is None:
        raise UsageError(f"{FLAG}: datasets are declared per stack (torchfleet:datasets); give --stack so "
                         f"{name or item!r} can be checked and mounted")
    if not name:
        raise UsageError(f"{FLAG}: expected NAME or NAME:PATH, e.g. imagenet or imagenet:/data/in; got {item!r}")
    if name not in declared:
        close = difflib.get_close_matches(name, declared, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        if not declared and cloud == "local":
            raise UsageError(f"{FLAG}: stack {stack} has no datasets: {LOCAL_DATA_HINT}")
        listed = ", ".join(declared) if declared else "none (add torchfleet:datasets to the stack file)"
        raise UsageError(f"{FLAG}: stack {stack} has no dataset {name!r}; {hint}its datasets: {listed}")
    if sep and not path:
        raise UsageError(f"{FLAG}: {item!r} names no path after ':'; give NAME:/absolute/path or just {name}")
    try:
        where = normalize_mount(path or f"{DEFAULT_ROOT}/{name}")
    except UsageError as error:
        raise UsageError(str(error).replace("--mount:", f"{FLAG} {name}:", 1).replace(
            "mount the shared store elsewhere", "mount the dataset elsewhere")) from None
    if _within(where, shared_mount) or _within(shared_mount, where):
        raise UsageError(f"{FLAG}: {where} overlaps the shared store at {shared_mount} (--mount), and one mount "
                         f"would hide the other; use another path, e.g. {DEFAULT_ROOT}/{name}")
    annotations = kube_datasets.POD_ANNOTATIONS.get(cloud, {})
    return DatasetMount(name=name, path=where, annotations=tuple(sorted(annotations.items())),
                        sidecar=kube_datasets.SIDECAR_REQUESTS.get(cloud, (0, 0)))


def sized_for(req: JobRequest, dataset: DatasetMount | None) -> JobRequest:
    """The request with its pods' requests less what the dataset's sidecar requests (sizing.beside_sidecar)."""
    if dataset is None or dataset.sidecar == (0, 0):
        return req
    return replace(req, sizing=beside_sidecar(req.sizing, *dataset.sidecar))


def _pod_templates(node: Any) -> list[dict[str, Any]]:
    """Every pod template in a job manifest (an Indexed Job's, an ElasticJob's or a PyTorchJob's replicas)."""
    found: list[dict[str, Any]] = []
    if isinstance(node, dict):
        template = node.get("template")
        if isinstance(template, dict) and isinstance(template.get("spec"), dict) and "containers" in template["spec"]:
            found.append(template)
        for key, value in node.items():
            if key != "template":
                found.extend(_pod_templates(value))
    elif isinstance(node, list):
        for value in node:
            found.extend(_pod_templates(value))
    return found


def mount_into(job: dict[str, Any], dataset: DatasetMount | None) -> dict[str, Any]:
    """The job with the dataset's claim mounted read-only into every container of every pod template."""
    if dataset is None:
        return job
    templates = _pod_templates(job)
    if not templates:
        raise ValueError(f"no pod template in {job.get('kind')} to mount dataset {dataset.name} into")
    for template in templates:
        spec = template["spec"]
        spec.setdefault("volumes", []).append(
            {"name": dataset.volume, "persistentVolumeClaim": {"claimName": dataset.claim, "readOnly": True}}
        )
        for container in spec["containers"]:
            container.setdefault("volumeMounts", []).append(
                {"name": dataset.volume, "mountPath": dataset.path, "readOnly": True}
            )
        metadata = template.setdefault("metadata", {})
        # the label the storage egress policy selects (components/kube/datasets.py): only these pods get it
        metadata.setdefault("labels", {})[kube_datasets.LABEL_MOUNTS_DATASET] = "true"
        if dataset.annotations:
            metadata.setdefault("annotations", {}).update(dict(dataset.annotations))
    return job
