"""The reader pod of `checkpoints` and `cp` (issue 21) gets the checks every pod torchfleet makes gets:
kubernetes-validate --strict against each Kubernetes version, the restricted Pod Security level and
checkov. The real API server admits it in tests/controlplane/test_reader_pod.py."""

from dataclasses import replace

import pytest
import yaml

from tests.harness import REPO
from tests.k8s.pod_security import restricted_problems
from tests.k8s.rendered import K8S_VERSIONS, problems_of
from tests.torchfleet.checkov import checkov_results
from torchfleet.jobs import reader_pod
from torchfleet.jobs import target as targets

IMAGE = reader_pod.READER_IMAGE  # the platform's, pinned by digest: checkov's CKV_K8S_43 passes
OWNER = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "resnet", "uid": "0c1d"}}
TARGETS = {"aws": lambda: targets.defaults("aws"), "local": lambda: targets.from_stack("local"),
           "kubeflow-stack": lambda: replace(targets.from_stack("gcp-usc1"), namespace="research")}


def _pod(kind="aws", owner=OWNER):
    return reader_pod.build_pod("resnet-reader-0a1b2c", "resnet", "/mnt/shared", IMAGE, TARGETS[kind](), owner)


@pytest.mark.parametrize("kind", sorted(TARGETS))
@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_pod_is_valid_and_restricted(kind, version):
    pod = _pod(kind)
    assert problems_of(pod, version) == []
    assert restricted_problems(pod["spec"]) == []


def test_pod_is_on_the_cpu_pool_except_on_the_local_stack():
    """Never on the manager pool beside etcd (issue 30): it reads files a job's code wrote."""
    assert _pod()["spec"]["nodeSelector"] == {"torchfleet.io/pool": "cpu"}
    assert _pod()["spec"]["tolerations"] == [
        {"key": "torchfleet.io/pool", "operator": "Equal", "value": "cpu", "effect": "NoSchedule"}]
    assert "nodeSelector" not in _pod("local")["spec"]  # its node has no pool label: the pod would stay Pending


# Checks that do not fit this pod, each with why (keep every reason true).
SKIPS = {
    "CKV_K8S_8": "Liveness probe: the reader idles until the CLI execs into it and deletes it; a hung read ends "
                 "with the command, and activeDeadlineSeconds ends the pod in any case.",
    "CKV_K8S_9": "Readiness probe: nothing routes traffic to the reader; the CLI waits for it to run.",
}


def test_pod_passes_checkov(tmp_path):
    (tmp_path / "reader.yaml").write_text(yaml.safe_dump(_pod(owner=None), sort_keys=False))
    # The namespace's default-deny policy selects every pod in it, this one too (CKV2_K8S_6).
    (tmp_path / "default-deny.yaml").write_text((REPO / "k8s/base/policies/default-deny.yaml").read_text())
    results = checkov_results(tmp_path, SKIPS)
    failed = [f"{c['check_id']} {c['check_name']} ({c['resource']})" for r in results
              for c in r.get("failed_checks", [])]
    assert failed == []
    passed = {(c["check_id"], c["resource"]) for r in results for c in r.get("passed_checks", [])}
    assert ("CKV_K8S_22", "Pod.elastic-job.resnet-reader-0a1b2c") in passed  # read-only root filesystem
    assert ("CKV_K8S_43", "Pod.elastic-job.resnet-reader-0a1b2c") in passed  # image pinned by digest


def test_the_reader_runs_as_its_own_account_with_no_identity():
    """Review of issue 21: the reader pod ran as training-job, which on AWS has the datasets' Pod Identity
    association, so `checkpoints` and `cp` pods got S3 credentials they never use."""
    from components.clouds.dataset_access import TRAINING_SERVICE_ACCOUNT
    from components.kube import K8S_BASE

    spec = _pod()["spec"]
    assert spec["serviceAccountName"] == reader_pod.SERVICE_ACCOUNT != TRAINING_SERVICE_ACCOUNT
    assert spec["automountServiceAccountToken"] is False
    # declared in the training layer (the kustomization lists it, so `kubectl apply -k` and Pulumi make it)
    path = K8S_BASE / "jobs" / "serviceaccount-reader.yaml"
    assert "jobs/serviceaccount-reader.yaml" in (K8S_BASE / "kustomization.yaml").read_text().split()
    account = yaml.safe_load(path.read_text())
    assert account["kind"] == "ServiceAccount" and account["metadata"]["name"] == reader_pod.SERVICE_ACCOUNT
    assert account["automountServiceAccountToken"] is False
    assert "annotations" not in account["metadata"]  # no GKE or Azure workload identity bound to it
