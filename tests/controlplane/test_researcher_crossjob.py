"""One researcher against another's job, on the real API server as alice
(k8s/base/cluster/validatingadmissionpolicy-researcher-limits.yaml).

- The etcd gate grants a pod the rendezvous and store keys of the torchfleet.io/rdzv-id on its pod template
  (training-image/elastic_trainer/etcd_gate/resolvers.py). The victim's id is readable from its Job, so the
  CLI's own Job carrying it would join (and could rewrite or delete) the victim's rendezvous: a job's id is
  its own name and 8 hex digits (torchfleet/jobs/spec.py new_rdzv_id), and no pod or Deployment a
  researcher makes carries one.
- NetworkPolicies add up: a policy selecting the victim's job (or its Lighthouse) with a peer of alice's own
  job opened the victim's pods to hers. A policy names as peers only its own job's pods or Lighthouse.

Each attack is the CLI's own object (``submit --dry-run``) with the one field changed; the same objects
unchanged are admitted (test_researcher_pods.py test_the_clis_objects_are_admitted).
"""

from __future__ import annotations

import pytest
import yaml

from tests.controlplane import operators
from tests.controlplane.test_jobs import IMAGE
from tests.controlplane.test_researcher import refused
from tests.controlplane.test_researcher_pods import admitted, cli_documents, name, reader, template
from torchfleet.cli import main
from torchfleet.jobs.pod_template import ANNOTATION_RDZV_ID

RDZV = "torchfleet.io/rdzv-id on a job and its pod templates is the job's own"
NO_RDZV = "carries no torchfleet.io/rdzv-id"
PEERS = "names as peers only that job's pods"
VICTIM_ID = "victim-0123abcd"  # what `kubectl get job victim -o yaml` shows alice


def the_job(documents: dict) -> dict:
    [job] = [d for k, d in documents.items() if k in ("Job", "ElasticJob")]
    return job


# ---- C1: another job's rendezvous through the etcd gate ---------------------------------------------------------


@pytest.mark.parametrize("operator", ["job", "torchelastic"])
@pytest.mark.parametrize("where", ["template", "job"])
def test_a_job_claiming_another_jobs_rendezvous_is_refused(training_layer, researcher, capsys, operator, where):
    if operator == "torchelastic":
        operators.apply_elasticjob_crd(training_layer.cp)
    job = the_job(cli_documents(training_layer, capsys, name("tier-xjob"), "--operator", operator))
    metadata = template(job)["metadata"] if where == "template" else job["metadata"]
    assert ANNOTATION_RDZV_ID in metadata["annotations"], "the CLI writes it (restart mode)"
    metadata["annotations"][ANNOTATION_RDZV_ID] = VICTIM_ID
    refused(training_layer, researcher, job, RDZV)


@pytest.mark.parametrize(
    "rdzv_id",
    [
        "{name}",  # the bare name: another job named {name}-<8 hex> may hold exactly this id
        "{name}-0123abcd-00000000",  # the id of job {name}-0123abcd
        "{name}-0123ABCD",
        "{name}x0123abcd",
    ],
    ids=["bare-name", "longer-job", "upper-hex", "no-dash"],
)
def test_a_rendezvous_id_not_of_the_jobs_own_form_is_refused(training_layer, researcher, capsys, rdzv_id):
    job = cli_documents(training_layer, capsys, name("tier-xjob"))["Job"]
    template(job)["metadata"]["annotations"][ANNOTATION_RDZV_ID] = rdzv_id.format(name=job["metadata"]["name"])
    refused(training_layer, researcher, job, RDZV)


def test_the_clis_own_rendezvous_id_is_admitted(training_layer, researcher, capsys):
    job = cli_documents(training_layer, capsys, name("tier-xjob"))["Job"]
    own = template(job)["metadata"]["annotations"][ANNOTATION_RDZV_ID]
    assert own.startswith(job["metadata"]["name"] + "-") and own == job["metadata"]["annotations"][ANNOTATION_RDZV_ID]
    admitted(training_layer, researcher, job)


def test_a_pod_or_deployment_with_a_rendezvous_id_is_refused(training_layer, researcher, capsys):
    pod = reader(training_layer)
    pod["metadata"]["annotations"][ANNOTATION_RDZV_ID] = VICTIM_ID
    refused(training_layer, researcher, pod, NO_RDZV)
    deployment = cli_documents(training_layer, capsys, name("tier-xjob"), "--recovery", "inplace")["Deployment"]
    template(deployment)["metadata"].setdefault("annotations", {})[ANNOTATION_RDZV_ID] = VICTIM_ID
    refused(training_layer, researcher, deployment, NO_RDZV)


# ---- C2: another job's pods opened to alice's ---------------------------------------------------------------------


def cli_policy(layer, capsys, *flags: str) -> tuple[str, dict]:
    job = name("tier-xnp")
    documents = cli_documents(layer, capsys, job, *flags)
    return job, documents


