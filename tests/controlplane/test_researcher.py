"""A researcher with only the torchfleet-researcher Role (k8s/base/jobs/role-researcher.yaml) against the real
API server's RBAC and admission: the CLI's commands work, and what the Role must not open is refused.

The researcher is a real user of this API server: a client certificate its CA signed, with the group
torchfleet:researchers (the Organization), which the layer's RoleBinding binds, as an EKS access entry's
Kubernetes group does. kwok runs no container, so `logs` and the reader pod's exec reach no kubelet: what is
asserted there is that RBAC and the admission policy let the request through (no 403 Forbidden).
"""

from __future__ import annotations

import ast
import contextlib
import copy
import itertools

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from components.kube import K8S_BASE
from tests.controlplane.cluster import binary
from tests.controlplane.conftest import GROUP
from tests.controlplane.layer import get, kubectl, wait_for
from tests.controlplane.test_jobs import IMAGE
from torchfleet.cli import main
from torchfleet.jobs import reader_pod, store_folder
from torchfleet.jobs import target as targets
from torchfleet.jobs.egress import METADATA_ENDPOINTS, ip_block
from torchfleet.jobs.kubeconfig import connect

_names = itertools.count()


def as_researcher(layer, kubeconfig, capsys, *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main([argv[0], "--kubeconfig", str(kubeconfig), "--namespace", layer.namespace, *argv[1:]])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def recorded(kubeconfig, text: str) -> str:
    """The documents of TEXT with their maker recorded as the CLI records it (torchfleet.io/created-by on the
    object and its pod templates, validatingadmissionpolicy-owner.yaml), where a test did not set it itself:
    the kubeconfig's user (alice, bob) is the certificate's CN; and, as the CLI does then, each store mount of
    the builders' ``subPath: <job>`` under the object's maker's folder (store_folder.place)."""
    from torchfleet.jobs import store_folder
    from torchfleet.jobs.cluster import CREATED_BY, pod_templates
    from torchfleet.jobs.errors import UsageError

    user = yaml.safe_load(kubeconfig.read_text())["users"][0]["name"]
    documents = [d for d in yaml.safe_load_all(text) if d]
    for document in documents:
        for metadata in [document.setdefault("metadata", {}),
                         *(t.setdefault("metadata", {}) for t in pod_templates(document))]:
            metadata.setdefault("annotations", {}).setdefault(CREATED_BY, user)
        # a username that names no folder: the mount is left for the policy to refuse
        with contextlib.suppress(UsageError):
            store_folder.place(document, document["metadata"]["annotations"][CREATED_BY])
    return yaml.safe_dump_all(documents)


def researcher_kubectl(layer, kubeconfig, *args: str, input: str | None = None, record: bool = True) -> tuple[int, str]:
    """kubectl as the researcher of KUBECONFIG; what it creates records its maker unless RECORD is false."""
    import subprocess

    if input is not None and record and args and args[0] in ("create", "apply"):
        input = recorded(kubeconfig, input)
    done = subprocess.run([binary("kubectl"), f"--kubeconfig={kubeconfig}", "-n", layer.namespace, *args],
                          input=input, capture_output=True, text=True, timeout=120)  # fmt: skip
    return done.returncode, done.stdout + done.stderr


def refused(layer, kubeconfig, document: dict, why: str) -> None:
    code, out = researcher_kubectl(layer, kubeconfig, "create", "-f", "-", input=yaml.safe_dump(document))
    assert code != 0 and why in out, out


def test_the_researcher_is_who_the_tier_thinks(training_layer, researcher):
    code, out = researcher_kubectl(training_layer, researcher, "auth", "whoami", "-o", "yaml")
    assert code == 0, out
    info = yaml.safe_load(out)["status"]["userInfo"]
    assert info["username"] == "alice" and GROUP in info["groups"], info


@pytest.mark.parametrize("extra", [[], ["--recovery", "inplace"]], ids=["restart", "inplace"])
def test_submit_list_status_logs_delete_as_a_researcher(training_layer, researcher, capsys, extra):
    layer, name = training_layer, f"tier-researcher-{next(_names)}"
    code, out = as_researcher(
        layer,
        researcher,
        capsys,
        "submit",
        name,
        "--gpu",
        "t4",
        "--nodes",
        "2",
        "--image",
        IMAGE,
        "--allow-egress",
        "0.0.0.0/0",
        *extra,
        "--",
        "python",
        "train.py",
    )
    assert code == 0, out
    try:
        wait_for(
            f"pods of {name}",
            lambda: get(layer.cp, "pods", "-n", layer.namespace, "-l", f"torchfleet.io/job={name}")["items"],
        )
        for command in (["list"], ["status", name]):
            code, out = as_researcher(layer, researcher, capsys, *command)
            assert code == 0 and name in out, out
        code, out = as_researcher(layer, researcher, capsys, "logs", name)
        assert "Forbidden" not in out and "403" not in out, out  # kwok has no logs to serve: not a refusal
    finally:
        code, out = as_researcher(layer, researcher, capsys, "delete", name)
        assert code == 0, out
    wait_for(f"{name} gone", lambda: not kubectl(layer.cp, "get", "jobs,deployments,services,networkpolicies",
                                                 "-n", layer.namespace, "-l", f"torchfleet.io/job={name}",
                                                 "-o", "name").split())  # fmt: skip


def test_workdir_submit_as_a_researcher(training_layer, researcher, capsys, tmp_path, monkeypatch):
    """The code's ConfigMaps: created, then patched to be owned by the job (create, patch)."""
    layer, name = training_layer, f"tier-researcher-wd-{next(_names)}"
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "train.py").write_text("print('hi')\n")
    code, out = as_researcher(layer, researcher, capsys, "submit", name, "--gpu", "t4", "--nodes", "1", "--image",
                              IMAGE, "--workdir", str(tmp_path / "code"), "--", "python", "train.py")  # fmt: skip
    assert code == 0, out
    try:
        maps = get(layer.cp, "configmaps", "-n", layer.namespace, "-l", f"torchfleet.io/job={name}")["items"]
        assert maps and all(m["metadata"].get("ownerReferences") for m in maps), maps
    finally:
        code, out = as_researcher(layer, researcher, capsys, "delete", name)
        assert code == 0, out


