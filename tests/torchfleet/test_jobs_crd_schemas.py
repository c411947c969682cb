"""The CRD schemas the CLI validates against close what the operators' CRDs close (issue 12, item 5).

- ElasticJob: `replicaSpecs.*.replicas` is required by our CRD (the controller dereferences it
  unchecked), and the CLI refuses a job without it, as the API server would.
- PyTorchJob: `runPolicy.schedulingPolicy` and `elasticPolicy.metrics[]` are closed as the
  training-operator v1.9.x CRD closes them: unknown keys are refused, valid ones accepted.
"""

from __future__ import annotations

import copy

import pytest

from components.kube import crd
from torchfleet.jobs import manifests, schema
from torchfleet.jobs import target as targets
from torchfleet.jobs.errors import UsageError
from torchfleet.jobs.spec import build_request


def _job(operator: str) -> dict:
    t = targets.Target(**{**targets.defaults().__dict__, "operator": operator})
    req = build_request(t, name="resnet", gpu="t4", nodes="1:2", gpus_per_node=1, image="r/t:1",
                        command=["python", "train.py"])
    return manifests.build(req, t)


# ---------------------------------------------------------------- ElasticJob: replicas required


def test_elasticjob_without_replicas_is_refused_by_the_crd_and_the_cli():
    job = _job("torchelastic")
    assert crd.validate_elasticjob(job) == [] and schema.problems(job) == []
    del job["spec"]["replicaSpecs"]["Worker"]["replicas"]
    assert "spec.replicaSpecs.Worker: 'replicas' is a required property" in crd.validate_elasticjob(job)
    assert ".spec.replicaSpecs.Worker: 'replicas' is a required property" in schema.problems(job)
    with pytest.raises(UsageError, match="'replicas' is a required property"):
        schema.validate(job)


def test_elasticjob_replicas_must_be_a_count():
    job = _job("torchelastic")
    job["spec"]["replicaSpecs"]["Worker"]["replicas"] = -1
    assert any("replicas: -1 is less than the minimum of 0" in p for p in crd.validate_elasticjob(job))


# ---------------------------------------------------------------- PyTorchJob: closed like the v1.9.x CRD

SCHEDULING_OK = {
    "minAvailable": 2,
    "minResources": {"nvidia.com/gpu": 2, "memory": "64Gi", "cpu": "500m"},
    "priorityClass": "torchfleet-training",
    "queue": "research",
    "scheduleTimeoutSeconds": 300,
}

METRIC_OK = [
    {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}},
    {"type": "Pods", "pods": {"metric": {"name": "samples_per_second", "selector": {"matchLabels": {"a": "b"}}},
                              "target": {"type": "AverageValue", "averageValue": "1k"}}},
    {"type": "External", "external": {"metric": {"name": "queue_depth"}, "target": {"type": "Value", "value": 3}}},
    {"type": "Object", "object": {"describedObject": {"apiVersion": "v1", "kind": "Service", "name": "etcd"},
                                  "metric": {"name": "requests"}, "target": {"type": "Value", "value": "10"}}},
    {"type": "ContainerResource", "containerResource": {"container": "pytorch", "name": "memory",
                                                        "target": {"type": "AverageValue", "averageValue": "8Gi"}}},
]


def _pytorchjob(scheduling=None, metrics=None) -> dict:
    job = copy.deepcopy(_job("kubeflow"))
    if scheduling is not None:
        job["spec"].setdefault("runPolicy", {})["schedulingPolicy"] = scheduling
    if metrics is not None:
        job["spec"]["elasticPolicy"]["metrics"] = metrics
    return job


def test_valid_scheduling_policy_and_metrics_are_accepted():
    assert schema.problems(_pytorchjob(SCHEDULING_OK, METRIC_OK)) == []


REFUSED = [
    ("scheduling typo", {"minAvaliable": 2}, None,
     ".spec.runPolicy.schedulingPolicy.minAvaliable: not in the PyTorchJob"),
    ("scheduling wrong type", {"minAvailable": "two"}, None, "'two' is not of type 'integer'"),
    ("scheduling bad quantity", {"minResources": {"memory": "64 gigs"}}, None, "does not match"),
    ("metric unknown key", None, [{"type": "Resource", "resourse": {}}], ".spec.elasticPolicy.metrics[0].resourse"),
    ("metric without type", None, [{"resource": {"name": "cpu", "target": {"type": "Utilization"}}}],
     "'type' is a required property"),
    ("metric target typo", None,
     [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilisation": 1}}}],
     ".spec.elasticPolicy.metrics[0].resource.target.averageUtilisation: not in the PyTorchJob"),
    ("metric source missing target", None, [{"type": "Pods", "pods": {"metric": {"name": "x"}}}],
     "'target' is a required property"),
    ("selector unknown key", None,
     [{"type": "External", "external": {"metric": {"name": "q", "selector": {"matchLabel": {"a": "b"}}},
                                        "target": {"type": "Value", "value": 1}}}],
     ".spec.elasticPolicy.metrics[0].external.metric.selector.matchLabel: not in the PyTorchJob"),
]


@pytest.mark.parametrize(("scheduling", "metrics", "expected"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_unknown_or_bad_keys_are_refused(scheduling, metrics, expected):
    job = _pytorchjob(scheduling, metrics)
    found = schema.problems(job)
    assert any(expected in p for p in found), found
    with pytest.raises(UsageError, match="does not pass its CRD schema"):
        schema.validate(job)