@pytest.mark.parametrize("direction", ["ingress", "egress"])
@pytest.mark.parametrize("selects", ["torchfleet.io/job", "torchfleet.io/lighthouse"])
def test_a_policy_opening_another_job_to_alices_is_refused(training_layer, researcher, capsys, direction, selects):
    """alice's policy (the CLI's job policy, renamed) selecting job `victim` (or its Lighthouse), with her own
    job's pods as the peer."""
    mine, documents = cli_policy(training_layer, capsys)
    policy = documents["NetworkPolicy"]
    # Under the CLI's name for victim's policy (no job victim: the name is free), so that what refuses it is the
    # peer; any other name is refused on its own (validatingadmissionpolicy-researcher-objects.yaml).
    policy["metadata"]["name"] = "job-victim" + ("-lighthouse" if selects == "torchfleet.io/lighthouse" else "")
    policy["spec"]["podSelector"] = {"matchLabels": {selects: "victim"}}
    peer = {"podSelector": {"matchLabels": {"torchfleet.io/job": mine}}}
    policy["spec"]["policyTypes"] = ["Ingress" if direction == "ingress" else "Egress"]
    policy["spec"].pop("ingress" if direction == "egress" else "egress")
    policy["spec"][direction] = [{"from" if direction == "ingress" else "to": [peer]}]
    refused(training_layer, researcher, policy, PEERS)


def test_the_victims_own_policy_rewritten_to_admit_alice_is_refused(training_layer, researcher, capsys):
    """The raw merge-PATCH of networkpolicies/job-<victim> sends the whole new object through admission: the
    victim's policy with a peer of alice's job is refused whoever edits it (here: created as it would end)."""
    _, documents = cli_policy(training_layer, capsys)
    policy = documents["NetworkPolicy"]
    policy["spec"]["ingress"][0]["from"].append({"podSelector": {"matchLabels": {"torchfleet.io/job": "alice-job"}}})
    refused(training_layer, researcher, policy, PEERS)


@pytest.mark.parametrize(
    "peer",
    [
        {"namespaceSelector": {}},
        {"podSelector": {"matchLabels": {"torchfleet.io/job": "{job}"}}, "namespaceSelector": {}},
        {"podSelector": {}},
        {"podSelector": {"matchExpressions": [{"key": "torchfleet.io/job", "operator": "Exists"}]}},
    ],
    ids=["namespaces", "same-job-all-namespaces", "all-pods", "expression"],
)
def test_an_egress_peer_beyond_the_job_is_refused(training_layer, researcher, capsys, peer):
    job, documents = cli_policy(training_layer, capsys)
    policy = documents["NetworkPolicy"]
    same_job = {"matchLabels": {"torchfleet.io/job": job}}
    peer = {k: (same_job if v == {"matchLabels": {"torchfleet.io/job": "{job}"}} else v) for k, v in peer.items()}
    policy["spec"]["egress"] = [{"to": [peer]}]
    refused(training_layer, researcher, policy, PEERS)


def test_the_clis_own_policies_are_admitted(training_layer, researcher, capsys):
    """The job's policy with its Lighthouse rule, the Lighthouse's policy (peers: the job's training pods) and
    the --allow-egress one."""
    _, documents = cli_policy(training_layer, capsys, "--recovery", "inplace")
    assert any(
        "torchfleet.io/lighthouse" in p.get("podSelector", {}).get("matchLabels", {})
        for rule in documents["NetworkPolicy"]["spec"]["egress"]
        for p in rule["to"]
    )
    admitted(training_layer, researcher, documents["NetworkPolicy"])
    capsys.readouterr()
    code = main(["submit", name("tier-xnp"), "--cpu", "--nodes", "1", "--image", IMAGE, "--recovery", "inplace",
                 "--allow-egress", "0.0.0.0/0", "--dry-run", "--", "python", "train.py"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    policies = [d for d in yaml.safe_load_all(out) if d and d["kind"] == "NetworkPolicy"]
    assert len(policies) == 3, [p["metadata"]["name"] for p in policies]
    for policy in policies:
        policy["metadata"]["namespace"] = training_layer.namespace
        admitted(training_layer, researcher, policy)


# ---- minors: a job beside etcd ------------------------------------------------------------------------------------


def test_a_job_on_the_manager_pool_is_refused(training_layer, researcher, capsys):
    """A job's pods never select torchfleet.io/pool=manager (etcd's nodes), nor does any other pod of a
    researcher's (test_researcher_pods.py: the reader and the Lighthouse, issue 30)."""
    job = cli_documents(training_layer, capsys, name("tier-xpool"))["Job"]
    template(job)["spec"]["nodeSelector"] = {"torchfleet.io/pool": "manager"}
    refused(training_layer, researcher, job, "never torchfleet.io/pool=manager")
