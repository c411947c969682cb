"""Pure builders for ``--recovery inplace`` jobs: an Indexed Job, its Lighthouse and their network policies.

In the in-place mode (docs/recovery-modes.md) each pod is one torchft replica
group and a per-job Lighthouse decides, every step, which groups train; survivors never restart.
No operator or rendezvous is involved, so the job is a plain Kubernetes ``batch/v1`` Job:

- ``completionMode: Indexed``: pod ``i`` gets ``JOB_COMPLETION_INDEX=i``, the replica group it is
  (the trainer reads it), and a failed pod is replaced *with the same index*, so a replacement
  takes the dead group's slice of every global batch and heals from a live peer.
- ``completions`` = MAX + (MAX - MIN) + 1, as the ``job`` operator's (indexed_job.py, ``shell``):
  with completions = MAX, a 1:2 job whose index 1 failed for good and whose index 0 then finished
  was marked Failed. An index past MAX starts only once an index failed for good (the Job
  controller creates the lowest pending index first); the trainer makes it a replica group of its
  own on slice ``index mod MAX`` (training-image/elastic_trainer/inplace/__init__.py says what that costs).
- ``backoffLimitPerIndex`` retries a failing group on its own; ``maxFailedIndexes`` lets the job
  go on as long as ``min`` groups can still train. A spot reclaim (the pod's ``DisruptionTarget``
  condition) is ignored by the pod failure policy: it costs no retry. Exit 2 (bad input) fails
  the job at once: every group would fail the same way.
  https://kubernetes.io/docs/concepts/workloads/controllers/job/#backoff-limit-per-index
- ``podReplacementPolicy: Failed``: a replacement starts only once the old pod has ended (its
  SIGTERM checkpoint written), never two pods claiming one replica group.

The Lighthouse is a Deployment of one pod on the CPU pool (pod_template.cpu_pool: it runs the job's image,
so never on the manager pool beside etcd; on-demand unless cpuPool.spot, since a reclaim takes the job's
coordinator until the Deployment's next pod is up) and a ClusterIP Service; everything but the Job carries an owner
reference to it (commands.py), so ``torchfleet delete`` removes all of it.
"""

from __future__ import annotations

from typing import Any

from components import spec as platform
from components.kube import manifests as kube_manifests
from torchfleet.jobs import pod_template
from torchfleet.jobs.indexed_job import (  # the Indexed Job's shape, shared with the `job` operator
    CONTAINER_NAME,
    DISRUPTION_IGNORED,
    EXIT_BAD_INPUT,
    on_exit_codes,
    shell,
)
from torchfleet.jobs.spec import JobRequest
from torchfleet.jobs.target import Target

LIGHTHOUSE_PORT = 29510  # torchft_lighthouse's default --bind port
LIGHTHOUSE_CONTAINER = "lighthouse"
# The Lighthouse's pods carry this label (value: the job) and *not* the job label, so the job's own
# network policy (any port between the job's pods) does not select them; lighthouse_policy admits
# only the job's training pods, on the Lighthouse port.
LABEL_LIGHTHOUSE = "torchfleet.io/lighthouse"
# A group that stops heartbeating for this long leaves the quorum: the survivors' next step comes
# about this long after a node dies. torchft's default is 5 s; 2 s keeps a spot reclaim cheap and
# is still far above a heartbeat's round trip inside one zone (the job's pods share a zone).
HEARTBEAT_TIMEOUT_MS = 2000
# How long a quorum waits for a group that heartbeats but has not asked to join (a replacement
# still loading its data) before the others go on without it. torchft's default of 60 s would
# stall every survivor for a minute at each replacement.
JOIN_TIMEOUT_MS = 5000


def lighthouse_name(job: str) -> str:
    return f"{job}-lighthouse"


def lighthouse_address(req: JobRequest, target: Target) -> str:
    """What the workers' ``TORCHFT_LIGHTHOUSE`` holds: the Service's name in the job's namespace."""
    return f"http://{lighthouse_name(req.name)}.{target.namespace}.svc:{LIGHTHOUSE_PORT}"


