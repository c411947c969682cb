"""The reader pod of `torchfleet checkpoints | cp` (issue 21) against the real API server: admitted by Pod
Security Admission at `restricted` as the namespace enforces it, placed on a CPU pool node, owned by its
job, and gone after the command (its own delete) or with its job (the real garbage collector).

kwok runs no container, so nothing is read here: what the pod runs (store_script.py) and the download
are tested on a real run's folder in tests/training_image/test_results_run.py and tests/torchfleet.
"""

from __future__ import annotations

import copy

import pytest

from tests.controlplane.layer import get, kubectl, wait_for
from tests.controlplane.test_jobs import IMAGE, cli, submit
from torchfleet.jobs import reader_pod
from torchfleet.jobs import target as targets
from torchfleet.jobs.cluster import JobClient
from torchfleet.jobs.errors import ClusterError
from torchfleet.jobs.kubeconfig import connect


def readers(layer, job: str) -> list[str]:
    selector = f"{reader_pod.LABEL_READER}={job}"
    return kubectl(layer.cp, "get", "pods", "-n", layer.namespace, "-l", selector, "-o", "name").split()


def client_and_pod(layer, job: str) -> tuple[JobClient, dict]:
    jobs = JobClient(connect(layer.cp.kubeconfig), layer.namespace, "job")
    target = targets.defaults("aws", layer.namespace)
    pod = reader_pod.build_pod(reader_pod.pod_name(job), job, "/mnt/shared", reader_pod.READER_IMAGE, target,
                               jobs.get(job), creator=reader_pod.whoami(jobs))
    return jobs, pod


def test_the_reader_pod_is_admitted_under_restricted_and_deleted_after_the_command(training_layer, capsys):
    layer = training_layer
    labels = get(layer.cp, "namespace", layer.namespace)["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    job = submit(layer, capsys, "restart")
    try:
        jobs, pod = client_and_pod(layer, job)
        with reader_pod.running(jobs, pod) as name:
            live = get(layer.cp, "pod", name, "-n", layer.namespace)
            assert live["status"]["phase"] == "Running"
            assert live["spec"]["containers"][0]["image"] == reader_pod.READER_IMAGE != IMAGE  # never the job's
            node = get(layer.cp, "node", live["spec"]["nodeName"])
            assert node["metadata"]["labels"]["torchfleet.io/pool"] == "cpu"  # never beside etcd (issue 30)
            owner = live["metadata"]["ownerReferences"]
            assert [(o["kind"], o["name"]) for o in owner] == [("Job", job)]
            volume = live["spec"]["volumes"][0]["persistentVolumeClaim"]
            assert volume["readOnly"] is True and live["spec"]["automountServiceAccountToken"] is False
        wait_for(f"the reader pod of {job} deleted", lambda: not readers(layer, job))
    finally:
        cli(layer, capsys, "delete", job)


def test_a_reader_pod_left_behind_goes_with_its_job(training_layer, capsys):
    """The CLI killed before its own delete: the job's deletion removes the pod (ownerReferences)."""
    layer = training_layer
    job = submit(layer, capsys, "restart")
    jobs, pod = client_and_pod(layer, job)
    jobs.create_pod(pod)
    assert readers(layer, job)
    code, out = cli(layer, capsys, "delete", job)
    assert code == 0, out
    wait_for(f"the reader pod of {job} collected with its job", lambda: not readers(layer, job))


@pytest.mark.parametrize("dropped", ["seccompProfile", "runAsNonRoot"])
def test_restricted_refuses_a_reader_without_its_security_settings(training_layer, capsys, dropped):
    """The admission above means something: the same pod without one setting is refused."""
    layer = training_layer
    job = submit(layer, capsys, "restart")
    try:
        jobs, pod = client_and_pod(layer, job)
        weaker = copy.deepcopy(pod)
        del weaker["spec"]["securityContext"][dropped]
        with pytest.raises(ClusterError, match="violates PodSecurity"):
            jobs.create_pod(weaker)
    finally:
        cli(layer, capsys, "delete", job)


def test_checkpoints_of_a_deleted_job_reads_with_the_platform_image(training_layer, capsys):
    """A deleted job's folder is read as any other: the platform's image and the default mount (it needed
    --image when the reader ran the job's own image); kwok runs nothing, so the exec fails, and the pod goes."""
    layer = training_layer
    code, out = cli(layer, capsys, "checkpoints", "gone-job")
    assert code == 1 and "deleted reader pod gone-job-reader-" in out and "exec in the reader pod" in out, out
    wait_for("the reader pod of gone-job deleted", lambda: not readers(layer, "gone-job"))


def test_the_cli_deletes_its_reader_pod_when_the_read_fails(training_layer, capsys):
    """The whole cluster path of `checkpoints` (the job's image and mount, the owned pod, the wait, the exec):
    kwok's nodes run no container, so the exec fails, as a node lost mid-read would; the pod is deleted all
    the same and the failure is exit 1, one line."""
    layer = training_layer
    job = submit(layer, capsys, "restart")
    try:
        code, out = cli(layer, capsys, "checkpoints", job)
        assert code == 1, out
        assert "deleted reader pod" in out and "exec in the reader pod" in out, out
        assert "unexpected error" not in out, out  # the client's returncode raised ValueError on this Status
        wait_for(f"the reader pod of {job} deleted", lambda: not readers(layer, job))
    finally:
        cli(layer, capsys, "delete", job)
