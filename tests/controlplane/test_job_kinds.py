"""A job's name is one name across Jobs, ElasticJobs and PyTorchJobs, on the real API server as two researchers.

A review found, as bob: while alice's batch Job `hx-alice-...` ran, an ElasticJob of his with the same name and
her torchfleet.io/rdzv-id was admitted (its id has the form <its own name>-<8 hex>, which the researcher limits
check), and the etcd gate, which read the owning object only for a batch Job, resolved his pods to her
rendezvous id: he could read, rewrite or delete her rendezvous. Now
- admission: the job-names policy once per kind (validatingadmissionpolicy-job-names*.yaml) refuses a job under
  a name a job of another kind holds;
- the gate (elastic_trainer/etcd_gate/resolvers.py): reads the owner of every kind (uid, maker) and resolves a
  name held by two kinds to nothing, so it holds where admission did not (an administrator's object, a race).

The ElasticJob CRD, its job-names policy and binding and the gate's get on elasticjobs are applied here as a
`training.operator: torchelastic` stack installs them (components/kube/static.py TORCHELASTIC_ONLY); the
tier's stack runs the `job` operator, which installs none of them.
"""

from __future__ import annotations

import copy
import itertools
import time

import pytest
import yaml

from components.kube import static
from tests.controlplane import operators
from tests.controlplane import test_operators as ops
from tests.controlplane.layer import get, kubectl, wait_for
from tests.controlplane.test_etcd_gate_resolver import gate_token, resolver
from tests.controlplane.test_jobs import IMAGE, running
from tests.controlplane.test_reader_exec import bob  # noqa: F401 (the fixture)
from tests.controlplane.test_researcher import as_researcher, researcher_kubectl
from torchfleet.jobs.cluster import CREATED_BY
from torchfleet.jobs.pod_template import ANNOTATION_RDZV_ID

_names = itertools.count()
FILES = (  # what a torchelastic stack adds for the kind, in the order it applies them (static.AFTER)
    "cluster/validatingadmissionpolicy-job-names-elasticjob.yaml",
    "cluster/validatingadmissionpolicybinding-job-names-elasticjob.yaml",
    "etcd-gate/role-elasticjobs.yaml",
    "etcd-gate/rolebinding-elasticjobs.yaml",
)
ANOTHER_KIND = "is the name of a job of another kind"


@pytest.fixture(scope="module")
def elasticjobs(training_layer, researcher):
    cp = training_layer.cp
    operators.apply_elasticjob_crd(cp)
    for relative in FILES:
        assert relative in static.files_for("torchelastic")
        obj = static.load(relative)
        if obj["metadata"].get("namespace"):
            obj["metadata"]["namespace"] = training_layer.namespace
        kubectl(cp, "apply", "-f", "-", input=yaml.safe_dump(obj))
    # The API server maps a paramKind when it reads the policy and retries a failed mapping, rate-limited
    # (k8s.io/apiserver v0.35.4 pkg/admission/plugin/policy/generic/policy_source.go): until it has, the
    # binding refuses what it matches with "failed to find resource referenced by paramKind" (seen here
    # with the CRD Established), and refuses it before its matchConditions, so an administrator's too. Wait
    # until an administrator's ElasticJob is admitted and the policy refuses a researcher for its own reason
    # (a dry run of the policy name of that job).
    probe = "kinds-probe"
    started = time.monotonic()
    wait_for("the ElasticJob job-names binding configured", lambda: kubectl(
        cp, "create", "-f", "-", input=yaml.safe_dump(_elasticjob(training_layer, probe, None)), check=False
    ).startswith("elasticjob"), timeout_s=300, every_s=2)  # fmt: skip
    print(f"the ElasticJob job-names binding refused what it matched for {time.monotonic() - started:.0f} s")
    policy = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": f"job-{probe}"},
              "spec": {"podSelector": {"matchLabels": {"torchfleet.io/job": probe}}, "policyTypes": ["Egress"]}}

    def configured() -> bool:
        code, out = researcher_kubectl(training_layer, researcher, "create", "--dry-run=server", "-f", "-",
                                       input=yaml.safe_dump(policy))  # fmt: skip
        return code != 0 and "only its maker" in out

    wait_for("the ElasticJob job-names binding configured", configured, timeout_s=240, every_s=2)
    kubectl(cp, "delete", "elasticjob", probe, "-n", training_layer.namespace)
    yield
    for relative in reversed(FILES):
        kubectl(cp, "delete", "-n", training_layer.namespace, "-f", str(static.path(relative)),
                "--ignore-not-found", check=False)  # fmt: skip


def _alices_job(layer, researcher, capsys) -> tuple[str, str]:
    name = f"hx-alice-{next(_names)}"
    code, out = as_researcher(layer, researcher, capsys, "submit", name, "--gpu", "t4", "--nodes", "1",
                              "--image", IMAGE, "--", "python", "train.py")  # fmt: skip
    assert code == 0, out
    rdzv_id = get(layer.cp, "job", name, "-n", layer.namespace)["metadata"]["annotations"][ANNOTATION_RDZV_ID]
    return name, rdzv_id


def _elasticjob(layer, name: str, rdzv_id: str | None) -> dict:
    """The ElasticJob `torchfleet submit --operator torchelastic NAME` renders, its id set to RDZV_ID."""
    [job] = [d for d in ops.rendered(name, "torchelastic", layer.namespace) if d["kind"] == "ElasticJob"]
    if rdzv_id:
        job["metadata"]["annotations"][ANNOTATION_RDZV_ID] = rdzv_id
        for spec in job["spec"]["replicaSpecs"].values():
            spec["template"]["metadata"].setdefault("annotations", {})[ANNOTATION_RDZV_ID] = rdzv_id
    return job


