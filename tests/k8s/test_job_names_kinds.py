"""The job-names policy once per job kind (one paramKind per policy), and each installed only with its kind.

A binding whose paramKind is not served refuses every request it matches (k8s.io/apiserver v0.35.4
pkg/admission/plugin/policy/generic/policy_source.go: "failed to find resource referenced by paramKind", a
configuration error that failurePolicy Fail turns into a denial), so the ElasticJob copy goes with the
TorchElastic operator's CRD and the PyTorchJob copy with Kubeflow's training-operator; the etcd gate's get on
each kind likewise. The behaviour on the real API server: tests/controlplane/test_job_kinds.py.
"""

from __future__ import annotations

import copy

import pytest

from components.kube import static

JOB = "cluster/validatingadmissionpolicy-job-names.yaml"
COPIES = {
    "cluster/validatingadmissionpolicy-job-names-elasticjob.yaml": (
        "ElasticJob", "elastic.pytorch.org/v1alpha1", "elasticjobs"),
    "../kubeflow/validatingadmissionpolicy-job-names-pytorchjob.yaml": ("PyTorchJob", "kubeflow.org/v1", "pytorchjobs"),
}  # fmt: skip


@pytest.mark.parametrize("relative", list(COPIES))
def test_each_kinds_policy_is_the_job_policy_but_for_its_kind(relative):
    kind, api_version, plural = COPIES[relative]
    policy = static.load(relative)
    expected = copy.deepcopy(static.load(JOB))
    expected["metadata"]["name"] = f"torchfleet-job-names-{kind.lower()}"
    expected["spec"]["paramKind"] = {"apiVersion": api_version, "kind": kind}
    [own] = [v for v in expected["spec"]["variables"] if v["name"] == "paramResource"]
    own["expression"] = f"'{plural}'"
    assert policy == expected


def test_the_job_policy_refuses_a_job_name_held_by_another_kind():
    policy = static.load(JOB)
    rules = policy["spec"]["matchConstraints"]["resourceRules"]
    assert {"resources": ["jobs", "elasticjobs", "pytorchjobs"], "operations": ["CREATE"],
            "apiGroups": ["batch", "elastic.pytorch.org", "kubeflow.org"], "apiVersions": ["*"]} in rules
    assert any("variables.paramResource" in v["expression"] for v in policy["spec"]["validations"])


def test_each_kinds_binding_and_the_gates_grant_come_only_with_its_operator():
    elastic = {"cluster/validatingadmissionpolicy-job-names-elasticjob.yaml",
               "cluster/validatingadmissionpolicybinding-job-names-elasticjob.yaml",
               "etcd-gate/role-elasticjobs.yaml", "etcd-gate/rolebinding-elasticjobs.yaml"}  # fmt: skip
    assert elastic <= set(static.files_for("torchelastic"))
    for operator in ("job", "kubeflow"):
        assert not elastic & set(static.files_for(operator)), operator
        assert not any("pytorchjob" in f for f in static.files_for(operator)), operator
    # The binding waits for the CRD it takes params from.
    assert static.AFTER["cluster/validatingadmissionpolicybinding-job-names-elasticjob.yaml"] == (
        "crds/elasticjob.yaml",)
    kubeflow = static.kubeflow_files()
    assert sorted(static.load(f)["kind"] for f in kubeflow) == [
        "Role", "RoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]
    role = static.load("../kubeflow/role-etcd-gate-pytorchjobs.yaml")
    assert role["rules"] == [{"apiGroups": ["kubeflow.org"], "resources": ["pytorchjobs"], "verbs": ["get"]}]
    assert static.load("etcd-gate/role-elasticjobs.yaml")["rules"] == [
        {"apiGroups": ["elastic.pytorch.org"], "resources": ["elasticjobs"], "verbs": ["get"]}]
    for relative in ("../kubeflow/validatingadmissionpolicybinding-job-names-pytorchjob.yaml",
                     "cluster/validatingadmissionpolicybinding-job-names-elasticjob.yaml"):  # fmt: skip
        ref = static.load(relative)["spec"]["paramRef"]
        assert ref == {"selector": {}, "parameterNotFoundAction": "Allow"}  # every job of the kind, none: allow
