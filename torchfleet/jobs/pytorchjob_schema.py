"""The PyTorchJob (kubeflow.org/v1) schema for the fields Torchfleet emits, as a CRD-style openAPIV3Schema.

Written for Torchfleet from the upstream Go types of Kubeflow training-operator v1.9.x, not copied
from its generated CRD (manifests/base/crds/kubeflow.org_pytorchjobs.yaml, ~500 kB, whose pod
templates are fully expanded core/v1 types):

- pkg/apis/kubeflow.org/v1/pytorch_types.go: PyTorchJobSpec {runPolicy, elasticPolicy,
  pytorchReplicaSpecs (map of Master|Worker to ReplicaSpec), nprocPerNode *string};
  ElasticPolicy {minReplicas, maxReplicas, rdzvBackend (c10d|etcd|etcd-v2), rdzvPort, rdzvHost,
  rdzvId, rdzvConf [{key, value}], standalone, nProcPerNode (deprecated), maxRestarts, metrics}.
- pkg/apis/kubeflow.org/v1/common_types.go: ReplicaSpec {replicas, template, restartPolicy
  (Always|OnFailure|Never|ExitCode)}; RunPolicy {cleanPodPolicy (All|Running|None),
  ttlSecondsAfterFinished, activeDeadlineSeconds, backoffLimit, schedulingPolicy}; v1.9 adds
  suspend and managedBy.

Like the real CRD, objects list their properties, so a field not declared here would be
pruned by the API server; schema.unknown_fields() reports such fields before submitting.
The pod template is kept open here and checked as a core/v1 PodTemplateSpec by the tests
(kubernetes-validate), as the real CRD's schema would.

`runPolicy.schedulingPolicy` (kubeflow/common SchedulingPolicy) and `elasticPolicy.metrics[]`
(autoscaling/v2 MetricSpec) are closed exactly as the generated CRD closes them: their
properties, required keys, formats and the Quantity pattern are copied from
manifests/base/crds/kubeflow.org_pytorchjobs.yaml (controller-gen v0.16.5; the file is the same
at tag v1.9.0 and on the release-1.9 branch that v1.9.4 is cut from). Left open, a typo such as
`minAvaliable` would pass here and be dropped by the API server.
"""

from __future__ import annotations

from typing import Any

_INT32 = {"type": "integer", "format": "int32"}
_STRING = {"type": "string"}

# resource.Quantity as the CRD writes it (x-kubernetes-int-or-string with the Quantity pattern).
_QUANTITY: dict[str, Any] = {
    "anyOf": [{"type": "integer"}, {"type": "string"}],
    "pattern": (
        r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
        r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
    ),
    "x-kubernetes-int-or-string": True,
}

# kubeflow/common v1 SchedulingPolicy (gang scheduling with Volcano or the scheduler plugins).
SCHEDULING_POLICY: dict[str, Any] = {
    "type": "object",
    "properties": {
        "minAvailable": _INT32,
        "minResources": {"type": "object", "additionalProperties": _QUANTITY},
        "priorityClass": _STRING,
        "queue": _STRING,  # immutable (a CEL rule on updates in the CRD)
        "scheduleTimeoutSeconds": _INT32,
    },
}

# autoscaling/v2 MetricSpec and its parts, as the CRD inlines them for elasticPolicy.metrics.
_METRIC_TARGET: dict[str, Any] = {
    "type": "object",
    "required": ["type"],
    "properties": {"averageUtilization": _INT32, "averageValue": _QUANTITY, "type": _STRING, "value": _QUANTITY},
}
_LABEL_SELECTOR: dict[str, Any] = {
    "type": "object",
    "x-kubernetes-map-type": "atomic",
    "properties": {
        "matchExpressions": {
            "type": "array",
            "x-kubernetes-list-type": "atomic",
            "items": {
                "type": "object",
                "required": ["key", "operator"],
                "properties": {
                    "key": _STRING,
                    "operator": _STRING,
                    "values": {"type": "array", "items": _STRING, "x-kubernetes-list-type": "atomic"},
                },
            },
        },
        "matchLabels": {"type": "object", "additionalProperties": _STRING},
    },
}
_METRIC_IDENTIFIER: dict[str, Any] = {
    "type": "object",
    "required": ["name"],
    "properties": {"name": _STRING, "selector": _LABEL_SELECTOR},
}


def _source(required: list[str], **properties: Any) -> dict[str, Any]:
    return {"type": "object", "required": required, "properties": {**properties, "target": _METRIC_TARGET}}


METRIC_SPEC: dict[str, Any] = {
    "type": "object",
    "required": ["type"],
    "properties": {
        "containerResource": _source(["container", "name", "target"], container=_STRING, name=_STRING),
        "external": _source(["metric", "target"], metric=_METRIC_IDENTIFIER),
        "object": _source(
            ["describedObject", "metric", "target"],
            describedObject={
                "type": "object",
                "required": ["kind", "name"],
                "properties": {"apiVersion": _STRING, "kind": _STRING, "name": _STRING},
            },
            metric=_METRIC_IDENTIFIER,
        ),
        "pods": _source(["metric", "target"], metric=_METRIC_IDENTIFIER),
        "resource": _source(["name", "target"], name=_STRING),
        "type": _STRING,
    },
}

PYTORCHJOB_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "apiVersion": {"type": "string", "enum": ["kubeflow.org/v1"]},
        "kind": {"type": "string", "enum": ["PyTorchJob"]},
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "required": ["pytorchReplicaSpecs"],
            "properties": {
                "runPolicy": {
                    "type": "object",
                    "properties": {
                        "cleanPodPolicy": {"type": "string", "enum": ["All", "Running", "None"]},
                        "ttlSecondsAfterFinished": _INT32,
                        "activeDeadlineSeconds": {"type": "integer", "format": "int64"},
                        "backoffLimit": _INT32,
                        "suspend": {"type": "boolean"},
                        "managedBy": {"type": "string"},
                        "schedulingPolicy": SCHEDULING_POLICY,
                    },
                },
                "elasticPolicy": {
                    "type": "object",
                    "properties": {
                        "minReplicas": _INT32,
                        "maxReplicas": _INT32,
                        "rdzvBackend": {"type": "string", "enum": ["c10d", "etcd", "etcd-v2"]},
                        "rdzvPort": _INT32,
                        "rdzvHost": {"type": "string"},
                        "rdzvId": {"type": "string"},
                        "rdzvConf": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "properties": {"key": {"type": "string"}, "value": {"type": "string"}},
                            },
                        },
                        "standalone": {"type": "boolean"},
                        "nProcPerNode": _INT32,
                        "maxRestarts": _INT32,
                        "metrics": {"type": "array", "items": METRIC_SPEC},
                    },
                },
                "nprocPerNode": {"type": "string"},
                "pytorchReplicaSpecs": {
                    "type": "object",
                    "additionalProperties": {
                        "type": "object",
                        "properties": {
                            "replicas": _INT32,
                            "restartPolicy": {"type": "string", "enum": ["Always", "OnFailure", "Never", "ExitCode"]},
                            "template": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                        },
                    },
                },
            },
        },
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    },
}
