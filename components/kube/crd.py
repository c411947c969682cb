"""Validate ElasticJob objects against our CRD's own schema (k8s/base/crds/elasticjob.yaml).

The API server prunes unknown fields of a structural schema and, with strict field validation
(kubectl's default since 1.27), rejects them; plain JSON Schema would let a typo such as
`rdzvEndpont` through. `strict_schema` closes every object that lists its properties and does
not preserve unknown fields, so a local check fails where the cluster would.
"""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

import jsonschema
import yaml

from components.kube import ELASTICJOB_CRD

API_VERSION = "elastic.pytorch.org/v1alpha1"
KIND = "ElasticJob"


def strict_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of an openAPIV3Schema with unknown fields refused where Kubernetes refuses them."""
    schema = copy.deepcopy(schema)

    def close(node: Any) -> None:
        if isinstance(node, dict):
            if "properties" in node and not node.get("x-kubernetes-preserve-unknown-fields"):
                node.setdefault("additionalProperties", False)
            for value in node.values():
                close(value)
        elif isinstance(node, list):
            for value in node:
                close(value)

    close(schema)
    return schema


@cache
def elasticjob_schema() -> dict[str, Any]:
    crd = yaml.safe_load(ELASTICJOB_CRD.read_text())
    (version,) = crd["spec"]["versions"]
    return strict_schema(version["schema"]["openAPIV3Schema"])


def validate_elasticjob(obj: dict[str, Any]) -> list[str]:
    """Every problem with an ElasticJob, each as '<path>: <message>'; empty when valid."""
    problems = []
    if obj.get("apiVersion") != API_VERSION or obj.get("kind") != KIND:
        got = f"{obj.get('apiVersion')} {obj.get('kind')}"
        problems.append(f"apiVersion/kind: expected {API_VERSION} {KIND}, got {got}")
    validator = jsonschema.Draft7Validator(elasticjob_schema())
    for error in sorted(validator.iter_errors(obj), key=lambda e: list(e.path)):
        where = ".".join(str(p) for p in error.path) or "(object)"
        problems.append(f"{where}: {error.message}")
    return problems
