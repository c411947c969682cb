"""Whose objects: every object the CLI makes records its maker, only the maker (or an administrator) changes or
deletes it, and the names a job's objects derive from its name are its maker's
(k8s/base/cluster/validatingadmissionpolicy-owner.yaml, -job-names.yaml), against the real API server as two
researchers, alice and bob, both in torchfleet:researchers.

Before these policies bob could `torchfleet delete` alice's job, delete or patch its network policies, delete
its workdir ConfigMaps and its pods, and make its Lighthouse's Deployment. The control plane's own controllers
must still do their work on alice's objects: the Job controller deletes a suspended job's pods, the garbage
collector everything a deleted job owned.
"""

from __future__ import annotations

import copy
import itertools
import json

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.controlplane.layer import get, kubectl, wait_for
from tests.controlplane.test_jobs import IMAGE
from tests.controlplane.test_reader_exec import bob  # noqa: F401 (the fixture)
from tests.controlplane.test_researcher import as_researcher, researcher_kubectl
from torchfleet.cli import main
from torchfleet.jobs.cluster import CREATED_BY
from torchfleet.jobs.kubeconfig import connect

_names = itertools.count()
OWNER, NAMES = "torchfleet-owner", "torchfleet-job-names"
# What the CLI makes for an in-place job with --workdir and --allow-egress: every kind a researcher makes.
KINDS = "jobs,deployments,services,networkpolicies,configmaps"


def _submit(layer, kubeconfig, capsys, tmp_path, name: str, *extra: str) -> tuple[int, str]:
    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    (code / "train.py").write_text("print('hi')\n")
    return as_researcher(layer, kubeconfig, capsys, "submit", name, "--gpu", "t4", "--nodes", "1", "--image", IMAGE,
                         "--workdir", str(code), "--allow-egress", "10.0.0.0/8", *extra, "--", "python", "train.py")


def _objects(layer, name: str) -> list[dict]:
    """Everything of job NAME: labelled with it (the Lighthouse's Service and Deployment included)."""
    found = get(layer.cp, KINDS, "-n", layer.namespace, "-l", f"torchfleet.io/job={name}")["items"] + get(
        layer.cp, "deployments,services,networkpolicies", "-n", layer.namespace, "-l",
        f"torchfleet.io/lighthouse={name}")["items"]
    return list({(o["kind"], o["metadata"]["name"]): o for o in found}.values())


def _maker(obj: dict) -> str | None:
    return (obj["metadata"].get("annotations") or {}).get(CREATED_BY)


@pytest.fixture
def alices(training_layer, researcher, capsys, tmp_path, monkeypatch):
    """An in-place job of alice's with its Lighthouse, workdir ConfigMaps and both network policies."""
    monkeypatch.setenv("HOME", str(tmp_path))
    name = f"tier-own-{next(_names)}"
    code, out = _submit(training_layer, researcher, capsys, tmp_path, name, "--recovery", "inplace")
    assert code == 0, out
    yield name
    kubectl(training_layer.cp, "delete", "jobs", name, "-n", training_layer.namespace, "--ignore-not-found",
            "--wait=false")  # fmt: skip


def test_every_object_the_cli_makes_records_its_maker(training_layer, alices):
    layer = training_layer
    objects = _objects(layer, alices)
    kinds = sorted({o["kind"] for o in objects})
    assert kinds == ["ConfigMap", "Deployment", "Job", "NetworkPolicy", "Service"], kinds
    assert all(_maker(o) == "alice" for o in objects), [(o["kind"], o["metadata"]["name"], _maker(o)) for o in objects]
    for o in objects:
        if o["kind"] in ("Job", "Deployment"):
            assert o["spec"]["template"]["metadata"]["annotations"][CREATED_BY] == "alice", o
    # The Job controller's pods carry their template's record: alice's too.
    pods = wait_for(f"pods of {alices}", lambda: get(layer.cp, "pods", "-n", layer.namespace, "-l",
                                                    f"torchfleet.io/job={alices}")["items"])  # fmt: skip
    assert all(_maker(p) == "alice" for p in pods), pods


def test_another_researcher_neither_deletes_nor_changes_them(training_layer, researcher, bob, alices, capsys):  # noqa: F811
    layer = training_layer
    code, out = as_researcher(layer, bob, capsys, "delete", alices)
    assert code == 1 and f"Job {alices} was made by alice" in out and "ask alice or an administrator" in out, out
    assert "ValidatingAdmissionPolicy" not in out, out  # the CLI passes on the reason, not the envelope
    objects = {(o["kind"], o["metadata"]["name"]) for o in _objects(layer, alices)}
    for kind, name in sorted(objects):
        if kind in ("Job", "Service", "Deployment"):
            continue  # the Role grants bob no delete of these (the garbage collector deletes them with the job)
        code, out = researcher_kubectl(layer, bob, "delete", kind.lower(), name, "--wait=false")
        assert code != 0 and OWNER in out and "was made by alice" in out, (kind, out)
    # A merge patch (the Role's only change), without kubectl's GET first (the Role has none).
    networking = client.NetworkingV1Api(connect(bob))
    with pytest.raises(ApiException) as refusal:
        networking.patch_namespaced_network_policy(f"job-{alices}", layer.namespace,
                                                   {"metadata": {"ownerReferences": None}})  # fmt: skip
    assert refusal.value.status == 403 and "was made by alice" in refusal.value.body, refusal.value.body
    pod = get(layer.cp, "pods", "-n", layer.namespace, "-l", f"torchfleet.io/job={alices}")["items"][0]
    code, out = researcher_kubectl(layer, bob, "delete", "pod", pod["metadata"]["name"], "--wait=false")
    assert code != 0 and "made by alice" in out, out
    assert {(o["kind"], o["metadata"]["name"]) for o in _objects(layer, alices)} == objects  # all still there