def worker_env(req: JobRequest, target: Target) -> dict[str, str]:
    """The in-place trainer's settings (training-image/elastic_trainer/inplace/settings.py reads them)."""
    return {
        "TORCHFLEET_RECOVERY": "inplace",
        "TORCHFT_LIGHTHOUSE": lighthouse_address(req, target),
        # Every global batch is cut into one slice per possible group, so a group's data does
        # not move when others come and go; a step without some groups trains on fewer samples.
        "TORCHFLEET_REPLICA_GROUPS": str(req.max_nodes),
        "TORCHFLEET_MIN_REPLICA_GROUPS": str(req.min_nodes),
    }


def worker_container(req: JobRequest, target: Target) -> dict[str, Any]:
    """The container's name, args and environment for ``pod_template``: no rendezvous and no
    controller-made Services; the launcher hands the node to replica_node.py, one worker (the replica
    group) per pod."""
    env = pod_template.environment(req)
    env[1:1] = [{"name": k, "value": v} for k, v in worker_env(req, target).items()]
    return {"name": CONTAINER_NAME, "args": ["--nproc_per_node=1", *req.command], "env": env}


def _lighthouse_labels(req: JobRequest) -> dict[str, str]:
    return {LABEL_LIGHTHOUSE: req.name, pod_template.MANAGED_BY: "torchfleet"}


def indexed_job(req: JobRequest, target: Target) -> dict[str, Any]:
    # A group exits 0 only once the job's last step is trained and its final checkpoint is committed
    # (training-image/elastic_trainer/inplace/ending.py, _finish), so the first index to succeed means the job
    # did: without the success policy, an index whose retries ran out (a crash-looping node) would mark a
    # finished job Failed. Exit 2 (bad input) fails the job at once: every group would fail the same way;
    # a spot reclaim, preemption or node drain replaces the pod without spending a retry. Disruptions
    # come first, as in restart_failure_rules: a reclaimed pod's exit code is whatever the kill left.
    rules = [DISRUPTION_IGNORED, on_exit_codes("FailJob", [EXIT_BAD_INPUT])]
    template = pod_template.pod_template(req, target, worker_container(req, target))
    return shell(req, target, recovery="inplace", failure_rules=rules, template=template,
                 spare_indexes=req.max_nodes - req.min_nodes + 1)


# torchft's Lighthouse is Rust (torchft._torchft.lighthouse_main). Its console script imports it as
# torchft._torchft, which runs torchft/__init__.py first, and that imports torch: 584 MiB peak RSS with
# the CUDA wheel the job's image carries (bench/lighthouse_memory.py). Loaded from its file alone, the
# extension needs no torch. find_spec of a top-level package does not import it.
LIGHTHOUSE_LOAD = (
    "import glob, importlib.machinery as m, importlib.util as u, os, sys; "
    "(path,) = glob.glob(os.path.join(u.find_spec('torchft').submodule_search_locations[0], '_torchft.*.so')); "
    "loader = m.ExtensionFileLoader('torchft._torchft', path); "
    "spec = u.spec_from_file_location('torchft._torchft', path, loader=loader); "
    "torchft = u.module_from_spec(spec); spec.loader.exec_module(torchft)"
)
# lighthouse_main parses the process's own argv past argv[0] (Rust's env::args, not sys.argv), taking
# argv[1] as its name: under `python -c CODE` that is "-c" and CODE an unexpected argument. So the
# command re-executes Python on the loader read from a pipe (`python /dev/fd/N FLAGS`): argv[1] is
# then a path, the flags follow, and the read-only root needs no file written.
LIGHTHOUSE_MAIN = (
    "import os, sys; r, w = os.pipe(); "
    f"os.write(w, {LIGHTHOUSE_LOAD + '; sys.exit(torchft.lighthouse_main())'!r}.encode()); os.close(w); "
    "os.set_inheritable(r, True); os.execv(sys.executable, [sys.executable, f'/dev/fd/{r}', *sys.argv[1:]])"
)


