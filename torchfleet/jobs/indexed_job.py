"""Pure builders for Kubernetes' own ``batch/v1`` Indexed Job: the ``job`` operator (the default) and the shape
it shares with ``--recovery inplace`` (inplace_job.py).

The ``job`` operator runs torchrun's elastic agents (the training image's launcher) with the etcd-v2 rendezvous,
as the ElasticJob and PyTorchJob did, but needs no controller of ours: the Job controller of every Kubernetes
1.33+ does all of it, with current API types (the 2020 ElasticJob controller drops ``seccompProfile``, so the
``restricted`` Pod Security level refuses its pods; README.md, "For researchers: running jobs").

- ``completionMode: Indexed``, ``parallelism = max nodes`` (``completions`` more: ``shell`` says why): every
  possible node is asked for at once; torchrun's ``--nnodes=MIN:MAX`` starts training once MIN agents have
  joined and lets the others join later (a membership change). Pods beyond MIN may stay Pending while spot
  capacity is short: that is the elastic range doing its job. The index is not the rank (the rendezvous
  assigns ranks).
- ``successPolicy``: one succeeded index is the job's success. torchrun ends every agent of a finished run
  together (its exit barrier), and a node still Pending then never needs to start: the Job controller
  removes the job's remaining pods once the job is complete, so no Pending pod keeps the autoscaler adding
  spot GPUs for a finished job (what the ElasticJob's ignored cleanPodPolicy could not do).
- ``podFailurePolicy`` (rules in order, the first that matches decides):
  a pod with the ``DisruptionTarget`` condition (spot reclaim, preemption, drain, taint eviction, node
  shutdown) and the exit 143 (SIGTERM: the launcher maps a SIGTERM to 143) are replaced without spending a
  retry. 137 (SIGKILL) is counted: it is also what an out-of-memory kill leaves (on cgroup v2 the kubelet
  kills the container's whole cgroup since 1.28, kubernetes/kubernetes#117793), so a free retry would loop
  forever, and a reclaim's late SIGKILL carries DisruptionTarget anyway. Any other exit from 1 to 127 fails
  the whole job at once, with one exception: 75, the launcher's "rendezvous unavailable" (etcd unreachable,
  or too few nodes within the join timeout), which is retried and counted. Exit 2 is a bad argument and 1 a
  bug torchrun already restarted 100 times: another pod would fail the same way. Other exits above 127 (a
  crash by signal) are counted against ``backoffLimitPerIndex``.
- ``backoffLimitPerIndex`` and ``maxFailedIndexes = MAX - MIN``: the job goes on as long as MIN nodes can run.
- ``podReplacementPolicy: Failed`` (required with a pod failure policy): a replacement starts only once the
  old pod has ended, its SIGTERM checkpoint written.
  https://kubernetes.io/docs/concepts/workloads/controllers/job/#pod-failure-policy
"""

from __future__ import annotations

from typing import Any

from torchfleet.jobs.pod_template import ANNOTATION_MIN_NODES, job_metadata, pod_template, restart_container
from torchfleet.jobs.spec import JobRequest
from torchfleet.jobs.target import Target

BATCH_JOB = {"group": "batch", "version": "v1", "plural": "jobs", "kind": "Job"}
# Every torchfleet Indexed Job carries it (value: its recovery mode); cluster.py lists and deletes only
# Jobs that do, never the platform's store-owner Job or a user's own.
LABEL_RECOVERY = "torchfleet.io/recovery"
RECOVERY_MODES = ("restart", "inplace")
CONTAINER_NAME = "worker"
# Retries of one index for failures that are not disruptions (those cost none); inside the pod torchrun
# (or, in place, replica_node.py) already restarted the workers up to 100 times.
BACKOFF_LIMIT_PER_INDEX = 3
EXIT_BAD_INPUT = 2  # a wrong argument or setting: the launcher ends the run with it at once
# The launcher's own exit codes (training-image/elastic_trainer/launcher.py): 75 (EX_TEMPFAIL) when the
# rendezvous cannot be reached or formed in time, 143 for SIGTERM (137, SIGKILL or an OOM kill, is counted).
EXIT_RDZV_UNAVAILABLE = 75
EXIT_SIGNALLED = (143,)
FATAL_EXIT_CODES = tuple(code for code in range(1, 128) if code != EXIT_RDZV_UNAVAILABLE)
DISRUPTION_IGNORED = {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}