def test_a_refused_change_to_a_training_pod_names_the_owner_policy_never_a_reader(training_layer, bob, alices):  # noqa: F811
    """A training pod carries its maker's record as a reader pod does, but it is no reader: bob's deletes of
    alice's training pod are refused by the owner policy alone, saying whose it is. The reader-owner policy
    matched any pod with the record, and the API server reports whichever denying policy it evaluated first (a
    map's order), so on the previous policy some of these said 'only its creator changes or deletes reader pod'
    (all twelve the owner's by chance: 1 in 4096)."""
    layer = training_layer
    pod = get(layer.cp, "pods", "-n", layer.namespace, "-l", f"torchfleet.io/job={alices}")["items"][0]
    pod_name = pod["metadata"]["name"]
    core = client.CoreV1Api(connect(bob))
    for _ in range(12):  # a delete: the Role grants bob no pod change but delete (test_researcher_limits)
        with pytest.raises(ApiException) as refusal:
            core.delete_namespaced_pod(pod_name, layer.namespace)
        body = refusal.value.body
        assert refusal.value.status == 403 and f"'{OWNER}'" in body and "was made by alice" in body, body
        assert "reader" not in body, body
    assert get(layer.cp, "pod", pod_name, "-n", layer.namespace)["metadata"]["uid"] == pod["metadata"]["uid"]


def test_a_collection_delete_is_refused_object_by_object(training_layer, researcher, bob, alices):  # noqa: F811
    """The Role grants no deletecollection; granted, the API server still admits each object on its own
    (store.go DeleteCollection), and the owner policy refuses alice's."""
    layer, ns = training_layer, training_layer.namespace
    core = client.CoreV1Api(connect(bob))
    selector = f"torchfleet.io/job={alices}"
    with pytest.raises(ApiException) as refusal:
        core.delete_collection_namespaced_config_map(ns, label_selector=selector)
    assert refusal.value.status == 403 and "deletecollection" in refusal.value.body, refusal.value.body
    role = f"tier-own-collections-{next(_names)}"
    kubectl(layer.cp, "create", "role", role, "-n", ns, "--verb=deletecollection", "--resource=configmaps")
    kubectl(layer.cp, "create", "rolebinding", role, "-n", ns, f"--role={role}", "--user=bob")
    try:
        def refused_by_the_policy():
            try:
                core.delete_collection_namespaced_config_map(ns, label_selector=selector)
            except ApiException as error:
                return "cannot deletecollection" not in error.body and error.body  # the RoleBinding in force
            raise AssertionError("bob deleted alice's ConfigMaps as a collection")

        body = wait_for("the role in force and the policy's refusal", refused_by_the_policy)
        assert OWNER in body and "was made by alice" in body, body
        assert get(layer.cp, "configmaps", "-n", ns, "-l", selector)["items"]
    finally:
        kubectl(layer.cp, "delete", "rolebinding,role", role, "-n", ns)


def test_no_one_records_another_as_the_maker(training_layer, researcher, bob):  # noqa: F811
    layer = training_layer
    forged = f"tier-own-forged-{next(_names)}"  # the policy named as the CLI names its job's (researcher-objects)
    policy = {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": f"job-{forged}", "labels": {"torchfleet.io/job": forged},
                     "annotations": {CREATED_BY: "alice"}},
        "spec": {"podSelector": {"matchLabels": {"torchfleet.io/job": forged}}, "policyTypes": ["Ingress"]},
    }
    code, out = researcher_kubectl(layer, bob, "create", "-f", "-", input=json.dumps(policy))
    assert code != 0 and OWNER in out and "torchfleet.io/created-by: bob" in out, out
    unrecorded = copy.deepcopy(policy)
    del unrecorded["metadata"]["annotations"]
    code, out = researcher_kubectl(layer, bob, "create", "-f", "-", input=json.dumps(unrecorded), record=False)
    assert code != 0 and OWNER in out and "torchfleet.io/created-by: bob" in out, out
    job = {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": f"tier-own-forged-{next(_names)}", "annotations": {CREATED_BY: "bob"}},
        "spec": {"template": {"metadata": {"annotations": {CREATED_BY: "alice"}}, "spec": {
            "restartPolicy": "Never", "serviceAccountName": "training-job",
            "containers": [{"name": "c", "image": IMAGE}]}}},
    }
    code, out = researcher_kubectl(layer, bob, "create", "--dry-run=server", "-f", "-", input=json.dumps(job))
    assert code != 0 and "each pod template of Job" in out, out


