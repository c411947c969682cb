"""``--workdir`` in a submit: the folder packed once (a sweep's jobs share it), its ConfigMaps made before any
job and removed again if the submit fails before a job owns them (commands.py, workdir.py).

Not shared across submits: a ConfigMap left by an earlier job of the same code could be deleted under the
new one. The garbage collector reads an object's owners, finds none alive and deletes it
(pkg/controller/garbagecollector/garbagecollector.go, attemptToDeleteItem), so an owner added while the
last old owner is being deleted can lose the race and its pods their code. Each submit makes its own set;
the same code under the same job name still reuses the folder unpacked on the shared store.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from components import spec as platform
from torchfleet.jobs import pod_template, workdir, workdir_pack
from torchfleet.jobs.errors import JobError
from torchfleet.jobs.spec import JobRequest


class Code:
    """``--workdir``: the folder packed once for the whole submit (a sweep's jobs share it)."""

    def __init__(self, args: argparse.Namespace) -> None:
        folder = getattr(args, "workdir", None)
        self.packed = workdir_pack.pack(folder) if folder is not None else None
        self.ref = (
            workdir.reference(args.name, self.packed.data, self.packed.sha256) if self.packed is not None else None
        )

    def notes(self) -> list[str]:
        if self.packed is None:
            return []
        p = self.packed
        return [
            *p.notes,
            f"{workdir_pack.FLAG}: {p.summary()}, packed to {len(p.data)} bytes "
            f"(sha256 {p.sha256[: workdir.SHORT]}; {p.how}) in {self.ref.parts} ConfigMap(s)",
        ]

    def config_maps(self, first: JobRequest, namespace: str) -> list[dict[str, Any]]:
        """The ConfigMaps, labelled with the job (FIRST, the only one) or the sweep (FIRST's)."""
        if self.packed is None:
            return []
        owner = {pod_template.LABEL_SWEEP: first.sweep} if first.sweep else {platform.LABEL_JOB: first.name}
        labels = {pod_template.MANAGED_BY: "torchfleet", **owner}
        return workdir.config_maps(self.ref, self.packed.data, namespace, labels)


def create_config_maps(jobs, maps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The workdir's ConfigMaps, before any job: a pod must find them. All or none."""
    made: list[dict[str, Any]] = []
    try:
        for document in maps:
            jobs.create_config_map(document)
            made.append(document)
    except JobError:
        remove_config_maps(jobs, made)
        raise
    return made


def remove_config_maps(jobs, maps: list[dict[str, Any]]) -> None:
    """Best effort after a failed submit, when no job owns them yet (one that does takes them along)."""
    for document in maps:
        try:
            jobs.delete_config_map(document)
        except JobError as error:
            print(f"warning: could not remove ConfigMap {document['metadata']['name']}: {error}", file=sys.stderr)
