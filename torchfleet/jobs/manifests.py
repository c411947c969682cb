"""Pure builders: a JobRequest and its Target in, everything ``submit`` creates out: the job (an Indexed Job
for the default ``job`` operator: indexed_job.py; an ElasticJob or a PyTorchJob here; an Indexed Job and its
Lighthouse for ``--recovery inplace``: inplace_job.py) and the network policies it owns; and the readers that
take a job object of any of these kinds apart (its nodes, its worker spec, its container).

The pod every kind runs is pod_template.py's. No client, no I/O: ``--dry-run`` prints exactly what ``submit``
sends, and the tests validate the same dicts against the CRD schemas.
"""

from __future__ import annotations

from typing import Any

from components.kube import manifests as kube_manifests
from torchfleet.jobs import indexed_job, inplace_job
from torchfleet.jobs.egress import ip_block
from torchfleet.jobs.indexed_job import BATCH_JOB
from torchfleet.jobs.pod_template import (
    ANNOTATION_MIN_NODES,
    CONTAINER_NAME,
    LABEL_SWEEP,
    job_metadata,
    pod_template,
    restart_container,
)
from torchfleet.jobs.spec import JobRequest
from torchfleet.jobs.target import Target

ELASTICJOB = {"group": "elastic.pytorch.org", "version": "v1alpha1", "plural": "elasticjobs", "kind": "ElasticJob"}
PYTORCHJOB = {"group": "kubeflow.org", "version": "v1", "plural": "pytorchjobs", "kind": "PyTorchJob"}
RESOURCES = {"job": BATCH_JOB, "torchelastic": ELASTICJOB, "kubeflow": PYTORCHJOB}

# ExitCode: 1-127 end the job (a bug will not fix itself on retry), 128-255 recreate the pod
# (130/137/138/143: spot preemption, OOM kill, SIGTERM; the launcher maps SIGTERM to 143).
# Kubeflow honours it; the 2020 ElasticJob controller never sets Failed with it (README.md).
RESTART_POLICY = "ExitCode"


def elastic_job(req: JobRequest, target: Target) -> dict[str, Any]:
    return {
        "apiVersion": f"{ELASTICJOB['group']}/{ELASTICJOB['version']}",
        "kind": ELASTICJOB["kind"],
        "metadata": job_metadata(req, target),
        "spec": {
            "rdzvEndpoint": target.etcd_endpoint,
            "minReplicas": req.min_nodes,
            "maxReplicas": req.max_nodes,
            # Finished pods stay for `torchfleet logs`; running ones go. The key is `RunPolicy`: the
            # controller's Go field `RunPolicy common.RunPolicy json:",inline"` is a named field, and
            # Go's JSON (and json-iterator) inline only embedded ones, so a spec-level cleanPodPolicy
            # is never read (pytorch/elastic kubernetes/api/v1alpha1/elasticjob_types.go).
            "RunPolicy": {"cleanPodPolicy": "Running"},
            "replicaSpecs": {
                "Worker": {
                    "replicas": req.max_nodes,  # ask for all; train as soon as min have joined
                    "restartPolicy": RESTART_POLICY,
                    "template": pod_template(req, target, restart_container(req, target)),
                }
            },
        },
    }


def pytorch_job(req: JobRequest, target: Target) -> dict[str, Any]:
    return {
        "apiVersion": f"{PYTORCHJOB['group']}/{PYTORCHJOB['version']}",
        "kind": PYTORCHJOB["kind"],
        "metadata": job_metadata(req, target),
        "spec": {
            "runPolicy": {"cleanPodPolicy": "Running"},
            # Elastic mode: workers only, no Master; the operator passes these to torchrun as PET_*
            # environment variables. etcd-v2: the legacy etcd backend loses keys after 2 hours.
            "elasticPolicy": {
                "rdzvBackend": "etcd-v2",
                "rdzvHost": target.etcd_host,
                "rdzvPort": target.etcd_port,
                # One rendezvous per submission: torchrun's default id ("none") would put every job
                # that does not set one into the same etcd rendezvous, and the job's name would meet
                # the closed rendezvous of an earlier run of that name (spec.new_rdzv_id).
                "rdzvId": req.rdzv_id,
                "minReplicas": req.min_nodes,
                "maxReplicas": req.max_nodes,
            },
            # spec.nprocPerNode (a string); elasticPolicy.nProcPerNode is deprecated since v1.7.
            "nprocPerNode": str(req.nproc_per_node),
            "pytorchReplicaSpecs": {
                "Worker": {
                    "replicas": req.max_nodes,
                    "restartPolicy": RESTART_POLICY,
                    "template": pod_template(req, target, restart_container(req, target)),
                }
            },
        },
    }


