"""crd.py: ElasticJobs checked against our CRD's schema, as strictly as the API server does."""

from __future__ import annotations

import pytest

from components.kube import crd, manifests


def job(**spec_changes) -> dict:
    spec = {
        "rdzvEndpoint": manifests.etcd_endpoint("elastic-job"),
        "minReplicas": 1,
        "maxReplicas": 2,
        "replicaSpecs": {
            "Worker": {
                "replicas": 2,
                "restartPolicy": "ExitCode",
                "template": {"spec": {"containers": [{"name": "elasticjob-worker", "image": "x:1"}]}},
            }
        },
    }
    spec.update(spec_changes)
    return {"apiVersion": crd.API_VERSION, "kind": crd.KIND, "metadata": {"name": "j"}, "spec": spec}


def test_a_good_job_has_no_problem():
    assert crd.validate_elasticjob(job()) == []


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        ({**job(), "kind": "Job"}, "apiVersion/kind: expected elastic.pytorch.org/v1alpha1 ElasticJob"),
        (job(maxReplicas="2"), "spec.maxReplicas: '2' is not of type 'integer'"),
        (job(RunPolicy={"cleanPodPolicy": "Sometimes"}), "spec.RunPolicy.cleanPodPolicy: 'Sometimes' is not one of"),
        # Regression (issue 19): the controller never reads a spec-level cleanPodPolicy (its key is RunPolicy)
        (job(cleanPodPolicy="Running"), "spec: Additional properties are not allowed ('cleanPodPolicy' was"),
        (job(rdzvEndpoint=""), "spec.rdzvEndpoint: '' should be non-empty"),
        (job(replicaSpecs={"Worker": {"replicas": 1}}), "spec.replicaSpecs.Worker: 'template' is a required property"),
        (job(typo=1), "spec: Additional properties are not allowed ('typo' was unexpected)"),
    ],
)
def test_problems_name_the_path(obj, expected):
    assert any(p.startswith(expected) for p in crd.validate_elasticjob(obj)), crd.validate_elasticjob(obj)


def test_pod_templates_keep_unknown_fields():
    obj = job()
    obj["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["anything"] = {"goes": True}
    assert crd.validate_elasticjob(obj) == []


def test_strict_schema_closes_listed_objects_only():
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "object", "properties": {"b": {"type": "string"}}},
            "open": {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {}},
            "map": {"type": "object"},
        },
    }
    strict = crd.strict_schema(schema)
    assert strict["additionalProperties"] is False
    assert strict["properties"]["a"]["additionalProperties"] is False
    assert "additionalProperties" not in strict["properties"]["open"]
    assert "additionalProperties" not in strict["properties"]["map"]
    assert "additionalProperties" not in schema  # the input is not changed
