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
"""

from __future__ import annotations

from typing import Any

_INT32 = {"type": "integer", "format": "int32"}

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
                        "schedulingPolicy": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
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
                        "metrics": {"type": "array", "items": {"type": "object",
                                                               "x-kubernetes-preserve-unknown-fields": True}},
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
