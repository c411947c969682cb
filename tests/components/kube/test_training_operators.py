"""What the TrainingLayer installs for each `training.operator`, and in which order (Pulumi mocks).

Order is what the recorded dependencies say: the engine creates a resource only after every
resource in its RegisterResource request's `dependencies`.
"""

from __future__ import annotations

import pytest

from components.kube import store_owner, transforms
from tests.harness import SynthResult, synth_config

CRD = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
RBAC = ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")


def local_with(operator: str) -> SynthResult:
    return synth_config(operator[:2], {"torchfleet:cloud": "local", "torchfleet:training": {"operator": operator}})


@pytest.fixture(scope="module")
def torchelastic() -> SynthResult:
    return local_with("torchelastic")


@pytest.fixture(scope="module")
def job() -> SynthResult:
    return local_with("job")


def layer_objects(result: SynthResult) -> list[dict]:
    """The training layer's objects (the store owner's namespace and its objects left out)."""
    return [
        o
        for o in result.kubernetes_objects()
        if store_owner.NAMESPACE not in (o["metadata"].get("namespace"), o["metadata"]["name"])
    ]


def test_controller_waits_for_its_crd_to_be_established(torchelastic):
    # Regression (issue 19): the controller Deployment was created in parallel with its CRD, and
    # controller-runtime v0.3.0 builds its REST mapper once at start: it crash-looped until the
    # CRD was served.
    (crd,) = torchelastic.of_type(CRD)
    (controller,) = [
        d for d in torchelastic.of_type(DEPLOYMENT) if d.inputs["metadata"]["name"] == "elasticjob-controller"
    ]
    assert any(d.endswith(f"::{crd.name}") for d in controller.options["dependencies"]), controller.options[
        "dependencies"
    ]
    # ...and the CRD counts as created only once the API server serves it.
    assert crd.inputs["metadata"]["annotations"][transforms.PULUMI_WAIT_FOR] == "condition=Established"


def test_only_the_controller_and_the_job_names_policy_wait_for_the_crd(torchelastic):
    # The policy's binding reads ElasticJobs as params: bound before the CRD is served, it refused every
    # request it matched, admins' included (4530aca, issue 30); nothing else needs to wait.
    (crd,) = torchelastic.of_type(CRD)
    waiting = {
        r.inputs["metadata"]["name"]
        for r in torchelastic.resources
        if r.custom and any(d.endswith(f"::{crd.name}") for d in r.options["dependencies"])
    }
    assert waiting == {"elasticjob-controller", "torchfleet-job-names-elasticjob"}


def test_job_operator_installs_no_operator(job):
    # Kubernetes' own Job controller runs batch/v1 Indexed Jobs: no CRD, controller, Kubeflow.
    kinds = {o["kind"] for o in layer_objects(job)}
    assert "CustomResourceDefinition" not in kinds
    # The only Deployments are the platform's own: the etcd gate (issue 30: jobs reach etcd through it) and
    # the node healer (issue 30: a silent GPU node's index is replaced); no training controller.
    deployments = {o["metadata"]["name"] for o in layer_objects(job) if o["kind"] == "Deployment"}
    assert deployments == {"etcd-gate", "node-healer"}
    assert job.of_type("kubernetes:kustomize/v2:Directory") == []
    assert job.outputs["operator"] == "job"


def test_job_operator_grants_nothing(job):
    # Training pods never call the API: no Role or binding for their accounts, which mount no token. The
    # researchers' Role (k8s/base/jobs/role-researcher.yaml) is bound to a group; the only service accounts
    # bound to anything are the platform's etcd gate (reads pods and jobs) and node healer (patches nodes).
    rbac = [o for o in layer_objects(job) if o["kind"] in RBAC]
    assert sorted((o["kind"], o["metadata"]["name"]) for o in rbac) == [
        ("ClusterRole", "torchfleet-node-healer"), ("ClusterRoleBinding", "torchfleet-node-healer"),
        ("Role", "torchfleet-etcd-gate"), ("Role", "torchfleet-researcher"),
        ("RoleBinding", "torchfleet-etcd-gate"), ("RoleBinding", "torchfleet-researchers")]  # order: not the point
    bound = {s["name"] for o in rbac for s in o.get("subjects") or [] if s["kind"] == "ServiceAccount"}
    assert bound == {"etcd-gate", "node-healer"}
    accounts = {o["metadata"]["name"]: o for o in layer_objects(job) if o["kind"] == "ServiceAccount"}
    # job-reader: the checkpoints/cp pod's
    assert set(accounts) == {"training-job", "job-reader", "etcd", "etcd-gate", "node-healer"}
    assert accounts["training-job"]["automountServiceAccountToken"] is False
    assert accounts["job-reader"]["automountServiceAccountToken"] is False


def test_job_operator_keeps_what_the_jobs_use(job, torchelastic):
    def names(result: SynthResult, kind: str) -> set[str]:
        return {o["metadata"]["name"] for o in layer_objects(result) if o["kind"] == kind}

    for kind in (
        "Namespace",
        "StatefulSet",
        "Service",
        "PersistentVolumeClaim",
        "NetworkPolicy",
        "PodDisruptionBudget",
        "PriorityClass",
    ):
        expected = names(torchelastic, kind)
        if kind == "NetworkPolicy":
            expected -= {"controller-to-apiserver"}
        assert names(job, kind) == expected, kind
