"""Kubeflow's training-operator (PyTorchJob with elasticPolicy), for `training.operator: kubeflow`.

It publishes kustomize manifests only, so the program installs its standalone overlay from a
pinned git ref with pulumi-kubernetes' kustomize.v2.Directory (docs/facts.md, "Controllers and exit codes"). Jobs use
the layer's etcd with `rdzvBackend: etcd-v2`.
"""

from __future__ import annotations

TRAINING_OPERATOR_VERSION = "v1.9.4"
# The repository was renamed kubeflow/training-operator -> kubeflow/trainer; the v1.9.x tags (and
# manifests/overlays/standalone) live there. Kustomize's remote form: repo URL, `//`, the folder,
# `?ref=` a tag (kubernetes-sigs/kustomize examples/remoteBuild.md), which the v2 Directory hands
# to kustomize as is (pulumi/pulumi-kubernetes#3036, "Remote Targets").
TRAINING_OPERATOR_MANIFESTS = (
    "https://github.com/kubeflow/trainer.git//manifests/overlays/standalone"
    f"?ref={TRAINING_OPERATOR_VERSION}"
)
# The overlay installs into its own namespace, outside the training namespace's policies.
TRAINING_OPERATOR_NAMESPACE = "kubeflow"
