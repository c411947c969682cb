"""The cloud-agnostic Kubernetes layer: manifests as data (manifests.py), applied by training.py."""

from pathlib import Path

# The static manifests (`kubectl apply -k k8s/` works on them too).
K8S_DIR = Path(__file__).resolve().parents[2] / "k8s"
# The one source of the ElasticJob schema (versions[0].schema.openAPIV3Schema): the program applies
# it, the CLI and the tests validate jobs against it.
ELASTICJOB_CRD = K8S_DIR / "crds" / "elasticjob.yaml"
