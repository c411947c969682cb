"""etcd-gate's resolver (elastic_trainer/etcd_gate/resolvers.py Pods) against the real API server, as the
layer deploys it (k8s/base/etcd-gate/): with the gate's own ServiceAccount token (`kubectl create token`,
signed by the tier's sa.key), so the API server's RBAC decides what the Role lets it see.

The gate tells pods apart by source IP: the Running training pod holding that IP, and the rendezvous id
the CLI wrote on its pod template (torchfleet/jobs/pod_template.py, ANNOTATION_RDZV_ID) for every
operator. Here the pods are the tier's (kwok gives them IPs from the pod CIDR): an Indexed Job's, and a
PyTorchJob's made by Kubeflow's real training-operator (which has no batch/v1 Job to read an annotation
from: the pod's own must survive the operator's copy of the template).
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request

import pytest
from elastic_trainer.etcd_gate.resolvers import Pods

from tests.controlplane import nodes
from tests.controlplane import test_operators as ops
from tests.controlplane.layer import get, kubectl, wait_for
from tests.controlplane.test_jobs import delete, running, submit
from torchfleet.jobs.pod_template import ANNOTATION_RDZV_ID

GATE_ACCOUNT = "etcd-gate"  # k8s/base/etcd-gate/serviceaccount.yaml


def gate_token(layer) -> str:
    return kubectl(layer.cp, "create", "token", GATE_ACCOUNT, "-n", layer.namespace, "--duration=1h").strip()


def resolver(layer, token: str) -> Pods:
    return Pods(layer.cp.server, layer.namespace, token=token, ca_file=str(layer.cp.workdir / "pki" / "ca.crt"),
                cache_s=0)  # fmt: skip


def status_of(layer, token: str, path: str) -> int:
    """The HTTP status the API server answers the gate's identity for GET path."""
    context = ssl.create_default_context(cafile=str(layer.cp.workdir / "pki" / "ca.crt"))
    request = urllib.request.Request(  # noqa: S310 (the tier's https URL)
        layer.cp.server + path, headers={"Authorization": f"Bearer {token}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:  # noqa: S310 (the tier's https)
            json.load(response)
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


@pytest.fixture(scope="module")
def token(training_layer) -> str:
    return gate_token(training_layer)


def test_the_gates_pods_are_admitted_under_restricted_on_the_manager_pool(training_layer):
    cp, ns = training_layer.cp, training_layer.namespace

    def both_running() -> list[dict]:
        listed = get(cp, "pods", "-n", ns, "-l", "app.kubernetes.io/name=etcd-gate")["items"]
        return listed if len([p for p in listed if p["status"].get("phase") == "Running"]) == 2 else []

    pods = wait_for("the gate's 2 pods running", both_running, 120)
    for pod in pods:
        node = get(cp, "node", pod["spec"]["nodeName"])
        labels = node["metadata"]["labels"]
        assert labels.get(nodes.LABEL_MANAGER) == nodes.MANAGER_POOL_NAME, labels


def test_a_training_pod_resolves_to_its_jobs_rendezvous_id(training_layer, capsys, token):
    name = submit(training_layer, capsys, "restart")
    try:
        pods = running(training_layer, name, 2)
        rdzv_id = get(training_layer.cp, "job", name, "-n", training_layer.namespace)["metadata"]["annotations"][
            ANNOTATION_RDZV_ID
        ]
        assert rdzv_id.startswith(f"{name}-")
        gate = resolver(training_layer, token)
        for pod in pods:
            assert pod["metadata"]["annotations"][ANNOTATION_RDZV_ID] == rdzv_id
            assert gate(pod["status"]["podIP"]) == rdzv_id
        # An address no pod holds, and the platform's own pods (etcd: no training role), resolve to nothing.
        assert gate("127.0.0.254") is None
        etcd_ip = get(training_layer.cp, "pod", "etcd-0", "-n", training_layer.namespace)["status"]["podIP"]
        assert gate(etcd_ip) is None
        # The Job-owner path (a pod without its own annotation): the Role's jobs get.
        job_path = f"/apis/batch/v1/namespaces/{training_layer.namespace}/jobs/{name}"
        assert status_of(training_layer, token, job_path) == 200
    finally:
        delete(training_layer, capsys, name)


def test_the_gates_identity_is_refused_everything_else(training_layer, token):
    ns = training_layer.namespace
    assert status_of(training_layer, token, f"/api/v1/namespaces/{ns}/pods") == 200  # what the resolver does
    refused = [
        f"/api/v1/namespaces/{ns}/pods/etcd-0",  # get: not granted (list only)
        f"/api/v1/namespaces/{ns}/secrets",
        f"/api/v1/namespaces/{ns}/configmaps",
        f"/apis/batch/v1/namespaces/{ns}/jobs",  # list jobs: not granted (get only)
        "/api/v1/namespaces/kube-system/pods",  # another namespace
        "/api/v1/pods",  # every namespace
        "/api/v1/nodes",
    ]
    assert {path: status_of(training_layer, token, path) for path in refused} == dict.fromkeys(refused, 403)


def test_a_pytorchjob_pod_resolves_to_its_rendezvous_id(training_layer, training_operator, token):
    cp, ns, name = training_layer.cp, training_layer.namespace, "pt-gate"
    job = ops.submit(cp, name, "kubeflow", ns)
    try:
        workers = wait_for(f"{name}'s 2 workers running", lambda: ops.running(cp, name, ns, 2), ops.WAIT_S)
        rdzv_id = job["spec"]["elasticPolicy"]["rdzvId"]
        gate = resolver(training_layer, token)
        for pod in workers:
            assert [o["kind"] for o in pod["metadata"]["ownerReferences"]] == ["PyTorchJob"]
            assert gate(pod["status"]["podIP"]) == rdzv_id
    finally:
        ops.delete(cp, "pytorchjob", name, ns)


def test_a_spoofed_rendezvous_id_resolves_to_nothing(training_layer, capsys, token):
    """Defence in depth behind the admission policy (test_researcher_crossjob.py): job B's pods annotated with
    job A's rendezvous id, as an administrator's mistake or a policy gap would leave them, resolve to nothing,
    not to A's id: the id must be B's own (<B's name>-<8 hex>, B the pod's controller). The same through B's Job
    (a pod without its own annotation). A still resolves to its own id."""
    cp, ns = training_layer.cp, training_layer.namespace
    victim, attacker = submit(training_layer, capsys, "restart"), submit(training_layer, capsys, "restart")
    try:
        victim_pods, attacker_pods = running(training_layer, victim, 2), running(training_layer, attacker, 2)
        victim_id = get(cp, "job", victim, "-n", ns)["metadata"]["annotations"][ANNOTATION_RDZV_ID]
        gate = resolver(training_layer, token)
        for pod in attacker_pods:
            kubectl(cp, "annotate", "--overwrite", "-n", ns, "pod", pod["metadata"]["name"],
                    f"{ANNOTATION_RDZV_ID}={victim_id}")  # fmt: skip
        assert {gate(pod["status"]["podIP"]) for pod in attacker_pods} == {None}
        # Through the Job: the pods' own annotation removed, the Job's set to the victim's id.
        kubectl(cp, "annotate", "--overwrite", "-n", ns, "job", attacker, f"{ANNOTATION_RDZV_ID}={victim_id}")
        for pod in attacker_pods:
            kubectl(cp, "annotate", "-n", ns, "pod", pod["metadata"]["name"], f"{ANNOTATION_RDZV_ID}-")
        assert {gate(pod["status"]["podIP"]) for pod in attacker_pods} == {None}
        assert {gate(pod["status"]["podIP"]) for pod in victim_pods} == {victim_id}
    finally:
        delete(training_layer, capsys, attacker)
        delete(training_layer, capsys, victim)
