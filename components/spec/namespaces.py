"""Namespaces a training namespace must never be: Kubernetes' own and the ones the platform owns.

The training layer declares the training namespace (a Pulumi-owned Namespace, so `pulumi destroy`
deletes it and everything in it), labels it for the `restricted` Pod Security level and puts a
default-deny NetworkPolicy in it (k8s/base/namespace.yaml, k8s/base/policies/default-deny.yaml).
In `kube-system` that denies the cluster's DNS and CNI their traffic and a destroy would try to
delete the namespace; in `torchfleet-system` (baseline: the store-owner Job runs as root there)
the training pods would leave `restricted` behind. So both the stack's `training.namespace` and
the CLI's `--namespace` refuse these by name (issue 23: all three were accepted, exit 0).

- Kubernetes starts every cluster with default, kube-system, kube-public and kube-node-lease, and
  "Avoid creating namespaces with the prefix kube-, since it is reserved for Kubernetes system
  namespaces" (https://kubernetes.io/docs/concepts/overview/working-with-objects/namespaces/,
  "Initial namespaces", read 2026-11-25).
- The platform's own: the store-owner Job's (components/kube/store_owner.py NAMESPACE), Kubeflow's
  training-operator (components/kube/kubeflow.py TRAINING_OPERATOR_NAMESPACE) and AKS's NVIDIA
  device plugin (components/clouds/azure/device_plugin.py NAMESPACE). They are written out here,
  not imported (those modules import components.spec); tests/components/spec/test_namespaces.py
  keeps the copies equal.
"""

from __future__ import annotations

KUBERNETES_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
KUBERNETES_PREFIX = "kube-"
PLATFORM_NAMESPACES = {
    "torchfleet-system": "the store-owner Job's namespace (Pod Security baseline: it runs as root)",
    "kubeflow": "Kubeflow's training-operator namespace",
    "nvidia-device-plugin": "the NVIDIA device plugin's namespace on AKS",
}


def reserved_namespace(namespace: str) -> str | None:
    """Why ``namespace`` cannot hold training jobs, or None when it can."""
    if namespace in KUBERNETES_NAMESPACES or namespace.startswith(KUBERNETES_PREFIX):
        return (
            f"{namespace!r} is Kubernetes' own (default and kube-* are reserved for the system: "
            "https://kubernetes.io/docs/concepts/overview/working-with-objects/namespaces/)"
        )
    if namespace in PLATFORM_NAMESPACES:
        return f"{namespace!r} is {PLATFORM_NAMESPACES[namespace]}"
    return None
