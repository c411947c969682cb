"""Every manifest passes kubernetes-validate --strict (1.30 and the newest schema); ElasticJobs
pass our own CRD's schema, and their pod templates pass as Pods."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.kube import K8S_BASE, K8S_EXAMPLES, K8S_ROOT
from tests.harness import STACKS
from tests.k8s.rendered import K8S_VERSIONS, STATIC_FILES, load_one, problems_of, render


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("path", STATIC_FILES, ids=lambda p: str(p.relative_to(K8S_ROOT)))
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
    obj = load_one(K8S_BASE / "etcd" / "statefulset.yaml")
    obj["spec"]["replica"] = 3
    return obj


def _elasticjob(**spec_changes) -> dict:
    obj = load_one(K8S_EXAMPLES / "imagenet.yaml")
    obj["spec"].update(spec_changes)
    return obj


def _elasticjob_without(key: str) -> dict:
    obj = _elasticjob()
    del obj["spec"][key]
    return obj


def _elasticjob_without_replicas() -> dict:
    # Regression (issue 12): the controller dereferences replicaSpecs.*.replicas unchecked.
    obj = _elasticjob()
    del obj["spec"]["replicaSpecs"]["Worker"]["replicas"]
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
        (_elasticjob_without_replicas, "replicaSpecs.Worker: 'replicas' is a required property"),
        (_elasticjob_bad_pod, "'imagePullPolcy' was unexpected"),
    ],
)
def test_validation_catches(broken, expected):
    problems = problems_of(broken(), K8S_VERSIONS[0])
    assert any(expected in p for p in problems), problems
