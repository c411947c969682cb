"""The `restricted` Pod Security level (pod_security.py) holds for the example jobs and for every
pod the training layer runs in the training namespace, on every stack; and the checker can fail."""

from __future__ import annotations

import copy

import pytest

from components.kube import K8S_EXAMPLES
from components.spec import TRAINING_UID
from tests.harness import STACKS, STACKS_DIR
from tests.k8s.pod_security import pod_templates, restricted_problems
from tests.k8s.rendered import load_one
from torchfleet.preview.runner import synth_file

EXAMPLES = sorted(p for p in K8S_EXAMPLES.glob("*.yaml") if pod_templates(load_one(p)))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_pods_are_restricted_and_run_as_the_training_uid(path):
    templates = pod_templates(load_one(path))
    assert templates
    for where, pod in templates:
        assert restricted_problems(pod) == [], where
        # The store's root belongs to the training uid and group (README, "Who owns the shared store").
        security = pod["securityContext"]
        assert (security["runAsUser"], security["runAsGroup"]) == (TRAINING_UID, TRAINING_UID)


def test_examples_are_found():
    assert {p.name for p in EXAMPLES} >= {"imagenet.yaml", "synthetic-cpu.yaml"}


@pytest.mark.parametrize("stack", STACKS)
def test_training_namespace_pods_are_restricted(stack):
    result = synth_file(STACKS_DIR / f"Pulumi.{stack}.yaml")
    namespace = result.outputs["namespace"]
    workloads = [o for o in result.kubernetes_objects()
                 if o["kind"] in ("Deployment", "StatefulSet") and o["metadata"].get("namespace") == namespace]
    assert any(o["kind"] == "StatefulSet" for o in workloads), "etcd is missing: the check would pass anything"
    for obj in workloads:
        for where, pod in pod_templates(obj):
            assert restricted_problems(pod) == [], f"{obj['kind']} {obj['metadata']['name']} {where}"


# ---------------------------------------------------------------- the checker can fail


def _good() -> dict:
    (_, pod), = pod_templates(load_one(K8S_EXAMPLES / "synthetic-cpu.yaml"))
    return copy.deepcopy(pod)


def _set(path: str, value):
    def broken() -> dict:
        pod = _good()
        *parents, last = path.split(".")
        node = pod
        for part in parents:
            node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value
        return pod
    return broken


@pytest.mark.parametrize(("broken", "expected"), [
    (_set("securityContext.runAsNonRoot", None), "runAsNonRoot must be true"),
    (_set("containers.0.securityContext.runAsNonRoot", False), "runAsNonRoot must be true"),
    (_set("securityContext.runAsUser", 0), "runAsUser 0"),
    (_set("containers.0.securityContext.allowPrivilegeEscalation", None), "allowPrivilegeEscalation"),
    (_set("containers.0.securityContext.capabilities.drop", ["NET_RAW"]), "drop must contain ALL"),
    (_set("containers.0.securityContext.capabilities.add", ["SYS_ADMIN"]), "only NET_BIND_SERVICE"),
    (_set("containers.0.securityContext.privileged", True), "privileged"),
    (_set("securityContext.seccompProfile", None), "seccompProfile"),
    (_set("containers.0.securityContext.seccompProfile", {"type": "Unconfined"}), "seccompProfile"),
    (_set("hostNetwork", True), "hostNetwork"),
    (_set("hostPID", True), "hostPID"),
    (_set("volumes", [{"name": "h", "hostPath": {"path": "/"}}]), "not allowed"),
    (_set("containers.0.ports", [{"containerPort": 80, "hostPort": 80}]), "hostPort"),
])
def test_checker_reports(broken, expected):
    problems = restricted_problems(broken())
    assert any(expected in p for p in problems), problems


def test_checker_accepts_net_bind_service_only():
    pod = _set("containers.0.securityContext.capabilities.add", ["NET_BIND_SERVICE"])()
    assert restricted_problems(pod) == []