def test_checkpoints_as_a_researcher_reaches_the_exec(training_layer, researcher, capsys):
    """The reader pod is created, read and exec'd into as the researcher (kwok then fails the exec itself)."""
    layer, name = training_layer, f"tier-researcher-ck-{next(_names)}"
    code, out = as_researcher(layer, researcher, capsys, "submit", name, "--gpu", "t4", "--nodes", "1",
                              "--image", IMAGE, "--", "python", "train.py")  # fmt: skip
    assert code == 0, out
    try:
        code, out = as_researcher(layer, researcher, capsys, "checkpoints", name)
        assert code == 1 and "exec in the reader pod" in out and "deleted reader pod" in out, out
        assert "Forbidden" not in out, out
    finally:
        as_researcher(layer, researcher, capsys, "delete", name)


@pytest.mark.parametrize(
    ("verb", "resource", "allowed"),
    [
        ("create", "pods/portforward", "yes"),  # tensorboard
        ("get", "pods/log", "yes"),
        ("get", "secrets", "no"),
        ("list", "secrets", "no"),
        ("create", "rolebindings", "no"),
        ("create", "serviceaccounts/token", "no"),
        ("patch", "pods", "no"),
        ("delete", "deployments", "no"),
    ],
)
def test_what_the_role_grants_in_the_namespace(training_layer, researcher, verb, resource, allowed):
    _, out = researcher_kubectl(training_layer, researcher, "auth", "can-i", verb, resource)
    assert out.strip() == allowed, out


@pytest.mark.parametrize(
    "args",
    [
        ["get", "secrets"],
        ["get", "nodes"],
        ["get", "pods", "-n", "kube-system"],
        ["create", "configmap", "x", "-n", "kube-system"],
        ["create", "namespace", "mine"],
    ],
    ids=["secrets", "nodes", "kube-system-pods", "kube-system-create", "namespace"],
)
def test_the_researcher_is_refused_outside_the_role(training_layer, researcher, args):
    code, out = researcher_kubectl(training_layer, researcher, *args)
    assert code != 0 and "forbidden" in out.lower(), out


