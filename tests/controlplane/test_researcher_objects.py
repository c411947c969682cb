"""What a researcher's objects may say about others'
(k8s/base/cluster/validatingadmissionpolicy-researcher-objects.yaml), on the real API server as two
researchers, alice and bob: a hostile-researcher review had, as bob,
- a NetworkPolicy `bob-opens-<alice's job>` selecting her pods with egress to 0.0.0.0/0 admitted (policies add
  up: her pods lost the namespace's default-deny egress);
- a ConfigMap with a controller ownerReference to her Job, blockOwnerDeletion and a finalizer admitted (her
  `kubectl delete --cascade=foreground` waited on it for ever).
The CLI's own objects (an in-place job with --workdir and --allow-egress: every kind it makes) stay admitted.
"""

from __future__ import annotations

import itertools

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.controlplane.layer import get, kubectl
from tests.controlplane.test_ownership import _submit
from tests.controlplane.test_reader_exec import bob  # noqa: F401 (the fixture)
from tests.controlplane.test_researcher import researcher_kubectl
from torchfleet.jobs.egress import ip_block
from torchfleet.jobs.kubeconfig import connect

_names = itertools.count()
POLICY_NAMES = "is named for the job it selects"
OWNERS = "an ownerReference of a researcher's object"
FINALIZER = "carries no finalizer of its own"


@pytest.fixture
def alices(training_layer, researcher, capsys, tmp_path, monkeypatch):
    """An in-place job of alice's (its Lighthouse, workdir ConfigMaps and the three network policies): the CLI's
    objects of every kind, admitted under the policy."""
    monkeypatch.setenv("HOME", str(tmp_path))
    name = f"tier-objs-{next(_names)}"
    code, out = _submit(training_layer, researcher, capsys, tmp_path, name, "--recovery", "inplace")
    assert code == 0, out
    policies = get(training_layer.cp, "networkpolicies", "-n", training_layer.namespace, "-o", "yaml")["items"]
    assert {f"job-{name}", f"job-{name}-egress", f"job-{name}-lighthouse"} <= {
        p["metadata"]["name"] for p in policies}
    yield name
    kubectl(training_layer.cp, "delete", "jobs", name, "-n", training_layer.namespace, "--ignore-not-found",
            "--wait=false")  # fmt: skip


def _policy(name: str, selector: dict) -> dict:
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": name},
            "spec": {"podSelector": {"matchLabels": selector}, "policyTypes": ["Egress"],
                     "egress": [{"to": [{"ipBlock": ip_block("0.0.0.0/0")}]}]}}  # fmt: skip


def _create(layer, kubeconfig, document: dict) -> tuple[int, str]:
    return researcher_kubectl(layer, kubeconfig, "create", "-f", "-", input=yaml.safe_dump(document))


def test_a_policy_opening_alices_pods_is_refused_by_name_and_maker(training_layer, bob, alices):  # noqa: F811
    layer = training_layer
    job = {"torchfleet.io/job": alices}
    # The review's policy, and other names that are not the CLI's for the job selected.
    for name in (f"bob-opens-{alices}", f"job-{alices}-open", "job-other-egress"):
        code, out = _create(layer, bob, _policy(name, job))
        assert code != 0 and POLICY_NAMES in out, (name, out)
    code, out = _create(layer, bob, _policy(f"job-{alices}-x", {"torchfleet.io/lighthouse": alices}))
    assert code != 0 and POLICY_NAMES in out, out
    # The CLI's names for her job are hers (the job-names policy, her Job as params): refused to bob.
    for name in (f"job-{alices}", f"job-{alices}-egress"):
        kubectl(layer.cp, "delete", "networkpolicy", name, "-n", layer.namespace)  # free the name
        code, out = _create(layer, bob, _policy(name, job))
        assert code != 0 and "only its maker" in out, (name, out)
    # Bob's own job's policy under the CLI's name is admitted (no job of that name yet: first come).
    mine = f"bobs-{next(_names)}"
    code, out = _create(layer, bob, _policy(f"job-{mine}-egress", {"torchfleet.io/job": mine}))
    assert code == 0, out
    kubectl(layer.cp, "delete", "networkpolicy", f"job-{mine}-egress", "-n", layer.namespace)


def test_an_owner_reference_that_blocks_or_controls_and_a_finalizer_are_refused(training_layer, bob, alices):  # noqa: F811
    layer = training_layer
    uid = get(layer.cp, "job", alices, "-n", layer.namespace)["metadata"]["uid"]
    ref = {"apiVersion": "batch/v1", "kind": "Job", "name": alices, "uid": uid}

    def config_map(name: str, owners: list[dict], finalizers: list[str] | None = None) -> dict:
        meta = {"name": name, "labels": {"app.kubernetes.io/managed-by": "torchfleet"},  # as the CLI's (a change
                "ownerReferences": owners, **({"finalizers": finalizers} if finalizers else {})}  # is let through)
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}}

    n = next(_names)
    # The review's ConfigMap, and each part of it alone.
    for owners, finalizers, why in (
        ([{**ref, "controller": True, "blockOwnerDeletion": True}], ["example.com/hold"], OWNERS),
        ([{**ref, "blockOwnerDeletion": True}], None, OWNERS),
        ([{**ref, "controller": True}], None, OWNERS),
        ([{"apiVersion": "v1", "kind": "Pod", "name": "etcd-0", "uid": uid}], None, OWNERS),  # not a job
        ([{**ref, "blockOwnerDeletion": False}], ["example.com/hold"], FINALIZER),
        ([], ["example.com/hold"], FINALIZER),
    ):
        code, out = _create(layer, bob, config_map(f"bobs-cm-{n}", owners, finalizers))
        assert code != 0 and why in out, (owners, finalizers, out)
    # As the CLI writes one (torchfleet/jobs/cluster.py _owner_references): admitted; and no finalizer added later.
    code, out = _create(layer, bob, config_map(f"bobs-cm-{n}", [{**ref, "blockOwnerDeletion": False}]))
    assert code == 0, out
    core = client.CoreV1Api(connect(bob))  # the Role lets a researcher patch a ConfigMap (a sweep's owners), not get
    with pytest.raises(ApiException) as refused:
        core.patch_namespaced_config_map(f"bobs-cm-{n}", layer.namespace,
                                         {"metadata": {"finalizers": ["example.com/hold"]}})  # fmt: skip
    assert refused.value.status == 403 and FINALIZER in refused.value.body, refused.value.body
    kubectl(layer.cp, "delete", "configmap", f"bobs-cm-{n}", "-n", layer.namespace)
