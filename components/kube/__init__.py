"""The cloud-agnostic Kubernetes layer: manifests as data (manifests.py), applied by training.py."""

from pathlib import Path

# k8s/: base/ holds the training layer's static manifests (a kustomize base; `kubectl apply -k k8s/`
# applies it), overlays/ builds on it from beside it (kustomize refuses an overlay inside its own
# base), examples/ holds example jobs.
K8S_ROOT = Path(__file__).resolve().parents[2] / "k8s"
K8S_BASE = K8S_ROOT / "base"
K8S_EXAMPLES = K8S_ROOT / "examples"
# The one source of the ElasticJob schema (versions[0].schema.openAPIV3Schema): the program applies
# it, the CLI and the tests validate jobs against it.
ELASTICJOB_CRD = K8S_BASE / "crds" / "elasticjob.yaml"
