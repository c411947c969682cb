"""Validate a job against its operator's CRD schema before it is sent.

Two kinds of problem, both reported before anything reaches the cluster:
- the schema refuses it (the API server would answer 422);
- the schema does not declare a field: the API server would silently prune it (structural
  schemas drop unknown fields), so a setting would vanish without an error.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from torchfleet.jobs.errors import UsageError
from torchfleet.jobs.pytorchjob_schema import PYTORCHJOB_SCHEMA


def _elasticjob_crd_path() -> Path:
    from components.kube import ELASTICJOB_CRD

    return Path(ELASTICJOB_CRD)


@functools.cache
def elasticjob_schema() -> dict[str, Any]:
    """versions[0].schema.openAPIV3Schema of our ElasticJob CRD (k8s/base/crds/elasticjob.yaml)."""
    path = _elasticjob_crd_path()
    if not path.is_file():
        raise UsageError(f"cannot validate the ElasticJob: the CRD file {path} is missing from this checkout")
    crd = yaml.safe_load(path.read_text())
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def schema_for(kind: str) -> dict[str, Any]:
    if kind == "ElasticJob":
        return elasticjob_schema()
    if kind == "PyTorchJob":
        return PYTORCHJOB_SCHEMA
    raise ValueError(f"no schema for kind {kind!r}")


def unknown_fields(obj: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Paths of fields the structural schema does not declare (the API server would prune them)."""
    found: list[str] = []
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return found
    if isinstance(obj, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        if path in ("", ".metadata") and schema.get("type") == "object" and props is None:
            return found  # ObjectMeta is validated by the API server itself
        for key, value in obj.items():
            sub = f"{path}.{key}"
            if props is not None and key in props:
                found += unknown_fields(value, props[key], sub)
            elif isinstance(extra, dict):
                found += unknown_fields(value, extra, sub)
            elif extra is True:
                continue
            else:
                found.append(sub)
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(obj):
            found += unknown_fields(item, schema["items"], f"{path}[{i}]")
    return found


def _pytorchjob_rules(job: dict[str, Any]) -> list[str]:
    # What the training operator's own validation refuses (pytorch_validation.go, v1.9.x),
    # which the CRD schema alone does not say.
    problems = []
    spec = job.get("spec") or {}
    for rtype, rspec in (spec.get("pytorchReplicaSpecs") or {}).items():
        if rtype not in ("Master", "Worker"):
            problems.append(f".spec.pytorchReplicaSpecs.{rtype}: replica type must be Master or Worker")
        containers = (((rspec or {}).get("template") or {}).get("spec") or {}).get("containers") or []
        if not any(c.get("name") == "pytorch" for c in containers):
            problems.append(f".spec.pytorchReplicaSpecs.{rtype}: needs a container named 'pytorch'")
        if any(not c.get("image") for c in containers):
            problems.append(f".spec.pytorchReplicaSpecs.{rtype}: every container needs an image")
        if rtype == "Master" and (rspec or {}).get("replicas", 1) != 1:
            problems.append(".spec.pytorchReplicaSpecs.Master.replicas: must be 1")
    if spec.get("nprocPerNode") is not None and (spec.get("elasticPolicy") or {}).get("nProcPerNode") is not None:
        problems.append(".spec.elasticPolicy.nProcPerNode: deprecated; set only .spec.nprocPerNode")
    return problems


def _elasticjob_rules(job: dict[str, Any]) -> list[str]:
    spec = job.get("spec") or {}
    containers = ((((spec.get("replicaSpecs") or {}).get("Worker") or {}).get("template") or {})
                  .get("spec") or {}).get("containers") or []
    if not any(c.get("name") == "elasticjob-worker" for c in containers):
        # The controller reads exit codes only from this container (training-image/README.md).
        return [".spec.replicaSpecs.Worker: needs a container named 'elasticjob-worker'"]
    return []


def problems(job: dict[str, Any]) -> list[str]:
    """Every reason the operator would refuse the job or drop part of it; empty if none."""
    schema = schema_for(job.get("kind", ""))
    found = []
    validator = jsonschema.Draft7Validator(schema)
    for error in sorted(validator.iter_errors(job), key=lambda e: list(e.absolute_path)):
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path) or "."
        found.append(f"{where}: {error.message}")
    for path in unknown_fields(job, schema):
        found.append(f"{path}: not in the {job['kind']} schema; the API server would drop it")
    mm = job.get("spec") or {}
    policy = mm.get("elasticPolicy") or mm
    lo, hi = policy.get("minReplicas"), policy.get("maxReplicas")
    if isinstance(lo, int) and isinstance(hi, int) and lo > hi:
        found.append(f".spec: minReplicas ({lo}) exceeds maxReplicas ({hi})")
    found += _pytorchjob_rules(job) if job.get("kind") == "PyTorchJob" else _elasticjob_rules(job)
    return found


def validate(job: dict[str, Any]) -> None:
    found = problems(job)
    if found:
        name = (job.get("metadata") or {}).get("name")
        raise UsageError(f"{job.get('kind')} {name} does not pass its CRD schema:\n  - " + "\n  - ".join(found))
