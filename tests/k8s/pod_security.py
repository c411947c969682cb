"""A small checker of the `restricted` Pod Security level, which the training namespace enforces.

The rules as https://kubernetes.io/docs/concepts/security/pod-security-standards/ lists them (the
baseline controls included, since restricted contains them), for the fields our pods use. The
API server refuses a pod that breaks one, so a pod template that fails here would never start:
it is run on every pod the CLI writes, on k8s/examples/ and on the training layer's own pods.
"""

from __future__ import annotations

from typing import Any

# Restricted: "Volume Types", the only volume sources allowed.
ALLOWED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                   "projected", "secret"}
ALLOWED_SECCOMP = {"RuntimeDefault", "Localhost"}
CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")


def _containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for key in CONTAINER_LISTS for c in pod.get(key) or []]


def _host_and_volumes(pod: dict[str, Any]) -> list[str]:
    problems = [f"{key}: true shares the node's namespace" for key in ("hostNetwork", "hostPID", "hostIPC")
                if pod.get(key)]
    for volume in pod.get("volumes") or []:
        kinds = set(volume) - {"name"}
        if not kinds <= ALLOWED_VOLUMES:
            problems.append(f"volume {volume['name']}: {sorted(kinds - ALLOWED_VOLUMES)} not allowed")
    return problems


def _container_problems(c: dict[str, Any], pod_sc: dict[str, Any]) -> list[str]:
    sc = c.get("securityContext") or {}
    name = f"container {c.get('name')}"
    problems = []
    if sc.get("privileged"):
        problems.append(f"{name}: privileged")
    if sc.get("allowPrivilegeEscalation") is not False:
        problems.append(f"{name}: allowPrivilegeEscalation must be false")
    capabilities = sc.get("capabilities") or {}
    if "ALL" not in (capabilities.get("drop") or []):
        problems.append(f"{name}: capabilities.drop must contain ALL")
    if set(capabilities.get("add") or []) - {"NET_BIND_SERVICE"}:
        problems.append(f"{name}: capabilities.add may hold only NET_BIND_SERVICE")
    if not (sc.get("runAsNonRoot") is True or (pod_sc.get("runAsNonRoot") is True and "runAsNonRoot" not in sc)):
        problems.append(f"{name}: runAsNonRoot must be true (on the pod or the container)")
    if sc.get("runAsUser") == 0:
        problems.append(f"{name}: runAsUser 0")
    seccomp = (sc.get("seccompProfile") or pod_sc.get("seccompProfile") or {}).get("type")
    if seccomp not in ALLOWED_SECCOMP:
        problems.append(f"{name}: seccompProfile must be RuntimeDefault or Localhost, got {seccomp}")
    if any(p.get("hostPort") for p in c.get("ports") or []):
        problems.append(f"{name}: hostPort")
    return problems


def restricted_problems(pod: dict[str, Any]) -> list[str]:
    """Every way a pod spec breaks the restricted level; empty when the API server would admit it."""
    pod_sc = pod.get("securityContext") or {}
    problems = _host_and_volumes(pod)
    if pod_sc.get("runAsUser") == 0:
        problems.append("pod: runAsUser 0")
    if not _containers(pod):
        problems.append("pod: no containers")
    for container in _containers(pod):
        problems += _container_problems(container, pod_sc)
    return problems


def pod_templates(obj: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(where, pod spec) of every pod an object makes: workloads, Jobs, and the replica specs
    of ElasticJob/PyTorchJob."""
    spec = obj.get("spec") or {}
    if "template" in spec:
        return [("spec.template", spec["template"]["spec"])]
    replicas = spec.get("replicaSpecs") or spec.get("pytorchReplicaSpecs") or {}
    return [(f"replicaSpecs.{name}.template", r["template"]["spec"]) for name, r in replicas.items()]