def test_the_owner_deletes_and_the_controllers_clean_up(training_layer, researcher, capsys, tmp_path, monkeypatch):
    """The Job controller deletes the pods of a suspended job (they carry alice's record, it is not alice); the
    garbage collector deletes what alice's job owned once she deletes it."""
    layer, ns = training_layer, training_layer.namespace
    monkeypatch.setenv("HOME", str(tmp_path))
    name = f"tier-own-{next(_names)}"
    code, out = _submit(layer, researcher, capsys, tmp_path, name, "--recovery", "inplace")
    assert code == 0, out
    wait_for(f"pods of {name}", lambda: get(layer.cp, "pods", "-n", ns, "-l", f"torchfleet.io/job={name}")["items"])
    kubectl(layer.cp, "patch", "job", name, "-n", ns, "--type=merge", "-p", '{"spec":{"suspend":true}}')
    wait_for(f"the Job controller deleted the pods of suspended {name}",
             lambda: not get(layer.cp, "pods", "-n", ns, "-l", f"torchfleet.io/job={name}")["items"])
    code, out = as_researcher(layer, researcher, capsys, "delete", name)
    assert code == 0 and f"deleted Job {name}" in out, out
    wait_for(f"the garbage collector deleted what {name} owned", lambda: not _objects(layer, name), timeout_s=120)


def test_a_jobs_derived_names_are_its_makers(training_layer, researcher, bob, capsys, tmp_path, monkeypatch):  # noqa: F811
    """With alice's job there, bob cannot make its Lighthouse (his image as the Lighthouse her workers talk to)
    or its policies; before it exists a squat only blocks: her submit then fails saying so, leaving nothing."""
    layer, ns = training_layer, training_layer.namespace
    monkeypatch.setenv("HOME", str(tmp_path))
    name = f"tier-own-{next(_names)}"
    capsys.readouterr()
    assert main(["submit", name, "--gpu", "t4", "--nodes", "1", "--image", IMAGE, "--recovery", "inplace",
                 "--namespace", ns, "--dry-run", "--", "python", "train.py"]) == 0  # fmt: skip
    documents = {d["kind"]: d for d in yaml.safe_load_all(capsys.readouterr().out) if d}
    code, out = _submit(layer, researcher, capsys, tmp_path, name, "--recovery", "inplace")
    assert code == 0, out
    try:
        kubectl(layer.cp, "delete", "deployment,service", f"{name}-lighthouse", "-n", ns, "--wait=true")
        for kind in ("Deployment", "Service"):
            code, out = researcher_kubectl(layer, bob, "create", "--dry-run=server", "-f", "-",
                                           input=json.dumps(documents[kind]))  # fmt: skip
            assert code != 0 and NAMES in out and f"job {name}'s own objects (made by alice)" in out, out
        policy = copy.deepcopy(documents["NetworkPolicy"])
        code, out = researcher_kubectl(layer, bob, "create", "--dry-run=server", "-f", "-", input=json.dumps(policy))
        assert code != 0 and NAMES in out, out
        # alice herself may (her own job's names): the policy refuses only others.
        code, out = researcher_kubectl(layer, researcher, "create", "--dry-run=server", "-f", "-",
                                       input=json.dumps(documents["Deployment"]))  # fmt: skip
        assert code == 0, out
    finally:
        as_researcher(layer, researcher, capsys, "delete", name)

    # Before the job exists: bob's Service under the name first; alice's submit fails, nothing of it left.
    squatted = f"tier-own-{next(_names)}"
    service = copy.deepcopy(documents["Service"])
    service["metadata"]["name"] = f"{squatted}-lighthouse"
    service["spec"]["selector"] = {"torchfleet.io/lighthouse": squatted}
    service["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "torchfleet"}
    code, out = researcher_kubectl(layer, bob, "create", "-f", "-", input=json.dumps(service))
    assert code == 0, out
    try:
        code, out = _submit(layer, researcher, capsys, tmp_path, squatted, "--recovery", "inplace")
        assert code == 2 and f"a Service named '{squatted}-lighthouse' already exists" in out, out
        assert "choose another job name" in out, out
        wait_for(f"nothing of {squatted} left", lambda: not [o for o in _objects(layer, squatted)
                                                              if o["kind"] != "Service"], timeout_s=120)
    finally:
        kubectl(layer.cp, "delete", "service", f"{squatted}-lighthouse", "-n", ns, "--ignore-not-found")


def test_a_taken_job_name_names_its_maker(training_layer, researcher, bob, alices, capsys, tmp_path):  # noqa: F811
    code, out = _submit(training_layer, bob, capsys, tmp_path, alices)
    assert code == 2 and f"job(s) {alices} (made by alice) already exist" in out, out