def on_exit_codes(action: str, codes: tuple[int, ...] | list[int]) -> dict[str, Any]:
    return {
        "action": action,
        "onExitCodes": {"containerName": CONTAINER_NAME, "operator": "In", "values": sorted(codes)},
    }


def shell(
    req: JobRequest,
    target: Target,
    *,
    recovery: str,
    failure_rules: list[dict[str, Any]],
    template: dict[str, Any],
    spare_indexes: int = 0,
) -> dict[str, Any]:
    """The Indexed Job both recovery modes submit; the pod failure rules and the pod are the mode's.

    SPARE_INDEXES: completions beyond MAX nodes. The Job controller fails a job once failed plus
    succeeded indexes reach ``completions``, before it reads the success policy (pkg/controller/job
    job_controller.go at v1.35.4: ``failedIndexes.total()+succeededIndexes.total() >= Completions`` ->
    FailedIndexes): with completions = MAX, a run that lost one index for good and then finished was marked
    Failed. Failed indexes stop at maxFailedIndexes and succeeded ones at the pods running, so MAX +
    maxFailedIndexes + 1 is out of reach; a spare index also starts a new node in place of a failed one."""
    if recovery not in RECOVERY_MODES:
        raise ValueError(f"recovery: one of {', '.join(RECOVERY_MODES)}, got {recovery!r}")
    metadata = job_metadata(req, target)
    metadata["labels"][LABEL_RECOVERY] = recovery
    metadata["annotations"][ANNOTATION_MIN_NODES] = str(req.min_nodes)
    return {
        "apiVersion": f"{BATCH_JOB['group']}/{BATCH_JOB['version']}",
        "kind": BATCH_JOB["kind"],
        "metadata": metadata,
        "spec": {
            "completionMode": "Indexed",
            "completions": req.max_nodes + spare_indexes,
            "parallelism": req.max_nodes,  # ask for all; train as soon as min have joined
            "backoffLimitPerIndex": BACKOFF_LIMIT_PER_INDEX,
            "maxFailedIndexes": req.max_nodes - req.min_nodes,
            "podReplacementPolicy": "Failed",
            # The first index to succeed means the job did (each mode's docstring says why); the
            # rest are then stopped. (KEP-3998: beta and on by default in 1.31, GA in 1.33.)
            "successPolicy": {"rules": [{"succeededCount": 1}]},
            "podFailurePolicy": {"rules": failure_rules},
            "template": template,
        },
    }


def restart_failure_rules() -> list[dict[str, Any]]:
    """The ``job`` operator's rules (module docstring). Disruptions first: a reclaimed pod's exit code is
    whatever the kill left, not a verdict on the training code."""
    return [
        DISRUPTION_IGNORED,
        on_exit_codes("Ignore", EXIT_SIGNALLED),
        on_exit_codes("FailJob", FATAL_EXIT_CODES),
    ]


def restart_job(req: JobRequest, target: Target) -> dict[str, Any]:
    """``operator: job``: torchrun's elastic agents in an Indexed Job."""
    return shell(
        req,
        target,
        recovery="restart",
        failure_rules=restart_failure_rules(),
        template=pod_template(req, target, restart_container(req, target)),
        spare_indexes=req.max_nodes - req.min_nodes + 1,
    )


def recovery_of(job: dict[str, Any]) -> str:
    """``inplace`` for an in-place Indexed Job, else ``restart`` (every operator's job)."""
    labels = (job.get("metadata") or {}).get("labels") or {}
    return "inplace" if labels.get(LABEL_RECOVERY) == "inplace" else "restart"
