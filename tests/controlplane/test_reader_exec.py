"""Only the researcher who made a reader pod of `checkpoints | cp` may exec into it, change it or delete it
(k8s/base/cluster/validatingadmissionpolicy-reader-owner.yaml and -reader-exec.yaml), against the real
API server as two researchers, alice and bob, both in torchfleet:researchers.

Whoever runs commands in a reader controls what its creator downloads; before these policies any
researcher could exec into any reader (the limits checked only the pod's name). kwok runs no container,
so an exec that passes admission fails later at the node: the creator's exec is told apart from a
refused one by that (no policy refusal in its error), and the refused one names the policy.
"""

from __future__ import annotations

import base64
import copy
import itertools
import json

import pytest
import yaml

from tests.controlplane.cluster import openssl
from tests.controlplane.conftest import GROUP
from tests.controlplane.layer import wait_for
from tests.controlplane.test_jobs import IMAGE, cli
from tests.controlplane.test_reader_pod import readers
from tests.controlplane.test_researcher import as_researcher, researcher_kubectl
from torchfleet.jobs import reader_pod
from torchfleet.jobs import target as targets
from torchfleet.jobs.cluster import JobClient
from torchfleet.jobs.errors import ClusterError
from torchfleet.jobs.kubeconfig import connect

_names = itertools.count()
EXEC_POLICY, OWNER_POLICY = "torchfleet-reader-exec", "torchfleet-reader-owner"


@pytest.fixture(scope="module")
def bob(training_layer, tmp_path_factory):
    """A second researcher, made as conftest's alice is: a client certificate with the group as Organization."""
    cp = training_layer.cp
    pki, folder = cp.workdir / "pki", tmp_path_factory.mktemp("bob")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "bob.key", "-out", "bob.csr",
            "-subj", f"/CN=bob/O={GROUP}", cwd=folder)  # fmt: skip
    openssl("x509", "-req", "-in", "bob.csr", "-CA", str(pki / "ca.crt"), "-CAkey", str(pki / "ca.key"),
            "-CAcreateserial", "-out", "bob.crt", "-days", "1", cwd=folder)  # fmt: skip
    data = {n: base64.b64encode((folder / n).read_bytes()).decode() for n in ("bob.crt", "bob.key")}
    config = yaml.safe_load(cp.kubeconfig.read_text())
    config["users"] = [{"name": "bob", "user": {"client-certificate-data": data["bob.crt"],
                                                 "client-key-data": data["bob.key"]}}]
    config["contexts"][0]["context"]["user"] = "bob"
    path = folder / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


def _client(layer, kubeconfig) -> JobClient:
    return JobClient(connect(kubeconfig), layer.namespace, "job")


def _reader(layer, kubeconfig, job: str, creator: str | None = None) -> dict:
    """The pod `checkpoints | cp` makes, as the researcher of ``kubeconfig`` makes it."""
    jobs = _client(layer, kubeconfig)
    return reader_pod.build_pod(reader_pod.pod_name(job), job, "/mnt/shared", reader_pod.READER_IMAGE,
                                targets.defaults("aws", layer.namespace), jobs.get(job),
                                creator=creator or reader_pod.whoami(jobs))


def _exec(layer, kubeconfig, pod: str, sub: str = "exec") -> tuple[int, str]:
    if sub == "attach":
        return researcher_kubectl(layer, kubeconfig, "attach", pod, "-c", reader_pod.CONTAINER)
    return researcher_kubectl(layer, kubeconfig, "exec", pod, "-c", reader_pod.CONTAINER, "--", "python3", "-V")


@pytest.fixture
def job(training_layer, researcher, capsys):
    """alice's job: its folder of the store is in hers (store_folder.py), which only her readers mount."""
    name = f"tier-rexec-{next(_names)}"
    code, out = as_researcher(training_layer, researcher, capsys, "submit", name, "--gpu", "t4", "--nodes", "2",
                              "--image", IMAGE, "--", "python", "train.py")  # fmt: skip
    assert code == 0, out
    yield name
    cli(training_layer, capsys, "delete", name)


def test_whoami_is_the_researchers_username(training_layer, researcher, bob):
    assert reader_pod.whoami(_client(training_layer, researcher)) == "alice"
    assert reader_pod.whoami(_client(training_layer, bob)) == "bob"


