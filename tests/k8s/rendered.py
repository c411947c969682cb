"""What the manifest checks run on: every object file in k8s/ (base, overlays, examples) and what
`torchfleet synth --out` writes."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import yaml
from kubernetes_validate.utils import SchemaNotFoundError, latest_version

from components.kube import K8S_ROOT, crd
from tests.harness import STACKS_DIR
from torchfleet.preview.runner import synth_file
from torchfleet.synth import write_manifests

# The oldest Kubernetes we support and the newest schema kubernetes-validate ships.
K8S_VERSIONS = ("1.30.0", latest_version())
STATIC_FILES = sorted(p for p in K8S_ROOT.rglob("*.yaml") if p.name != "kustomization.yaml")


def load_one(path: Path) -> dict:
    (obj,) = [d for d in yaml.safe_load_all(path.read_text()) if d]
    return obj


def render(stack: str, out: Path) -> list[Path]:
    """Exactly what `torchfleet synth --stack-file stacks/Pulumi.<stack>.yaml --out out` writes."""
    result = synth_file(STACKS_DIR / f"Pulumi.{stack}.yaml")
    return write_manifests(result.kubernetes_objects(), out)


def problems_of(obj: dict, version: str) -> list[str]:
    """kubernetes-validate --strict, and our CRD schema for ElasticJobs."""
    if obj.get("kind") == crd.KIND:
        found = crd.validate_elasticjob(obj)
        for name, replica in obj["spec"]["replicaSpecs"].items():
            template = replica["template"]
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"{obj['metadata']['name']}-{name.lower()}", **template.get("metadata", {})},
                "spec": template["spec"],
            }
            found += [f"replicaSpecs.{name}.template: {p}" for p in problems_of(pod, version)]
        return found
    try:
        kubernetes_validate.validate(obj, version, strict=True)
    except kubernetes_validate.ValidationError as error:
        return [f"{'.'.join(str(p) for p in error.path)}: {error.message}"]
    except SchemaNotFoundError as error:
        return [f"no schema for {obj.get('apiVersion')} {obj.get('kind')} in {version}: {error}"]
    return []
