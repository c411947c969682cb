"""The node healer's objects (pure manifest dicts): elastic_trainer/node_healer.py in a Deployment.

The healer taints a GPU node that stopped reporting node.kubernetes.io/out-of-service so PodGC
fails its Terminating pods and the Indexed Job replaces their indexes (docs/jobs.md, "A node that
stops reporting"). A small loop of our own rather than medik8s Node Healthcheck with Self Node
Remediation's OutOfServiceTaint strategy: that pair needs an operator install (OLM), its CRDs and a
privileged DaemonSet with a watchdog on every node, GPU nodes included (github.com/medik8s/
self-node-remediation), to do what one PATCH of a node does here.

Least privilege: its own namespace at Pod Security `restricted`, a ServiceAccount whose ClusterRole
is get/list/watch/patch on nodes and nothing else, one replica on the manager pool (two would only
race their own patches; a lost manager node delays healing by the Deployment's rescheduling), egress
to the API server's ports only (the same rule as k8s/base/controller/networkpolicy-apiserver.yaml,
which says why a port and not an address), no ingress.
"""

from __future__ import annotations

from typing import Any

from components.kube import manifests, transforms

NAMESPACE = "torchfleet-node-healer"
NAME = "node-healer"
APP = {"app.kubernetes.io/name": NAME, **manifests.PART_OF}
CLUSTER_ROLE = "torchfleet-node-healer"
# The training image's user (training-image/Dockerfile USER 10001).
UID = 10001
API_SERVER_PORTS = (443, 6443)
# No probes, said next to the checks that would flag them (checkov reads `checkov.io/skip<n>:
# <check>=<reason>` annotations, as store_owner.py does).
CHECKOV_SKIPS = {
    "CKV_K8S_8": "a polling loop with no listener to probe; each API call times out after 10 s and the loop goes on",
    "CKV_K8S_9": "no Service sends it traffic, so readiness gates nothing",
}


def namespace() -> dict[str, Any]:
    return manifests.platform_namespace(NAMESPACE, "restricted")


def service_account() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": dict(APP)},
    }


def cluster_role() -> dict[str, Any]:
    """Exactly what heal_once does: list nodes, patch one (watch and get for a future watch loop)."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": CLUSTER_ROLE, "labels": dict(APP)},
        "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "patch"]}],
    }


def cluster_role_binding() -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": CLUSTER_ROLE, "labels": dict(APP)},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": CLUSTER_ROLE},
        "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}],
    }


def network_policy() -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "node-healer-to-apiserver", "namespace": NAMESPACE, "labels": dict(manifests.PART_OF)},
        "spec": {
            "podSelector": {},
            "policyTypes": ["Ingress", "Egress"],
            "egress": [{"ports": [{"protocol": "TCP", "port": port} for port in API_SERVER_PORTS]}],
        },
    }


def deployment(image: str, threshold_s: int, node_selector: dict[str, str] | None = None) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "serviceAccountName": NAME,
        "priorityClassName": "torchfleet-control",
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": UID,
            "runAsGroup": UID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [
            {
                "name": NAME,
                "image": image,
                "imagePullPolicy": "Always",
                # The image's ENTRYPOINT is the launcher; the healer is another module of the same package.
                "command": ["python", "-m", "elastic_trainer.node_healer"],
                "args": [f"--threshold-s={threshold_s}"],
                "resources": {
                    "requests": {"cpu": "10m", "memory": "64Mi"},
                    "limits": {"cpu": "200m", "memory": "256Mi"},
                },
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "readOnlyRootFilesystem": True,
                    "capabilities": {"drop": ["ALL"]},
                },
            }
        ],
        "terminationGracePeriodSeconds": 10,
    }
    if node_selector:
        # The manager pool: never on a GPU node it may have to taint.
        pod["nodeSelector"] = dict(node_selector)
    pod["tolerations"] = transforms.manager_tolerations()  # the pool's taint (issue 30)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": NAME,
            "namespace": NAMESPACE,
            "labels": dict(APP),
            "annotations": {f"checkov.io/skip{i}": f"{c}={why}" for i, (c, why) in enumerate(CHECKOV_SKIPS.items(), 1)},
        },
        "spec": {
            "replicas": 1,
            # Never two at once: Recreate stops the old pod before the new one starts.
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": {"app.kubernetes.io/name": NAME}},
            "template": {"metadata": {"labels": dict(APP)}, "spec": pod},
        },
    }


def objects(image: str, threshold_s: int, node_selector: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Every object, in the order they are applied (the namespace first)."""
    return [
        namespace(),
        service_account(),
        cluster_role(),
        cluster_role_binding(),
        network_policy(),
        deployment(image, threshold_s, node_selector),
    ]
