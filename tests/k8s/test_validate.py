"""Every manifest passes kubernetes-validate --strict (1.30 and the newest schema); ElasticJobs
pass our own CRD's schema, and their pod templates pass as Pods."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import pytest
from kubernetes_validate.utils import SchemaNotFoundError

from components.kube import K8S_DIR, crd
from tests.harness import STACKS
from tests.k8s.rendered import K8S_VERSIONS, STATIC_FILES, load_one, render


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


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("path", STATIC_FILES, ids=lambda p: str(p.relative_to(K8S_DIR)))
def test_static_file_is_valid(path: Path, version: str):
    assert problems_of(load_one(path), version) == []


@pytest.fixture(scope="module", params=STACKS)
def rendered(request, tmp_path_factory) -> list[Path]:
    return render(request.param, tmp_path_factory.mktemp(request.param))


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_rendered_manifests_are_valid(rendered: list[Path], version: str):
    assert rendered
    problems = {p.name: problems_of(load_one(p), version) for p in rendered}
    assert {name: found for name, found in problems.items() if found} == {}


# The checks above must be able to fail: each of these breaks one thing.
def _broken_statefulset() -> dict:
    obj = load_one(K8S_DIR / "etcd" / "statefulset.yaml")
    obj["spec"]["replica"] = 3
    return obj


def _elasticjob(**spec_changes) -> dict:
    obj = load_one(K8S_DIR / "examples" / "imagenet.yaml")
    obj["spec"].update(spec_changes)
    return obj


def _elasticjob_without(key: str) -> dict:
    obj = _elasticjob()
    del obj["spec"][key]
    return obj


def _elasticjob_bad_pod() -> dict:
    obj = _elasticjob()
    obj["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["imagePullPolcy"] = "Always"
    return obj


@pytest.mark.parametrize(
    ("broken", "expected"),
    [
        (_broken_statefulset, "'replica' was unexpected"),
        (lambda: _elasticjob_without("rdzvEndpoint"), "'rdzvEndpoint' is a required property"),
        (lambda: _elasticjob(rdzvEndpont="etcd:2379"), "'rdzvEndpont' was unexpected"),
        (lambda: _elasticjob(minReplicas=0), "minReplicas: 0 is less than the minimum of 1"),
        (lambda: _elasticjob(replicaSpecs={}), "replicaSpecs: {} should be non-empty"),
        (_elasticjob_bad_pod, "'imagePullPolcy' was unexpected"),
    ],
)
def test_validation_catches(broken, expected):
    problems = problems_of(broken(), K8S_VERSIONS[0])
    assert any(expected in p for p in problems), problems