def reader(layer) -> dict:
    target = targets.defaults("aws", layer.namespace)
    # made by alice (the researcher fixture), as the CLI records it: the reader-owner policy refuses any other;
    # her folder of the store, as JobClient.stamped places it (store_folder.place)
    pod = reader_pod.build_pod(f"tier-mine-reader-{next(_names):06x}", "tier-mine", "/mnt/shared", IMAGE, target, None,
                               creator="alice")
    return store_folder.place(pod, "alice")


def test_a_pod_that_is_not_restricted_is_refused(training_layer, researcher):
    pod = reader(training_layer)
    del pod["spec"]["securityContext"]["runAsNonRoot"]
    pod["spec"]["securityContext"]["runAsUser"] = 0
    refused(training_layer, researcher, pod, "violates PodSecurity")


@pytest.mark.parametrize("account", ["etcd", "default"])  # the `job` layer has no controller account
def test_a_pod_under_another_service_account_is_refused(training_layer, researcher, account):
    """Pod create would otherwise hand out any account's token in the namespace (the controller's reaches
    every namespace): a restricted pod that differs only in its account is refused, a Job's template too."""
    pod = reader(training_layer)
    pod["spec"]["serviceAccountName"] = account
    refused(training_layer, researcher, pod, "must run as service account training-job or job-reader")
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"tier-mine-{next(_names)}"},
        "spec": {"template": {"spec": copy.deepcopy(pod["spec"]) | {"restartPolicy": "Never"}}},
    }
    refused(training_layer, researcher, job, "pod template must run as service account")


def test_the_reader_pod_itself_is_admitted(training_layer, researcher):
    """The refusals above mean something: the same pod with its own account is taken (then deleted)."""
    pod = reader(training_layer)
    code, out = researcher_kubectl(training_layer, researcher, "create", "-f", "-", input=yaml.safe_dump(pod))
    assert code == 0, out
    code, out = researcher_kubectl(training_layer, researcher, "delete", "pod", pod["metadata"]["name"], "--wait=false")
    assert code == 0, out


def test_exec_into_a_platform_pod_is_refused(training_layer, researcher):
    """pods/exec is granted for the reader pods: not into etcd (or the controller, whose pod holds its token)."""
    code, out = researcher_kubectl(training_layer, researcher, "exec", "etcd-0", "--", "true")
    assert code != 0 and "exec only into torchfleet's reader pods" in out, out


def test_the_platform_policies_cannot_be_deleted_or_changed(training_layer, researcher):
    code, out = researcher_kubectl(training_layer, researcher, "delete", "networkpolicy", "default-deny")
    assert code != 0 and "only objects torchfleet's commands made" in out, out
    # The Role's own patch (the CLI's adopt), without the GET kubectl makes first (the Role has no get).
    networking = client.NetworkingV1Api(connect(researcher))
    opened = {"spec": {"egress": [{"to": [{"ipBlock": ip_block("0.0.0.0/0")}]}]}}
    with pytest.raises(ApiException) as refusal:
        networking.patch_namespaced_network_policy("default-deny", training_layer.namespace, opened)
    assert refusal.value.status == 403 and "only objects torchfleet's commands made" in refusal.value.body
    assert get(training_layer.cp, "networkpolicy", "default-deny", "-n", training_layer.namespace)


