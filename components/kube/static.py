"""The static manifests in k8s/base/: which files the program applies, read from k8s/base/kustomization.yaml.

One list for both ways in: `kubectl apply -k k8s/` and the Pulumi program read the same
kustomization, so a file added there is applied by both. Pure Python (no pulumi import).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from components.kube import K8S_BASE

KUSTOMIZATION = K8S_BASE / "kustomization.yaml"

# Files only the TorchElastic operator needs. `training.operator: kubeflow` installs Kubeflow's
# training-operator instead (kubeflow.py); `job` needs no operator at all: Kubernetes' own Job
# controller runs batch/v1 Indexed Jobs. Both use the same etcd, store, policies and the jobs'
# token-less ServiceAccount, and neither gets the ElasticJob CRD, its controller or their RBAC.
# The job-names policy with ElasticJobs as params and the etcd gate's get on them go with the CRD: a
# binding whose paramKind is not served refuses every request it matches (validatingadmissionpolicy-job-names.yaml).
TORCHELASTIC_ONLY = (
    "crds/",
    "controller/",
    "cluster/validatingadmissionpolicy-job-names-elasticjob.yaml",
    "cluster/validatingadmissionpolicybinding-job-names-elasticjob.yaml",
    "etcd-gate/role-elasticjobs.yaml",
    "etcd-gate/rolebinding-elasticjobs.yaml",
)
# What the layer installs for each `training.operator` beside the files common to all.
OPERATOR_FILES = {"torchelastic": TORCHELASTIC_ONLY, "kubeflow": (), "job": ()}
# Applied before everything else, which waits for them (namespaced objects need the namespace).
FIRST = ("namespace.yaml",)
# A file that must wait for others (beside FIRST): controller-runtime v0.3.0 builds its REST mapper
# once at start, so a controller started before its CRD is Established fails `For(&ElasticJob{})`
# and crash-loops until it is (issue 19).
AFTER = {
    "controller/deployment.yaml": ("crds/elasticjob.yaml",),
    # Its members start with the script this ConfigMap holds.
    "etcd/statefulset.yaml": ("etcd/configmap-bootstrap.yaml",),
    # Its paramKind must be served first, or the binding refuses what it matches until it is.
    "cluster/validatingadmissionpolicybinding-job-names-elasticjob.yaml": ("crds/elasticjob.yaml",),
}
# The shared claim, which binds to the layer's PersistentVolume.
STORAGE = "storage/"


def kustomization_files() -> list[str]:
    """The `resources:` of k8s/base/kustomization.yaml, relative to k8s/base/, in order."""
    doc = yaml.safe_load(KUSTOMIZATION.read_text())
    return list(doc["resources"])


def files_for(operator: str) -> list[str]:
    """The k8s/base/ files the program applies for this operator, in kustomization order."""
    if operator not in OPERATOR_FILES:
        raise ValueError(f"training.operator: must be one of {', '.join(OPERATOR_FILES)}, got {operator!r}")
    own = OPERATOR_FILES[operator]  # str.startswith(()) is False: no operator files of its own
    return [f for f in kustomization_files() if not f.startswith(TORCHELASTIC_ONLY) or f.startswith(own)]


KUBEFLOW = K8S_BASE.parent / "kubeflow"


def kubeflow_files() -> list[str]:
    """What the layer applies after Kubeflow's training-operator (k8s/kubeflow/kustomization.yaml), relative
    to k8s/base/ (static.path and load take them so)."""
    doc = yaml.safe_load((KUBEFLOW / "kustomization.yaml").read_text())
    return [f"../kubeflow/{f}" for f in doc["resources"]]


def load(relative: str) -> dict[str, Any]:
    """The one object a k8s/base/ file holds (one object per file is the rule of k8s/)."""
    docs = [d for d in yaml.safe_load_all((K8S_BASE / relative).read_text()) if d]
    if len(docs) != 1:
        raise ValueError(f"k8s/base/{relative}: expected exactly one object, found {len(docs)}")
    return docs[0]


def path(relative: str) -> Path:
    return K8S_BASE / relative
