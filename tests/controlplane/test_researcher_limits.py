"""The researcher limits (k8s/base/cluster/validatingadmissionpolicy-researcher-limits.yaml) against the real API
server, beyond the CLI's own commands (test_researcher.py): who they never apply to, which volumes a researcher's
pods may mount, and which NetworkPolicies a researcher may add.

The controller manager runs each controller as its own service account (cluster.py,
--use-service-account-credentials=true), as kubeadm and the managed clouds do, so a regression that
refuses a controller shows here as a namespace that never goes away.
"""

from __future__ import annotations

import copy
import itertools

import pytest
import yaml

from tests.controlplane.layer import get, kubectl, wait_for
from tests.controlplane.test_researcher import reader, refused, researcher_kubectl

OWN_ONLY = "only objects torchfleet's commands made"
VOLUMES = "a pod may mount only the claims"
_names = itertools.count()


def unlabelled_pod(layer) -> dict:
    """A pod the platform might own (no managed-by or torchfleet.io/job label), made by the admin."""
    pod = reader(layer)
    pod["metadata"] = {"name": f"tier-platform-{next(_names)}"}
    kubectl(layer.cp, "create", "-n", layer.namespace, "-f", "-", input=yaml.safe_dump(pod))
    return pod


# ---- R1: the limits never apply to the control plane ---------------------------------------------------------


@pytest.mark.parametrize("controller", ["pod-garbage-collector", "node-controller"])
def test_a_controller_deletes_an_unlabelled_pod_the_researcher_cannot(training_layer, researcher, controller):
    """Review 20 R1: PodGC and the node controller (no right to create pods in kube-system) were refused deleting
    etcd's pods. As their own identities (the system:controller:* roles grant the delete), they may."""
    layer = training_layer
    name = unlabelled_pod(layer)["metadata"]["name"]
    code, out = researcher_kubectl(layer, researcher, "delete", "pod", name, "--wait=false")
    assert code != 0 and OWN_ONLY in out, out
    out = kubectl(layer.cp, f"--as=system:serviceaccount:kube-system:{controller}", "delete", "pod", name,
                  "-n", layer.namespace, "--wait=false", check=False)  # fmt: skip
    assert f'pod "{name}" deleted' in out and "Forbidden" not in out, out


def test_the_namespace_controller_empties_a_torchfleet_namespace(training_layer):
    """Review 20 R1: with its real credentials the namespace controller must delete kube-root-ca.crt (the root-CA
    publisher's, unlabelled) and what else is there, in a namespace the limits' binding selects; refused, the
    namespace stays Terminating."""
    cp, namespace = training_layer.cp, f"tier-limits-ns-{next(_names)}"
    kubectl(cp, "create", "namespace", namespace)
    kubectl(cp, "label", "namespace", namespace, "app.kubernetes.io/part-of=torchfleet")
    kubectl(cp, "create", "configmap", "platform-owned", "-n", namespace, "--from-literal=a=b")
    wait_for("kube-root-ca.crt published", lambda: kubectl(cp, "get", "configmap", "-n", namespace, "-o", "name",
                                                           check=False).count("kube-root-ca.crt"))  # fmt: skip
    kubectl(cp, "delete", "namespace", namespace, "--wait=false")
    wait_for(f"namespace {namespace} deleted", lambda: "NotFound" in kubectl(cp, "get", "namespace", namespace,
                                                                            check=False))  # fmt: skip


@pytest.mark.parametrize("account", ["training-job", "job-reader"])
def test_the_accounts_a_researcher_pod_runs_as_have_no_rights(training_layer, account):
    """A researcher's pod may hold a token of these accounts (automountServiceAccountToken on the pod), and as a
    system: identity the limits do not hold it: RBAC must (no Role binds them)."""
    layer = training_layer
    out = kubectl(layer.cp, f"--as=system:serviceaccount:{layer.namespace}:{account}", "auth", "can-i", "--list",
                  "-n", layer.namespace, check=False)  # fmt: skip
    rules = [line for line in out.splitlines()[1:] if line.strip() and not line.startswith("selfsubject")]
    verbs = {line: set(line.rsplit("[", 1)[-1].rstrip("] ").split()) for line in rules}  # the last column
    granted = [line for line, these in verbs.items() if these & {"create", "delete", "update", "patch", "*"}]
    assert granted == [], out


