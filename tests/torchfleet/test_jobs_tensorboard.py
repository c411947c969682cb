"""`torchfleet tensorboard NAME` (issue 13): its pod passes the checks the job pods get
(kubernetes-validate --strict, the restricted Pod Security level, checkov), mounts the shared claim
read-only on the manager pool; the command creates it, waits for it, forwards, and deletes it on the
way out, Ctrl-C included; the forwarder pipes bytes both ways over real sockets."""

import socket
import threading
from dataclasses import replace
from unittest import mock

import pytest
import yaml
from kubernetes import client

from tests.harness import REPO
from tests.k8s.pod_security import restricted_problems
from tests.k8s.rendered import K8S_VERSIONS, problems_of
from tests.torchfleet.checkov import checkov_results
from tests.torchfleet.fake_cluster import TIMEOUT, cli, job_object, not_found
from torchfleet.jobs import target as targets
from torchfleet.jobs import tensorboard

IMAGE = "registry.example.com/team/train:1.4.2"
TARGETS = {"aws": lambda: targets.defaults("aws"), "local": lambda: targets.from_stack("local"),
           "kubeflow-stack": lambda: replace(targets.from_stack("gcp-usc1"), namespace="research")}


def _pod(kind="aws"):
    return tensorboard.build_pod("resnet", "/mnt/shared/resnet", "/mnt/shared", IMAGE, TARGETS[kind]())


@pytest.mark.parametrize("kind", sorted(TARGETS))
@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_pod_is_valid_and_restricted(kind, version):
    pod = _pod(kind)
    assert problems_of(pod, version) == []
    assert restricted_problems(pod["spec"]) == []


def test_pod_reads_the_store_only_on_the_cpu_pool():
    spec = _pod()["spec"]
    # The job's image, a researcher's: never on the manager pool beside etcd (issue 30).
    assert spec["nodeSelector"] == {"torchfleet.io/pool": "cpu"}
    assert spec["tolerations"] == [
        {"key": "torchfleet.io/pool", "operator": "Equal", "value": "cpu", "effect": "NoSchedule"}]
    assert spec["volumes"][0]["persistentVolumeClaim"] == {"claimName": "shared-data", "readOnly": True}
    (container,) = spec["containers"]
    # Only the job's folder, read-only, where its pods have it (issue 30: never the whole store)
    assert container["volumeMounts"][0] == {"name": "shared", "mountPath": "/mnt/shared/resnet", "subPath": "resnet",
                                            "readOnly": True}
    assert container["command"][:5] == ["python", "-m", "tensorboard.main", "--logdir", "/mnt/shared/resnet"]
    assert container["command"][5:7] == ["--host", "127.0.0.1"]  # reachable through the port-forward only
    assert spec["activeDeadlineSeconds"] == tensorboard.MAX_LIFETIME_S
    # Review of issue 21: it ran as training-job, which on AWS carries the datasets' S3 credentials
    assert (spec["serviceAccountName"], spec["automountServiceAccountToken"]) == ("job-reader", False)
    # the local stack's node has no pool label: a selector would leave the pod Pending
    assert "nodeSelector" not in _pod("local")["spec"]


# Checks that do not fit this pod, each with why (keep every reason true).
SKIPS = {
    "CKV_K8S_43": "Image digest: the pod runs the job's own image, REPO:TAG with a fixed version (moving tags are "
                  "refused at submit); a digest cannot be required of every experiment image.",
}


def test_pod_passes_checkov(tmp_path):
    (tmp_path / "tensorboard.yaml").write_text(yaml.safe_dump(_pod(), sort_keys=False))
    # The namespace's default-deny policy selects every pod in it, this one too (CKV2_K8S_6).
    (tmp_path / "default-deny.yaml").write_text((REPO / "k8s/base/policies/default-deny.yaml").read_text())
    results = checkov_results(tmp_path, SKIPS)
    failed = [f"{c['check_id']} {c['check_name']} ({c['resource']})" for r in results
              for c in r.get("failed_checks", [])]
    assert failed == []
    passed = {(c["check_id"], c["resource"]) for r in results for c in r.get("passed_checks", [])}
    assert ("CKV_K8S_22", "Pod.elastic-job.resnet-tensorboard") in passed  # read-only root filesystem


def test_dry_run_prints_the_pod_and_touches_nothing(capsys):
    with mock.patch("torchfleet.jobs.kubeconfig.connect", side_effect=AssertionError("connected")):
        code, out, err = cli(["tensorboard", "resnet", "--dry-run", "--image", IMAGE], "unused", capsys)
    assert code == 0, err
    (pod,) = list(yaml.safe_load_all(out))
    assert pod == _pod()


@pytest.mark.parametrize(("argv", "expected"), [
    (["tensorboard", "resnet", "--dry-run"], "--image: required with --dry-run"),
    (["tensorboard", "resnet", "--dry-run", "--image", "r/t:latest"], "--image: 'r/t:latest' names no fixed"),
    (["tensorboard", "Bad", "--dry-run", "--image", IMAGE], "NAME: 'Bad' is not a job name"),
    (["tensorboard", "resnet", "--port", "70000"], "--port: a TCP port from 1 to 65535"),
])
def test_input_errors_exit_2(argv, expected, capsys):
    with mock.patch("torchfleet.jobs.kubeconfig.connect", side_effect=AssertionError("connected")):
        code, out, err = cli(argv, "unused", capsys)
    assert (code, out) == (2, "") and expected in err