def policy(job: str, egress: list) -> dict:
    """A NetworkPolicy for JOB's pods named and labelled as the CLI's (job-JOB-egress: the researcher-objects
    policy refuses any other name for a policy that selects a job)."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": f"job-{job}-egress", "labels": {"torchfleet.io/job": job}},
        "spec": {
            "podSelector": {"matchLabels": {"torchfleet.io/job": job}},
            "policyTypes": ["Egress"],
            "egress": egress,
        },
    }


@pytest.mark.parametrize(
    "egress",
    [
        [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}],
        [{"ports": [{"port": 80}]}],
        [{"to": [{"ipBlock": {"cidr": "169.254.0.0/16", "except": ["169.254.169.254/32"]}}]}],
        [{"to": [{"ipBlock": {"cidr": "168.63.0.0/16"}}]}],  # Azure's WireServer
        [{"to": [{"ipBlock": {"cidr": "::/0"}}]}],  # AWS's IPv6 IMDS
    ],
    ids=["whole-internet", "no-to", "one-endpoint-left", "wireserver", "ipv6"],
)
def test_a_policy_opening_the_metadata_endpoints_is_refused(training_layer, researcher, egress):
    refused(training_layer, researcher, policy(f"tier-open-{next(_names)}", egress), "metadata")


def test_the_policy_closes_the_endpoints_the_cli_closes():
    """The admission policy's list is egress.py's (a CIDR added there must be closed here too)."""
    vap = yaml.safe_load((K8S_BASE / "cluster/validatingadmissionpolicy-researcher-limits.yaml").read_text())
    [listed] = [v["expression"] for v in vap["spec"]["variables"] if v["name"] == "metadataEndpoints"]
    assert sorted(ast.literal_eval(listed)) == sorted(str(m.network.network_address) for m in METADATA_ENDPOINTS)
    assert all(m.network.num_addresses == 1 for m in METADATA_ENDPOINTS)


@pytest.mark.parametrize("cidr", ["0.0.0.0/0", "::/0", "168.63.0.0/16"])
def test_the_clis_own_egress_policy_is_taken(training_layer, researcher, cidr):
    name = f"tier-egress-{next(_names)}"
    code, out = researcher_kubectl(
        training_layer,
        researcher,
        "create",
        "-f",
        "-",
        input=yaml.safe_dump(policy(name, [{"to": [{"ipBlock": ip_block(cidr)}]}])),
    )
    assert code == 0, out
    code, out = researcher_kubectl(training_layer, researcher, "delete", "networkpolicy", f"job-{name}-egress")
    assert code == 0, out


def test_a_load_balancer_is_refused(training_layer, researcher):
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": f"tier-lb-{next(_names)}"},
        "spec": {"type": "LoadBalancer", "selector": {"a": "b"}, "ports": [{"port": 80}]},
    }
    refused(training_layer, researcher, service, "must be ClusterIP")


def test_the_admin_is_not_limited(training_layer):
    """The limits are for researchers: the controllers and administrators (who may create pods in kube-system)
    keep what they do, e.g. the etcd StatefulSet's pods, which run as etcd, are there."""
    wait_for("an etcd pod", lambda: get(training_layer.cp, "pod", "etcd-0", "-n", training_layer.namespace))


def test_an_elasticjob_as_a_researcher_and_one_under_another_account_refused(training_layer, researcher, capsys):
    """The optional operator's custom resource (its CRD installed by the admin, as the torchelastic layer does):
    submit, list, status and delete as the researcher; the same ElasticJob running as etcd is refused."""
    from tests.controlplane import operators

    layer, name = training_layer, f"tier-researcher-ej-{next(_names)}"
    operators.apply_elasticjob_crd(layer.cp)
    flags = ["--gpu", "t4", "--nodes", "2", "--image", IMAGE, "--operator", "torchelastic"]
    code, out = as_researcher(layer, researcher, capsys, "submit", name, *flags, "--", "python", "train.py")
    assert code == 0, out
    try:
        for command in (["list", "--operator", "torchelastic"], ["status", name, "--operator", "torchelastic"]):
            code, out = as_researcher(layer, researcher, capsys, *command)
            assert code == 0 and name in out, out
    finally:
        code, out = as_researcher(layer, researcher, capsys, "delete", name, "--operator", "torchelastic")
        assert code == 0, out
    capsys.readouterr()
    assert main(["submit", f"{name}-etcd", *flags, "--dry-run", "--", "python", "train.py"]) == 0
    [job] = [d for d in yaml.safe_load_all(capsys.readouterr().out) if d and d["kind"] == "ElasticJob"]
    job["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["serviceAccountName"] = "etcd"
    refused(layer, researcher, job, "every replica's pod template must run as service account")