def test_only_the_creator_may_exec_into_a_reader(training_layer, researcher, bob, job):
    layer = training_layer
    jobs = _client(layer, researcher)
    with reader_pod.running(jobs, _reader(layer, researcher, job)) as name:
        code, out = _exec(layer, bob, name)
        assert code != 0 and EXEC_POLICY in out and "only the user who made reader pod" in out, out
        assert "(made by alice)" in out, out
        with pytest.raises(ClusterError, match=f"exec in the reader pod {name} failed"):
            list(reader_pod.exec_chunks(_client(layer, bob), name, ["python3", "-V"], []))
        code, out = _exec(layer, researcher, name)  # passes admission; kwok's node then has no container
        assert code != 0 and EXEC_POLICY not in out and "forbidden" not in out.lower(), out


def test_attach_and_port_forward_to_anothers_reader_are_refused(training_layer, researcher, bob, job):
    layer = training_layer
    with reader_pod.running(_client(layer, researcher), _reader(layer, researcher, job)) as name:
        code, out = _exec(layer, bob, name, "attach")
        assert code != 0 and "forbidden" in out.lower(), out
        code, out = researcher_kubectl(layer, bob, "port-forward", f"pod/{name}", "18080:8080",
                                       "--address", "127.0.0.1", "--pod-running-timeout", "5s")
        assert code != 0 and "forbidden" in out.lower(), out


def test_a_reader_records_its_creator_and_no_one_else_changes_or_deletes_it(training_layer, researcher, bob, job):
    layer = training_layer
    alices = _reader(layer, researcher, job)
    forged = copy.deepcopy(_reader(layer, bob, job, creator="alice"))
    code, out = researcher_kubectl(layer, bob, "create", "-f", "-", input=json.dumps(forged))
    assert code != 0 and OWNER_POLICY in out and "torchfleet.io/created-by: bob" in out, out
    unrecorded = copy.deepcopy(_reader(layer, bob, job))
    del unrecorded["metadata"]["annotations"]
    code, out = researcher_kubectl(layer, bob, "create", "-f", "-", input=json.dumps(unrecorded), record=False)
    # Refused twice over since the makers' folders (a store mount is admitted only under the folder of the
    # record, and there is none), and the API server names whichever denying policy it evaluated first.
    assert code != 0 and (OWNER_POLICY in out or "torchfleet-researcher-limits" in out), out
    unlabelled = copy.deepcopy(_reader(layer, bob, job))
    del unlabelled["metadata"]["labels"][reader_pod.LABEL_READER]  # a reader's name without the label
    code, out = researcher_kubectl(layer, bob, "create", "-f", "-", input=json.dumps(unlabelled))
    # Refused twice over since the per-job store rule (81633cd: an unlabelled pod mounting the store is no reader),
    # and the API server names whichever denying policy it evaluated first (their order is a Go map's,
    # k8s.io/apiserver v0.35.4 pkg/admission/plugin/policy/generic/policy_source.go).
    assert code != 0 and (OWNER_POLICY in out or "torchfleet-researcher-limits" in out), out

    jobs = _client(layer, researcher)
    jobs.create_pod(alices)
    name = alices["metadata"]["name"]
    try:
        # The Role grants no pod update (RBAC refuses first); the policy's update rules stand behind it.
        code, out = researcher_kubectl(layer, bob, "annotate", "--overwrite", f"pod/{name}",
                                       f"{reader_pod.CREATED_BY}=bob")
        assert code != 0 and "forbidden" in out.lower(), out
        # A delete and a re-create under the same name would hand alice's next exec to bob's pod.
        code, out = researcher_kubectl(layer, bob, "delete", f"pod/{name}", "--wait=false")
        assert code != 0 and OWNER_POLICY in out and "made by alice" in out, out
    finally:
        code, out = researcher_kubectl(layer, researcher, "delete", f"pod/{name}", "--wait=false")
    assert code == 0, out


def test_a_researchers_own_checkpoints_passes_admission_end_to_end(training_layer, researcher, job, capsys):
    """The whole CLI path as alice: SelfSubjectReview, the recorded pod, the wait, the exec (which kwok's
    node cannot run: exit 1 with the node's error, no policy refusal), the pod deleted."""
    layer = training_layer
    code, out = as_researcher(layer, researcher, capsys, "checkpoints", job)
    assert code == 1 and "exec in the reader pod" in out and "deleted reader pod" in out, out
    assert "forbidden" not in out.lower() and "ValidatingAdmissionPolicy" not in out, out
    wait_for(f"alice's reader pod of {job} deleted", lambda: not readers(layer, job))