@pytest.fixture
def pods():
    names = ["create_namespaced_pod", "read_namespaced_pod", "delete_namespaced_pod"]
    patches = [mock.patch.object(client.CoreV1Api, n, autospec=True) for n in names]
    started = [p.start() for p in patches]
    yield mock.Mock(**dict(zip(names, started, strict=True)))
    for p in patches:
        p.stop()


def _ready(ready=True, phase="Running"):
    conditions = [client.V1PodCondition(type="Ready", status="True" if ready else "False")]
    return client.V1Pod(status=client.V1PodStatus(phase=phase, conditions=conditions))


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_creates_waits_forwards_and_deletes_on_ctrl_c(api, pods, kubeconfig, capsys):
    job = job_object()
    job["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["volumeMounts"] = [
        {"name": "shared", "mountPath": "/data"}]
    api.get_namespaced_custom_object.return_value = job
    pods.read_namespaced_pod.side_effect = [_ready(False, "Pending"), _ready()]
    with mock.patch.object(tensorboard.time, "sleep"), \
         mock.patch.object(tensorboard, "serve", side_effect=KeyboardInterrupt) as serve:
        code, out, err = cli(["tensorboard", "resnet", "--port", str(_free_port())], kubeconfig, capsys)
    assert code == 130
    assert "TensorBoard for resnet (/data/resnet) on http://localhost:" in out
    body = pods.create_namespaced_pod.call_args.args[2]
    assert body["spec"]["containers"][0]["image"] == "r/t:1"  # the job's own image
    # Regression (issue 20, AWS review m6): a pod with no owner gets no network policy from EKS's VPC
    # CNI; owned by the job, it gets the namespace's default deny and goes with the job.
    assert body["metadata"]["ownerReferences"] == [{"apiVersion": job["apiVersion"], "kind": "ElasticJob",
                                                    "name": "resnet", "uid": "uid-resnet",
                                                    "blockOwnerDeletion": False}]
    assert body["spec"]["containers"][0]["command"][4] == "/data/resnet"
    serve.assert_called_once()
    pods.delete_namespaced_pod.assert_called_once_with(mock.ANY, "resnet-tensorboard", "elastic-job",
                                                       _request_timeout=TIMEOUT)
    assert "deleted pod resnet-tensorboard" in err


def test_a_pod_that_fails_is_deleted_and_exits_1(api, pods, kubeconfig, capsys):
    api.get_namespaced_custom_object.return_value = job_object()
    pods.read_namespaced_pod.return_value = _ready(False, "Failed")
    pods.delete_namespaced_pod.side_effect = not_found()  # gone already: fine
    code, _, err = cli(["tensorboard", "resnet", "--port", str(_free_port())], kubeconfig, capsys)
    assert code == 1 and "the TensorBoard pod resnet-tensorboard ended (Failed)" in err
    pods.delete_namespaced_pod.assert_called_once()


def test_a_taken_port_exits_2_before_making_anything(api, pods, kubeconfig, capsys):
    api.get_namespaced_custom_object.return_value = job_object()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        code, _, err = cli(["tensorboard", "resnet", "--port", str(taken.getsockname()[1])], kubeconfig, capsys)
    assert code == 2 and "--port: cannot listen on 127.0.0.1:" in err
    pods.create_namespaced_pod.assert_not_called()


def test_serve_pipes_each_connection_to_its_own_stream():
    listener = tensorboard._listen(0)
    port = listener.getsockname()[1]
    stop = threading.Event()
    remotes = []

    def connect():  # the pod's end: echoes what it gets, upper-cased
        ours, theirs = socket.socketpair()
        remotes.append(theirs)

        def echo():
            with theirs:
                while data := theirs.recv(1024):
                    theirs.sendall(data.upper())

        threading.Thread(target=echo, daemon=True).start()
        return ours

    server = threading.Thread(target=tensorboard.serve, args=(listener, connect, stop), daemon=True)
    server.start()
    for text in (b"get /", b"scalars"):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as browser:
            browser.sendall(text)
            assert browser.recv(1024) == text.upper()
    stop.set()
    server.join(5)
    listener.close()
    assert len(remotes) == 2 and not server.is_alive()


@pytest.mark.parametrize(
    ("mount", "root"),
    [
        ({"name": "shared", "mountPath": "/data/resnet", "subPath": "resnet"}, "/data"),  # this CLI's jobs
        ({"name": "shared", "mountPath": "/data"}, "/data"),  # a job submitted before per-job mounts
        ({"name": "shared", "mountPath": "/data/other", "subPath": "resnet"}, None),  # not the CLI's: the default
    ],
)
def test_the_store_root_is_read_back_from_the_jobs_mount(mount, root):
    """tensorboard, checkpoints and cp find the job's folder at <root>/<job> from its pods' mount."""
    job = job_object()
    job["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["volumeMounts"] = [mount]
    assert tensorboard._from_job(job)[1] == root