def lighthouse_deployment(req: JobRequest, target: Target) -> dict[str, Any]:
    labels = _lighthouse_labels(req)
    probe = {"tcpSocket": {"port": LIGHTHOUSE_CONTAINER}, "periodSeconds": 5}
    container = {
        "name": LIGHTHOUSE_CONTAINER,
        # The job's own image: built on the training image, it has torchft (and so the
        # torchft_lighthouse binary) at the version the workers speak to it with.
        "image": req.image,
        "imagePullPolicy": "IfNotPresent" if target.cloud == "local" else "Always",
        "command": [
            "python", "-c", LIGHTHOUSE_MAIN, f"--bind=[::]:{LIGHTHOUSE_PORT}", f"--min_replicas={req.min_nodes}",
            f"--heartbeat_timeout_ms={HEARTBEAT_TIMEOUT_MS}", f"--join_timeout_ms={JOIN_TIMEOUT_MS}",
        ],
        "env": [{"name": "RUST_LOG", "value": "warn"}],  # info logs every quorum of every step
        "ports": [{"name": LIGHTHOUSE_CONTAINER, "containerPort": LIGHTHOUSE_PORT, "protocol": "TCP"}],
        "readinessProbe": probe,
        "livenessProbe": {**probe, "initialDelaySeconds": 10, "failureThreshold": 6},
        # Peak RSS 15 MiB idle, 17 MiB after 64 replica groups x 20 quorums, 24 MiB after 256 x 20
        # (bench/lighthouse_memory.py, 2026-11-25, torchft 0.2.0): 32Mi asked for, 5x the worst as the limit.
        "resources": {"requests": {"cpu": "100m", "memory": "32Mi"}, "limits": {"cpu": "1", "memory": "128Mi"}},
        "securityContext": {**pod_template.container_security(), "readOnlyRootFilesystem": True},
    }
    pod_spec: dict[str, Any] = {
        "serviceAccountName": pod_template.SERVICE_ACCOUNT,
        "automountServiceAccountToken": False,
        "priorityClassName": pod_template.PRIORITY_CLASS,
        # The restricted level the namespace enforces (k8s/base/namespace.yaml), as the workers.
        "securityContext": {"runAsNonRoot": True, "runAsUser": platform.TRAINING_UID,
                            "runAsGroup": platform.TRAINING_UID, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
    }
    # The CPU pool: the Lighthouse runs the job's image, a researcher's, so never beside etcd (issue 30).
    pod_spec.update(pod_template.cpu_pool(target))
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": lighthouse_name(req.name), "namespace": target.namespace, "labels": labels},
        "spec": {
            "replicas": 1,
            # Never two Lighthouses at once: each would form its own quorum and split the job.
            "strategy": {"type": "Recreate"},
            "revisionHistoryLimit": 1,
            "selector": {"matchLabels": {LABEL_LIGHTHOUSE: req.name}},
            "template": {"metadata": {"labels": labels}, "spec": pod_spec},
        },
    }


def lighthouse_service(req: JobRequest, target: Target) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": lighthouse_name(req.name), "namespace": target.namespace,
                     "labels": _lighthouse_labels(req)},
        "spec": {
            "type": "ClusterIP",
            "selector": {LABEL_LIGHTHOUSE: req.name},
            "ports": [{"name": LIGHTHOUSE_CONTAINER, "port": LIGHTHOUSE_PORT, "targetPort": LIGHTHOUSE_CONTAINER,
                       "protocol": "TCP"}],
        },
    }


def lighthouse_policy(req: JobRequest, target: Target) -> dict[str, Any]:
    """The Lighthouse admits the job's own training pods on its port, and reaches nothing."""
    workers = {"podSelector": {"matchLabels": kube_manifests.training_pod_labels(req.name)}}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": f"job-{req.name}-lighthouse", "namespace": target.namespace,
                     "labels": _lighthouse_labels(req)},
        "spec": {
            "podSelector": {"matchLabels": {LABEL_LIGHTHOUSE: req.name}},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [workers], "ports": [{"protocol": "TCP", "port": LIGHTHOUSE_PORT}]}],
            "egress": [],
        },
    }


def to_lighthouse_rule(job: str) -> dict[str, Any]:
    """The egress rule the job's own policy gains: its pods reach their Lighthouse's port, no other."""
    return {"to": [{"podSelector": {"matchLabels": {LABEL_LIGHTHOUSE: job}}}],
            "ports": [{"protocol": "TCP", "port": LIGHTHOUSE_PORT}]}


def owned_documents(req: JobRequest, target: Target) -> list[dict[str, Any]]:
    """What submit creates after the Job, each owned by it: the Lighthouse's policy, Service, Deployment."""
    return [lighthouse_policy(req, target), lighthouse_service(req, target), lighthouse_deployment(req, target)]