@pytest.mark.parametrize("kind", ["Pod", "Job"])
def test_no_pod_or_template_asks_for_a_token(training_layer, researcher, kind):
    """A Job's template with automountServiceAccountToken: true was admitted (it has no volumes yet), and the Job
    controller, a system: user no torchfleet policy holds, made each pod with a training-job token mounted."""
    pod = reader(training_layer)
    pod["metadata"].setdefault("annotations", {})["torchfleet.io/created-by"] = "alice"  # reader-owner's
    pod["spec"]["automountServiceAccountToken"] = True
    document = pod
    if kind == "Job":  # the reader's container alone, as a job of alice's that is otherwise admitted
        name, maker = f"tier-limits-token-{next(_names)}", {"torchfleet.io/created-by": "alice"}
        spec = {key: pod["spec"][key] for key in ("serviceAccountName", "automountServiceAccountToken",
                                                   "securityContext")} | {"restartPolicy": "Never"}  # fmt: skip
        spec["containers"] = [{key: value for key, value in pod["spec"]["containers"][0].items()
                               if key != "volumeMounts"}]  # fmt: skip
        document = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "annotations": maker},
                    "spec": {"template": {"metadata": {"labels": {"torchfleet.io/job": name}, "annotations": maker},
                                          "spec": spec}}}  # fmt: skip
    code, out = researcher_kubectl(training_layer, researcher, "create", "-f", "-", input=yaml.safe_dump(document))
    assert code != 0 and "automountServiceAccountToken" in out, out


BECOMING = [("impersonate", "users"), ("impersonate", "serviceaccounts"), ("impersonate", "groups"),
            ("create", "serviceaccounts/token")]  # fmt: skip


@pytest.mark.parametrize(("verb", "resource"), BECOMING)
def test_the_researcher_cannot_become_a_system_identity(training_layer, researcher, verb, resource):
    for namespace in (training_layer.namespace, "kube-system"):
        _, out = researcher_kubectl(training_layer, researcher, "auth", "can-i", verb, resource, "-n", namespace)
        assert out.strip() == "no", out


# ---- which volumes a researcher's pods mount --------------------------------------------------------------------


def mounting(layer, volume: dict) -> dict:
    pod = reader(layer)
    pod["spec"]["volumes"].append(volume)
    pod["spec"]["containers"][0]["volumeMounts"].append({"name": volume["name"], "mountPath": "/mnt/other"})
    return pod


def job_of(pod: dict) -> dict:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"tier-limits-job-{next(_names)}"},
        "spec": {"template": {"spec": copy.deepcopy(pod["spec"]) | {"restartPolicy": "Never"}}},
    }


ETCD_CLAIM = {"name": "etcd", "persistentVolumeClaim": {"claimName": "data-etcd-0"}}


@pytest.mark.parametrize(
    "volume",
    [
        ETCD_CLAIM,
        {"name": "secret", "secret": {"secretName": "anything"}},
        {"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "t", "audience": "x"}}]}},
        {
            "name": "eph",
            "ephemeral": {
                "volumeClaimTemplate": {
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
                }
            },
        },
    ],
    ids=["etcd-claim", "secret", "token", "ephemeral"],
)
def test_a_pod_mounting_what_the_cli_never_mounts_is_refused(training_layer, researcher, volume):
    """Review 20 item 2: a researcher's pod could mount etcd's data volume (data-etcd-0) and corrupt the
    rendezvous store. Only the shared claim and dataset-<name> claims, emptyDir and projected ConfigMaps."""
    refused(training_layer, researcher, mounting(training_layer, volume), VOLUMES)


def test_a_job_template_mounting_etcds_claim_is_refused(training_layer, researcher):
    refused(training_layer, researcher, job_of(mounting(training_layer, ETCD_CLAIM)), VOLUMES)
    spec = mounting(training_layer, ETCD_CLAIM)["spec"]
    for pod_only in ("restartPolicy", "activeDeadlineSeconds"):  # a Deployment's pods restart, run on
        spec.pop(pod_only, None)
    template = {"metadata": {"labels": {"a": "b"}}, "spec": spec}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": f"tier-limits-deploy-{next(_names)}"},
        "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": template},
    }
    refused(training_layer, researcher, deployment, VOLUMES)


