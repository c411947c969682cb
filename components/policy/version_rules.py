"""The pinned-versions rule: charts, remote kustomizations and container images are pinned."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from components.policy.model import UNKNOWN, Limits, Resource, Violation, _v

# Helm takes a version constraint ("^1.2", ">=1", "1.x", "*") and picks the newest match: only an
# exact version is pinned. https://helm.sh/docs/intro/using_helm/#helm-install-installing-a-package
_EXACT_VERSION = re.compile(r"^v?\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.+-]+)?$")
_GIT_REF = re.compile(r"^(v?\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.+-]+)?|[0-9a-f]{40})$")
CHART_TYPES = ("kubernetes:helm.sh/v3:Release", "kubernetes:helm.sh/v4:Chart")
KUSTOMIZE_TYPES = ("kubernetes:kustomize/v2:Directory", "kubernetes:kustomize:Directory")
CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")


def image_is_pinned(image: Any) -> bool:
    """A digest, or a tag other than `latest` (a registry port is not a tag)."""
    if not isinstance(image, str) or not image:
        return False
    if "@sha256:" in image:
        return True
    last = image.rsplit("/", 1)[-1]
    tag = last.split(":", 1)[1] if ":" in last else ""
    return bool(tag) and tag != "latest"


def _images(obj: Any) -> Iterator[str]:
    """Every container image of a Kubernetes object, at any depth (pod templates, CRD replica specs)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in CONTAINER_LISTS and isinstance(v, list):
                for c in v:
                    if isinstance(c, dict) and "image" in c:
                        yield c["image"]
            yield from _images(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _images(v)


def _remote_ref(directory: str) -> str | None:
    match = re.search(r"[?&]ref=([^&]+)", directory)
    return match.group(1) if match else None


def pinned_versions(resources: list[Resource], limits: Limits) -> Iterator[Violation]:
    """What runs must not change under us: charts, kustomize refs and images are pinned."""
    rule = "pinned-versions"
    for r in resources:
        i, t = r["inputs"], r["type"]
        if t in CHART_TYPES:
            version = i.get("version")
            if version is UNKNOWN:
                continue
            if not isinstance(version, str) or not _EXACT_VERSION.match(version):
                yield _v(rule, r, f"chart {i.get('chart')!r} version {version!r} is not an exact version")
        elif t in KUSTOMIZE_TYPES:
            directory = i.get("directory")
            if isinstance(directory, str) and ("://" in directory or directory.startswith("github.com/")):
                ref = _remote_ref(directory)
                if not ref or not _GIT_REF.match(ref):
                    yield _v(rule, r, f"remote kustomization {directory!r} is not pinned to a tag or commit")
        elif t.startswith("kubernetes:"):
            for image in _images(i):
                if image is not UNKNOWN and not image_is_pinned(image):
                    yield _v(rule, r, f"image {image!r} has no pinned tag or digest")

