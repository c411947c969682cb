"""The pre-submit validation refuses what the operators would refuse or silently drop."""

import copy

import kubernetes_validate
import pytest
import yaml

from components.kube import ELASTICJOB_CRD
from torchfleet.jobs import manifests, schema
from torchfleet.jobs import target as targets
from torchfleet.jobs.errors import UsageError
from torchfleet.jobs.spec import build_request


def _job(operator):
    t = targets.defaults()
    t = targets.Target(**{**t.__dict__, "operator": operator})
    req = build_request(t, name="resnet", gpu="t4", nodes="1:2", gpus_per_node=1, image="r/t:1",
                        command=["python", "train.py"])
    return manifests.build(req, t)


def test_elasticjob_schema_is_the_crd_the_platform_applies():
    crd = yaml.safe_load(ELASTICJOB_CRD.read_text())
    assert schema.elasticjob_schema() == crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def _set(obj, path, value):
    *parents, last = path
    for key in parents:
        obj = obj[key]
    if value is KeyError:
        del obj[last]
    else:
        obj[last] = value


BROKEN = [
    ("torchelastic", ("spec", "minReplicas"), 0, ".spec.minReplicas"),
    ("torchelastic", ("spec", "rdzvEndpoint"), KeyError, "'rdzvEndpoint' is a required property"),
    ("torchelastic", ("spec", "replicaSpecs", "Worker", "restartPolicy"), "Sometimes", "restartPolicy"),
    ("torchelastic", ("spec", "minReplicas"), 5, "minReplicas (5) exceeds maxReplicas (2)"),
    ("torchelastic", ("spec", "rdzvBackend"), "etcd-v2", ".spec.rdzvBackend: not in the ElasticJob schema"),
    ("torchelastic", ("spec", "replicaSpecs", "Worker", "template", "spec", "containers", 0, "name"), "main",
     "elasticjob-worker"),
    ("kubeflow", ("spec", "elasticPolicy", "rdzvBackend"), "zookeeper", "rdzvBackend"),
    ("kubeflow", ("spec", "elasticPolicy", "minReplicas"), "2", "minReplicas"),
    ("kubeflow", ("spec", "elasticPolicy", "rdzvEndpoint"), "etcd:2379",
     ".spec.elasticPolicy.rdzvEndpoint: not in the PyTorchJob schema"),
    ("kubeflow", ("spec", "elasticPolicy", "nProcPerNode"), 1, "deprecated"),
    ("kubeflow", ("spec", "pytorchReplicaSpecs", "Worker", "template", "spec", "containers", 0, "name"),
     "elasticjob-worker", "container named 'pytorch'"),
    ("kubeflow", ("spec", "pytorchReplicaSpecs", "Chief"), {"replicas": 1, "template": {}}, "Master or Worker"),
    ("kubeflow", ("spec", "pytorchReplicaSpecs"), KeyError, "'pytorchReplicaSpecs' is a required property"),
]


@pytest.mark.parametrize(("operator", "path", "value", "expected"), BROKEN,
                         ids=[f"{b[0]}-{'.'.join(map(str, b[1]))}" for b in BROKEN])
def test_broken_job_is_refused_before_submit(operator, path, value, expected):
    job = copy.deepcopy(_job(operator))
    assert schema.problems(job) == []
    _set(job, path, value)
    found = schema.problems(job)
    assert any(expected in p for p in found), found
    with pytest.raises(UsageError, match="does not pass its CRD schema"):
        schema.validate(job)


def test_pod_template_checks_can_fail():
    # The core-schema check in test_jobs_manifests is only worth something if it can refuse a pod.
    job = _job("torchelastic")
    template = manifests.worker_spec(job)["template"]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": copy.deepcopy(template["spec"])}
    pod["spec"]["containers"][0]["resources"]["request"] = {"cpu": "1"}  # typo of "requests"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(pod, "1.30.0", strict=True)


def test_unknown_fields_walks_maps_and_lists():
    s = {"type": "object", "properties": {
        "a": {"type": "array", "items": {"type": "object", "properties": {"x": {"type": "string"}}}},
        "m": {"type": "object", "additionalProperties": {"type": "object", "properties": {"y": {}}}},
        "open": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    }}
    obj = {"a": [{"x": "1", "z": 2}], "m": {"k": {"y": 1, "w": 2}}, "open": {"anything": 1}, "top": 1}
    assert sorted(schema.unknown_fields(obj, s)) == [".a[0].z", ".m.k.w", ".top"]