def test_a_dataset_claim_is_admitted(training_layer, researcher):
    """The refusals above mean something: the same pod with a dataset's claim (components/kube/datasets.py
    claim_name) is taken, then deleted; it stays Pending, no such claim exists here."""
    pod = mounting(training_layer, {"name": "data", "persistentVolumeClaim": {"claimName": "dataset-imagenet",
                                                                              "readOnly": True}})  # fmt: skip
    code, out = researcher_kubectl(training_layer, researcher, "create", "-f", "-", input=yaml.safe_dump(pod))
    assert code == 0, out
    code, out = researcher_kubectl(training_layer, researcher, "delete", "pod", pod["metadata"]["name"], "--wait=false")
    assert code == 0, out


# ---- R3: NetworkPolicy ingress -----------------------------------------------------------------------------------


def network_policy(selector: dict, ingress: list) -> dict:
    # Named as the CLI names a job's policy (job-JOB) where it selects a job: another name is refused on its
    # own (validatingadmissionpolicy-researcher-objects.yaml), and these tests are about what it opens.
    job = (selector.get("matchLabels") or {}).get("torchfleet.io/job")
    name = f"job-{job}" if job else f"tier-limits-np-{next(_names)}"
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "labels": {"torchfleet.io/job": job or name}},
        "spec": {"podSelector": selector, "policyTypes": ["Ingress"], "ingress": ingress},
    }


JOB_PODS = {"matchLabels": {"torchfleet.io/job": "mine"}}


@pytest.mark.parametrize(
    ("selector", "ingress", "why"),
    [
        ({"matchLabels": {"app.kubernetes.io/name": "etcd"}}, [{"from": [{"namespaceSelector": {}}]}], "select a job"),
        ({}, [{"from": [{"podSelector": {}}]}], "select a job's pods"),
        ({"matchExpressions": [{"key": "torchfleet.io/job", "operator": "Exists"}]}, [], "select a job's pods"),
        (JOB_PODS, [{"from": [{"namespaceSelector": {}}]}], "no namespaceSelector or ipBlock"),
        (JOB_PODS, [{"from": [{"podSelector": {}, "namespaceSelector": {}}]}], "no namespaceSelector or ipBlock"),
        (JOB_PODS, [{"from": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}], "no namespaceSelector or ipBlock"),
        (JOB_PODS, [{"ports": [{"port": 22}]}], "every ingress rule must name its sources"),
    ],
    ids=[
        "etcd-to-all",
        "all-pods",
        "expression-only",
        "from-namespaces",
        "pods-of-all-namespaces",
        "ipblock",
        "no-from",
    ],
)
def test_a_policy_opening_pods_to_others_is_refused(training_layer, researcher, selector, ingress, why):
    """Review 20 R3: policies add up, so one selecting etcd with ingress from every namespace opened the
    unauthenticated v2 etcd; the platform's etcd-ingress cannot take that back."""
    refused(training_layer, researcher, network_policy(selector, ingress), why)


def test_a_policy_admitting_the_jobs_own_pods_is_taken(training_layer, researcher):
    """As the CLI's own job policy (components/kube/manifests.py job_network_policy); the submit tests in
    test_researcher.py create the CLI's policies themselves, the Lighthouse's included (--recovery inplace)."""
    document = network_policy(JOB_PODS, [{"from": [{"podSelector": JOB_PODS}]}])
    code, out = researcher_kubectl(training_layer, researcher, "create", "-f", "-", input=yaml.safe_dump(document))
    assert code == 0, out
    assert get(training_layer.cp, "networkpolicy", document["metadata"]["name"], "-n", training_layer.namespace)
    code, out = researcher_kubectl(training_layer, researcher, "delete", "networkpolicy", document["metadata"]["name"])
    assert code == 0, out