def _delete(layer, capsys, researcher, name: str) -> None:
    as_researcher(layer, researcher, capsys, "delete", name)
    kubectl(layer.cp, "delete", "jobs,elasticjobs,networkpolicies", "-n", layer.namespace, "-l",
            f"torchfleet.io/job={name}", "--ignore-not-found", "--wait=false", check=False)  # fmt: skip


def test_bob_cannot_make_an_elasticjob_under_alices_job_name(training_layer, researcher, bob, capsys, elasticjobs):  # noqa: F811
    layer = training_layer
    name, her_id = _alices_job(layer, researcher, capsys)
    try:
        # Bob's ElasticJob is otherwise admissible: the same one under a name of his own is admitted.
        own = f"hx-bob-{next(_names)}"
        code, out = researcher_kubectl(layer, bob, "create", "-f", "-",
                                       input=yaml.safe_dump(_elasticjob(layer, own, None)))  # fmt: skip
        assert code == 0, out
        kubectl(layer.cp, "delete", "elasticjob", own, "-n", layer.namespace, "--wait=false")
        # Under her name, with her id: refused (admitted on the old policies: no ElasticJob knew her Job).
        code, out = researcher_kubectl(layer, bob, "create", "-f", "-",
                                       input=yaml.safe_dump(_elasticjob(layer, name, her_id)))  # fmt: skip
        assert code != 0 and ANOTHER_KIND in out, out
        assert f"jobs/{name}" in out, out
        assert not get(layer.cp, "elasticjobs", "-n", layer.namespace, "--field-selector",
                       f"metadata.name={name}")["items"]  # fmt: skip
    finally:
        _delete(layer, capsys, researcher, name)


def test_a_batch_job_under_an_elasticjobs_name_is_refused(training_layer, researcher, bob, capsys, elasticjobs):  # noqa: F811
    """The other way round: alice's ElasticJob holds its name against a batch Job, hers too; bob's submit
    under it is refused before anything of his is made (its first object, job-NAME, is her job's name)."""
    layer = training_layer
    name = f"hx-ej-{next(_names)}"
    code, out = researcher_kubectl(layer, researcher, "create", "-f", "-",
                                   input=yaml.safe_dump(_elasticjob(layer, name, None)))  # fmt: skip
    assert code == 0, out
    try:
        code, out = as_researcher(layer, bob, capsys, "submit", name, "--gpu", "t4", "--nodes", "1",
                                  "--image", IMAGE, "--", "python", "train.py")  # fmt: skip
        assert code != 0, out
        assert "only its maker" in out or ANOTHER_KIND in out, out
        made = get(layer.cp, "jobs,networkpolicies,configmaps", "-n", layer.namespace, "-l",
                   f"torchfleet.io/job={name}")["items"]  # fmt: skip
        assert [(o["kind"], o["metadata"]["name"]) for o in made if o["metadata"].get("annotations", {}).get(
            CREATED_BY) == "bob"] == []
        # A batch Job of her own under her ElasticJob's name: refused by the kind rule itself.
        [job] = [d for d in ops.rendered(name, "job", layer.namespace) if d["kind"] == "Job"]
        code, out = researcher_kubectl(layer, researcher, "create", "-f", "-", input=yaml.safe_dump(job))
        assert code != 0 and ANOTHER_KIND in out and f"elasticjobs/{name}" in out, out
    finally:
        _delete(layer, capsys, researcher, name)


def test_the_gate_resolves_a_name_held_by_two_kinds_to_nothing(training_layer, researcher, capsys, elasticjobs):
    """Behind admission: an ElasticJob under alice's Job's name made by an administrator (admission does not
    hold them), with her id, and a running pod it controls. Before: that pod resolved to her id (the gate
    compared names only for an ElasticJob). Now neither job's pods resolve while the name is held twice, and hers
    do again once it is not."""
    layer, cp, ns = training_layer, training_layer.cp, training_layer.namespace
    name, her_id = _alices_job(layer, researcher, capsys)
    try:
        [hers] = running(layer, name, 1)
        job = _elasticjob(layer, name, her_id)
        job["metadata"]["annotations"][CREATED_BY] = "bob"
        created = yaml.safe_load(kubectl(cp, "create", "-o", "yaml", "-f", "-", input=yaml.safe_dump(job)))
        pod = copy.deepcopy(hers)
        pod["metadata"] = {
            "name": f"{name}-bobs", "namespace": ns,
            "labels": {"torchfleet.io/role": "training"},
            "annotations": {ANNOTATION_RDZV_ID: her_id, CREATED_BY: "bob"},
            "ownerReferences": [{"apiVersion": "elastic.pytorch.org/v1alpha1", "kind": "ElasticJob", "name": name,
                                 "uid": created["metadata"]["uid"], "controller": True}],
        }  # fmt: skip
        pod.pop("status")
        kubectl(cp, "create", "-f", "-", input=yaml.safe_dump(pod))
        bobs = wait_for("bob's pod running", lambda: (p := get(cp, "pod", pod["metadata"]["name"], "-n", ns))[
            "status"].get("podIP") and p["status"].get("phase") == "Running" and p)
        gate = resolver(layer, gate_token(layer))
        assert gate(bobs["status"]["podIP"]) is None  # the old gate: her id
        assert gate(hers["status"]["podIP"]) is None  # whose id is it? nobody's while both hold the name
        kubectl(cp, "delete", "elasticjob", name, "-n", ns, "--wait=true")
        kubectl(cp, "delete", "pod", pod["metadata"]["name"], "-n", ns, "--ignore-not-found", "--wait=false")
        assert gate(hers["status"]["podIP"]) == her_id
    finally:
        _delete(layer, capsys, researcher, name)
