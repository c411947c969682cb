"""What the manifest checks run on: every file in k8s/ and what `torchfleet synth --out` writes."""

from __future__ import annotations

from pathlib import Path

import yaml
from kubernetes_validate.utils import latest_version

from components.kube import K8S_DIR
from tests.harness import STACKS_DIR
from torchfleet.preview.runner import synth_file
from torchfleet.synth import write_manifests

# The oldest Kubernetes we support and the newest schema kubernetes-validate ships.
K8S_VERSIONS = ("1.30.0", latest_version())
STATIC_FILES = sorted(p for p in K8S_DIR.rglob("*.yaml") if p.name != "kustomization.yaml")


def load_one(path: Path) -> dict:
    (obj,) = [d for d in yaml.safe_load_all(path.read_text()) if d]
    return obj


def render(stack: str, out: Path) -> list[Path]:
    """Exactly what `torchfleet synth --stack-file stacks/Pulumi.<stack>.yaml --out out` writes."""
    result = synth_file(STACKS_DIR / f"Pulumi.{stack}.yaml")
    return write_manifests(result.kubernetes_objects(), out)