def build(req: JobRequest, target: Target) -> dict[str, Any]:
    if req.recovery == "inplace":  # no operator: an Indexed Job (inplace_job.py)
        return inplace_job.indexed_job(req, target)
    if target.operator == "job":  # Kubernetes' own Indexed Job, no controller of ours (indexed_job.py)
        return indexed_job.restart_job(req, target)
    return {"torchelastic": elastic_job, "kubeflow": pytorch_job}[target.operator](req, target)


def is_indexed_job(job: dict[str, Any]) -> bool:
    """A batch/v1 Job (the ``job`` operator's or a ``--recovery inplace`` one) rather than a custom resource."""
    return job.get("kind") == BATCH_JOB["kind"]


def min_max(job: dict[str, Any]) -> tuple[int | None, int | None]:
    """(min, max) nodes of a job object of any kind."""
    spec = job.get("spec") or {}
    if is_indexed_job(job):
        low = ((job.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_MIN_NODES)
        return (int(low) if low and low.isdigit() else None), spec.get("parallelism", spec.get("completions"))
    policy = spec.get("elasticPolicy") or spec
    return policy.get("minReplicas"), policy.get("maxReplicas")


def worker_spec(job: dict[str, Any]) -> dict[str, Any]:
    spec = job.get("spec") or {}
    if is_indexed_job(job):
        return {"replicas": spec.get("parallelism", spec.get("completions")), "template": spec.get("template") or {}}
    return ((spec.get("replicaSpecs") or spec.get("pytorchReplicaSpecs") or {}).get("Worker")) or {}


def container_name(job: dict[str, Any]) -> str:
    """The training container of a job object (its logs are the job's logs)."""
    containers = ((worker_spec(job).get("template") or {}).get("spec") or {}).get("containers") or []
    if containers and containers[0].get("name"):
        return containers[0]["name"]
    kinds = {resource["kind"]: operator for operator, resource in RESOURCES.items()}
    return CONTAINER_NAME[kinds.get(job.get("kind"), "torchelastic")]


def network_policy(req: JobRequest, target: Target) -> dict[str, Any]:
    """The job's own network policy. The namespace denies everything by default and admits only
    etcd and DNS for training pods; this is the per-job hole that lets the job's pods reach each
    other on any port (the rendezvous store and NCCL/Gloo pick ports at run time). The training
    layer owns its shape; submit makes the job its owner, so deleting the job removes it.
    """
    policy = kube_manifests.job_network_policy(target.namespace, req.name)
    if req.sweep:
        policy["metadata"]["labels"][LABEL_SWEEP] = req.sweep
    if req.recovery == "inplace":
        policy["spec"]["egress"].append(inplace_job.to_lighthouse_rule(req.name))
    return policy


def egress_policy_name(job: str) -> str:
    return f"job-{job}-egress"


def egress_policy(req: JobRequest, target: Target) -> dict[str, Any] | None:
    """The opt-in hole for ``--allow-egress CIDR``: the namespace lets training pods reach only
    their own job, etcd and DNS (components/kube), so S3, HTTPS and dataset downloads fail unless
    the job asks; the clouds' metadata endpoints stay closed inside any CIDR (egress.py). Policies
    add up: this one only widens what the job's pods may reach, on any port. Owned by the job, like
    the job's own policy, so deleting the job removes it."""
    if not req.egress:
        return None
    policy = kube_manifests.job_network_policy(target.namespace, req.name)
    meta = policy["metadata"]
    meta["name"] = egress_policy_name(req.name)
    if req.sweep:
        meta["labels"][LABEL_SWEEP] = req.sweep
    policy["spec"] = {
        "podSelector": policy["spec"]["podSelector"],
        "policyTypes": ["Egress"],
        "egress": [{"to": [{"ipBlock": ip_block(cidr)} for cidr in req.egress]}],
    }
    return policy


def network_policies(req: JobRequest, target: Target) -> list[dict[str, Any]]:
    """Every policy submit creates for the job: its own, then the opt-in egress one."""
    egress = egress_policy(req, target)
    return [network_policy(req, target), *([egress] if egress else [])]


def owned_documents(req: JobRequest, target: Target) -> list[dict[str, Any]]:
    """Everything submit creates besides the job, each owned by it (deleting the job removes them): the
    network policies (created before the job, then given their owner: commands.py) and, for
    ``--recovery inplace``, the Lighthouse (inplace_job.py, created after the job)."""
    documents = network_policies(req, target)
    if req.recovery == "inplace":
        documents += inplace_job.owned_documents(req, target)
    return documents
