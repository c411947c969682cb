"""Whose folder of the shared store a job's pods mount: ``subPath: <maker's folder>/<job>`` (issue 30).

A job's folder outlives the job (its checkpoints, outputs and --workdir code are the researcher's), while a
job name is its maker's only while the job exists (validatingadmissionpolicy-owner.yaml). With ``subPath: <job>``
whoever later submitted a job of the same name mounted the old folder and read or rewrote it. Under its maker's
folder it stays the maker's: the researcher limits admit a store mount only at the folder of the object's own
``torchfleet.io/created-by`` record (which the owner policy holds to the authenticated username), joined to its job
(k8s/base/cluster/validatingadmissionpolicy-researcher-limits.yaml, variable storePath, the same mapping in CEL).

The mapping, username -> folder: '@' + the username with '%' -> '%25', then '/' -> '%2F', then ':' -> '%3A'
(percent-escaping, '%' first, so it is reversible: two usernames never share a folder), and the result must be
1-254 characters of ``A-Z a-z 0-9 . _ @ % + = , ~ -`` (ASCII only, no space, nothing a shell or an SMB share treats
specially), else it is refused: the CLI says so before anything is made, the policy refuses the mount. No '/'
is left, so the folder is one path element, and the '@' in front makes it neither '.' nor '..' nor a job's
folder of the old ``<job>`` layout (object names never hold '@'). EKS's default names
(``arn:aws:sts::111122223333:assumed-role/Role/alice``), GKE's and AKS's e-mail-like names map; case is kept
(Alice and alice are two users to the API server). Only the CEL string functions Kubernetes 1.35 has are used
(replace, matches: https://kubernetes.io/docs/reference/using-api/cel/#kubernetes-string-library).

``python -m torchfleet.jobs.store_folder USERNAME`` prints the folder (docs/jobs.md: an administrator moving a
job's folder of the old layout).
"""

from __future__ import annotations

import re
import sys
from typing import Any

from torchfleet.jobs.errors import UsageError

SHARED_VOLUME = "shared"  # pod_template.SHARED_VOLUME (not imported: pod_template imports this module)
PREFIX = "@"
# The policy's regex is the same class: ^@[A-Za-z0-9._@%+=,~-]{1,254}$ (RE2, the same meaning in Python's re).
_ALLOWED = re.compile(r"[A-Za-z0-9._@%+=,~-]{1,254}")
_ESCAPES = (("%", "%25"), ("/", "%2F"), (":", "%3A"))


def folder(username: str) -> str:
    """The store folder of USERNAME's jobs, or a UsageError saying why this username has none."""
    escaped = username
    for old, new in _ESCAPES:
        escaped = escaped.replace(old, new)
    if not _ALLOWED.fullmatch(escaped):
        raise UsageError(
            f"your cluster username {username!r} cannot name a folder of the shared store: after '%', '/' and ':' "
            f"are escaped it must be 1-254 of the characters A-Z a-z 0-9 . _ @ % + = , ~ - (the admission policy "
            "refuses any other); ask an administrator to map you to such a username")
    return PREFIX + escaped


def sub_path(username: str, job: str) -> str:
    """The subPath of JOB's folder for its maker USERNAME."""
    return f"{folder(username)}/{job}"


def pod_templates(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The pod templates of a workload (a Job's, a Deployment's, each replica's of an ElasticJob/PyTorchJob).
    Here and not in cluster.py, which imports this module."""
    spec = document.get("spec") or {}
    if document["kind"] in ("Job", "Deployment") and "template" in spec:
        return [spec["template"]]
    replicas = spec.get("replicaSpecs") or spec.get("pytorchReplicaSpecs") or {}
    return [r["template"] for r in replicas.values() if "template" in r]


def _pod_specs(document: dict[str, Any]) -> list[dict[str, Any]]:
    if document.get("kind") == "Pod":
        return [document.get("spec") or {}]
    return [t.get("spec") or {} for t in pod_templates(document)]


def place(document: dict[str, Any], username: str) -> dict[str, Any]:
    """DOCUMENT (changed in place) with each shared-store mount of the builders' form, ``subPath: <job>``, under
    USERNAME's folder: ``<folder>/<job>``. A subPath that already names a folder (a reader or TensorBoard pod that
    copied its job's mount) is kept: the policy admits it only if it is the creator's own."""
    for spec in _pod_specs(document):
        for c in [*spec.get("initContainers", []), *spec.get("containers", []), *spec.get("ephemeralContainers", [])]:
            for m in c.get("volumeMounts") or []:
                sub = m.get("subPath")
                if m.get("name") == SHARED_VOLUME and sub and "/" not in sub:
                    m["subPath"] = sub_path(username, sub)
    return document


def job_sub_path(job: dict[str, Any] | None) -> str | None:
    """The subPath of a job object's own store mount (its first template's first container), when it names its
    maker's folder; None for a job of the old ``<job>`` layout, or none."""
    if not job:
        return None
    specs = _pod_specs(job)
    containers = (specs[0].get("containers") if specs else None) or [{}]
    for m in containers[0].get("volumeMounts") or []:
        if m.get("name") == SHARED_VOLUME and "/" in (m.get("subPath") or ""):
            return m["subPath"]
    return None


def follow(pod: dict[str, Any], job: dict[str, Any] | None) -> dict[str, Any]:
    """A reader or TensorBoard POD (changed in place) mounting the folder JOB's own pods mount, where the job still
    exists and names one: an administrator's reader (exempt from the policy) reads the maker's folder, not one of
    the administrator's own; another researcher's is refused by the policy (the folder is not his). Else the
    folder stays the one JobClient.stamped gives: the creator's own."""
    sub = job_sub_path(job)
    if sub:
        for c in pod["spec"]["containers"]:
            for m in c.get("volumeMounts") or []:
                if m.get("name") == SHARED_VOLUME:
                    m["subPath"] = sub
    return pod


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m torchfleet.jobs.store_folder USERNAME")
    try:
        print(folder(sys.argv[1]))
    except UsageError as error:
        sys.exit(str(error))
