"""The real `kubectl kustomize` builds k8s/ and every overlay under it, and what it builds is valid.

Regression: `kubectl kustomize k8s/examples/kind` failed with `cycle detected: candidate root ...
contains visited root`, because the overlay lived inside its own base (k8s/). The base is now
k8s/base/ and the overlays sit beside it in k8s/overlays/.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from components.kube import K8S_BASE, K8S_ROOT, static
from components.spec import LABEL_ZONE
from tests.k8s.rendered import K8S_VERSIONS, load_one, problems_of

KUBECTL = shutil.which("kubectl")
# GitHub's ubuntu runners and this project's machines have kubectl; elsewhere the build is skipped, said so.
needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH: cannot run `kubectl kustomize`")

KUSTOMIZATIONS = sorted(p.parent for p in K8S_ROOT.rglob("kustomization.yaml"))


def kustomize(directory: Path) -> list[dict]:
    """The objects `kubectl kustomize <directory>` prints; fails the test with kubectl's own error."""
    proc = subprocess.run(
        [KUBECTL, "kustomize", str(directory)], capture_output=True, text=True, timeout=60, check=False
    )
    if proc.returncode != 0:
        pytest.fail(f"kubectl kustomize {directory} failed (exit {proc.returncode}): {proc.stderr.strip()}")
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def identity(obj: dict) -> tuple[str, str]:
    return obj["kind"], obj["metadata"]["name"]


def base_objects() -> list[dict]:
    return [static.load(f) for f in static.kustomization_files()]


def test_every_kustomization_is_found():
    assert {str(d.relative_to(K8S_ROOT)) for d in KUSTOMIZATIONS} == {".", "base", "kubeflow", "overlays/kind"}


@needs_kubectl
@pytest.mark.parametrize("directory", KUSTOMIZATIONS, ids=lambda d: str(d.relative_to(K8S_ROOT.parent)))
def test_kustomize_builds_valid_manifests(directory: Path):
    objects = kustomize(directory)
    assert objects, f"{directory} builds nothing"
    for version in K8S_VERSIONS:
        problems = {identity(o): problems_of(o, version) for o in objects}
        assert {k: v for k, v in problems.items() if v} == {}, version


@needs_kubectl
def test_k8s_root_builds_exactly_the_base():
    built = kustomize(K8S_ROOT)
    assert sorted(map(identity, built)) == sorted(map(identity, base_objects()))
    assert built == kustomize(K8S_BASE)


@needs_kubectl
def test_kind_overlay_is_the_base_with_one_etcd_member_and_a_hostpath_volume():
    built = {identity(o): o for o in kustomize(K8S_ROOT / "overlays" / "kind")}
    assert set(built) == set(map(identity, base_objects())) | {("PersistentVolume", "elastic-job-shared-data")}
    volume = built["PersistentVolume", "elastic-job-shared-data"]
    assert volume == load_one(K8S_ROOT / "overlays" / "kind" / "shared-volume-hostpath.yaml")
    etcd = built["StatefulSet", "etcd"]
    assert etcd["spec"]["replicas"] == 1
    spread = etcd["spec"]["template"]["spec"].get("topologySpreadConstraints", [])
    assert LABEL_ZONE not in {c["topologyKey"] for c in spread}  # kind nodes carry no zone label


@needs_kubectl
def test_kustomize_check_fails_on_an_overlay_inside_its_base(tmp_path):
    """The check can fail: the old layout (an overlay inside its own base) is refused by kubectl."""
    base = tmp_path / "k8s"
    shutil.copytree(K8S_BASE, base)
    overlay = base / "examples" / "kind"
    overlay.mkdir(parents=True)
    (overlay / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../..\n"
    )
    with pytest.raises(pytest.fail.Exception, match="cycle detected"):
        kustomize(overlay)
