"""Pure builders: a JobRequest and its Target in, a job dict out: an Indexed Job for the default ``job``
operator (indexed_job.py), an ElasticJob or a PyTorchJob (an Indexed Job and its Lighthouse for
``--recovery inplace``: inplace_job.py).

No client, no I/O: ``--dry-run`` prints exactly what ``submit`` sends, and the tests validate
the same dicts against the CRD schemas.
"""

from __future__ import annotations

from typing import Any

from components import spec as platform
from components.kube import manifests as kube_manifests
from torchfleet.jobs import workdir
from torchfleet.jobs.egress import ip_block
from torchfleet.jobs.spec import JobRequest
from torchfleet.jobs.target import Target

ELASTICJOB = {"group": "elastic.pytorch.org", "version": "v1alpha1", "plural": "elasticjobs", "kind": "ElasticJob"}
PYTORCHJOB = {"group": "kubeflow.org", "version": "v1", "plural": "pytorchjobs", "kind": "PyTorchJob"}
BATCH_JOB = {"group": "batch", "version": "v1", "plural": "jobs", "kind": "Job"}
RESOURCES = {"job": BATCH_JOB, "torchelastic": ELASTICJOB, "kubeflow": PYTORCHJOB}

# The ElasticJob controller reads exit codes only from the container with this name (docs/facts.md,
# "Controllers and exit codes");
# the training operator's validation refuses a PyTorchJob without a container named "pytorch"
# (kubeflow/training-operator pkg/apis/kubeflow.org/v1 pytorch_validation.go, v1.9.x).
# The Indexed Job's pod failure policy names its container (indexed_job.py).
CONTAINER_NAME = {"job": "worker", "torchelastic": "elasticjob-worker", "kubeflow": "pytorch"}
# The training image's entrypoint: torchrun with etcd-v2 rendezvous and tuned timeouts. The
# ElasticJob controller prepends --rdzv_backend=etcd --rdzv_endpoint --rdzv_id --nnodes to the
# *args*, so the launcher must be the command and the user's script the args; the launcher turns
# the prepended legacy `etcd` backend into `etcd-v2`.
LAUNCHER = ("python", "-m", "elastic_trainer.launcher")
SERVICE_ACCOUNT = "training-job"  # k8s/base/jobs/serviceaccount.yaml
PRIORITY_CLASS = "torchfleet-training"  # k8s/base/cluster/priorityclass-training.yaml
MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_SWEEP = "torchfleet.io/sweep"
ANNOTATION_ZONE = "torchfleet.io/zone"
ANNOTATION_MACHINE = "torchfleet.io/machine"
ANNOTATION_OVERRIDES = "torchfleet.io/overrides"
ANNOTATION_CHECKPOINTS = "torchfleet.io/checkpoint-dir"
ANNOTATION_MIN_NODES = "torchfleet.io/min-nodes"  # an Indexed Job has no minReplicas field to hold it
ANNOTATION_RDZV_ID = "torchfleet.io/rdzv-id"  # the etcd key /torch/elastic/rendezvous/<id> of the job's rendezvous
SHARED_VOLUME = "shared"
SHM_VOLUME = "dshm"
# ExitCode: 1-127 end the job (a bug will not fix itself on retry), 128-255 recreate the pod
# (130/137/138/143: spot preemption, OOM kill, SIGTERM; the launcher maps SIGTERM to 143).
# Kubeflow honours it; the 2020 ElasticJob controller never sets Failed with it (README.md).
RESTART_POLICY = "ExitCode"
# Pods on a node that stopped reporting (node.kubernetes.io/unreachable, not-ready) are evicted after
# this many seconds instead of the DefaultTolerationSeconds admission plugin's 300. The node
# lifecycle controller taints a node only after its node-monitor-grace-period (50 s since
# Kubernetes 1.32), and such a node's pod is lost to its job long before: the other agents
# declare it dead within one rendezvous heartbeat budget (3 s to 15 s, rdzvconf.py) and go on
# without it, so 5 more minutes only delay its replacement. 30 s more rides out a kubelet restart
# (already inside the 50 s) without evicting a pod whose node only blinked; a zone-wide outage
# evicts nothing (the controller stops evicting in a zone where most nodes are unhealthy).
NODE_LOSS_TOLERATION_S = 30
NODE_LOSS_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
# torch's dynamic rendezvous advertises socket.getfqdn() as the node's address unless torchrun
# gets --local-addr; a pod's own DNS record may not exist, or name the pod it replaced for ~30 s.
# The pod IP from the downward API always routes. $(POD_IP) is expanded by the kubelet.
POD_IP_ENV = "POD_IP"
LOCAL_ADDR_ARG = f"--local-addr=$({POD_IP_ENV})"
# The port each controller looks up by name: the ElasticJob controller makes a Service per pod
# from "elasticjob-port" (pytorch/elastic kubernetes/api/v1alpha1 DefaultContainerPortName);
# the training operator defaults "pytorchjob-port" (pytorch_defaults.go). Declared so the
# Services exist and the operator's diff is empty.
CONTAINER_PORT = {
    "torchelastic": {"name": "elasticjob-port", "containerPort": 10291, "protocol": "TCP"},
    "kubeflow": {"name": "pytorchjob-port", "containerPort": 23456, "protocol": "TCP"},
}


def labels(req: JobRequest) -> dict[str, str]:
    # The namespace's network policies admit traffic by role and job (training_pod_labels).
    out = {**kube_manifests.training_pod_labels(req.name), MANAGED_BY: "torchfleet"}
    if req.sweep:
        out[LABEL_SWEEP] = req.sweep
    return out


def environment(req: JobRequest) -> list[dict[str, Any]]:
    env = {
        "TORCHFLEET_JOB": req.name,
        "TORCHFLEET_CHECKPOINT_DIR": req.checkpoint_dir,
        "TORCHFLEET_OUTPUT_DIR": req.output_dir,
        "TORCHFLEET_DATALOADER_WORKERS": str(req.sizing.loader_workers),
        # torch 2.13 rejoin bug (docs/facts.md, "Rendezvous"): the launcher sets it too; set here so it is visible.
        "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
        "PYTHONUNBUFFERED": "1",  # logs reach `torchfleet logs` as they are written
    }
    env.update(dict(req.env))
    # First: a variable can only refer to ones defined before it.
    pod_ip = {"name": POD_IP_ENV, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
    return [pod_ip, *({"name": k, "value": v} for k, v in env.items())]


def _affinity(req: JobRequest, target: Target) -> dict[str, Any] | None:
    if req.zone or target.cloud == "local":
        # local: one node, and kind/minikube nodes carry no zone label; a required affinity on
        # a label no node has leaves every pod Pending.
        return None
    # No zone given: the first pod lands anywhere (a required pod affinity that matches only the
    # pod itself is allowed), and every later pod must join its zone. Cross-zone traffic is slow
    # and billed, and the shared store's mount target is per zone.
    return {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {platform.LABEL_JOB: req.name}},
                    "topologyKey": platform.LABEL_ZONE,
                }
            ]
        }
    }


# The training namespace enforces the `restricted` Pod Security level
# (k8s/base/namespace.yaml): the API server refuses a pod without each of these fields.
# https://kubernetes.io/docs/concepts/security/pod-security-standards/#restricted
def pod_security(req: JobRequest) -> dict[str, Any]:
    """Non-root as the request's uid; group and fsGroup the training group, which owns the shared
    store's root (mode 2775), so even an overridden uid can write checkpoints there."""
    return {
        "runAsNonRoot": True,
        "runAsUser": req.run_as_user,
        "runAsGroup": platform.TRAINING_UID,
        "fsGroup": platform.TRAINING_UID,
        # Drivers that apply fsGroup would otherwise chown the whole shared store, recursively, at
        # every pod start; the store's root already belongs to the training group.
        "fsGroupChangePolicy": "OnRootMismatch",
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def container_security() -> dict[str, Any]:
    return {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def _placement(req: JobRequest) -> dict[str, Any]:
    """GPU jobs: the GPU's nodes, tolerating the GPU and spot taints. CPU jobs: no GPU selector
    and no toleration, so they never take a GPU node."""
    selector = {} if req.cpu else {platform.LABEL_GPU: req.gpu}
    if req.zone:
        selector[platform.LABEL_ZONE] = req.zone
    out: dict[str, Any] = {"nodeSelector": selector} if selector else {}
    node_loss = [{"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": NODE_LOSS_TOLERATION_S}
                 for key in NODE_LOSS_TAINTS]
    if req.cpu:
        out["tolerations"] = node_loss
    else:
        out["tolerations"] = [
            {**platform.GPU_TAINT, "operator": "Equal"},
            {**platform.AKS_SPOT_TAINT, "operator": "Equal"},
            *node_loss,
        ]
    return out


def _resources(req: JobRequest) -> dict[str, Any]:
    # CPU unlimited: a throttled data loader starves the GPU. Memory limit = request, so an
    # over-eager loader is killed alone (137, retried) instead of evicting a neighbour.
    s = req.sizing
    requests = {"cpu": f"{s.cpu_millis}m", "memory": f"{s.memory_mib}Mi"}
    limits = {"memory": f"{s.memory_mib}Mi"}
    if not req.cpu:
        requests[platform.GPU_RESOURCE] = limits[platform.GPU_RESOURCE] = str(req.gpus_per_node)
    return {"requests": requests, "limits": limits}


def _worker_container(req: JobRequest, target: Target) -> dict[str, Any]:
    """Name, args, environment and ports: what differs between the recovery modes."""
    if req.recovery == "inplace":
        from torchfleet.jobs import inplace_job

        # No rendezvous and no controller-made Services: the launcher hands the node to
        # replica_node.py, one worker (the replica group) per pod.
        env = environment(req)
        env[1:1] = [{"name": k, "value": v} for k, v in inplace_job.worker_env(req, target).items()]
        return {"name": inplace_job.CONTAINER_NAME, "args": ["--nproc_per_node=1", *req.command], "env": env}
    # The launcher's options come before the user's script, whose own args follow it. The ElasticJob
    # controller prepends --rdzv_id=<job name>: this later one wins (torchrun keeps the last).
    args = [f"--nproc_per_node={req.nproc_per_node}", LOCAL_ADDR_ARG, f"--rdzv_id={req.rdzv_id}"]
    if target.operator == "job":  # no controller passes them: the whole rendezvous is in the args
        args[2:2] = ["--rdzv_backend=etcd-v2", f"--rdzv_endpoint={target.etcd_endpoint}",
                     f"--nnodes={req.min_nodes}:{req.max_nodes}"]
        return {"name": CONTAINER_NAME["job"], "args": [*args, *req.command], "env": environment(req)}
    return {
        "name": CONTAINER_NAME[target.operator],
        "args": [*args, *req.command],
        "env": environment(req),
        "ports": [dict(CONTAINER_PORT[target.operator])],
    }


def pod_template(req: JobRequest, target: Target) -> dict[str, Any]:
    mode = _worker_container(req, target)
    container = {
        "name": mode["name"],
        "image": req.image,
        # A recreated pod re-resolves the tag: cheap, layers are cached. The local stack runs
        # images loaded into the node (`kind load docker-image`), which a pull would not find.
        "imagePullPolicy": "IfNotPresent" if target.cloud == "local" else "Always",
        "command": list(LAUNCHER),
        "args": mode["args"],
        "env": mode["env"],
        **({"ports": mode["ports"]} if "ports" in mode else {}),
        "resources": _resources(req),
        "securityContext": container_security(),
        "volumeMounts": [
            {"name": SHARED_VOLUME, "mountPath": req.mount},
            {"name": SHM_VOLUME, "mountPath": "/dev/shm"},  # noqa: S108 (a volume, not a temp file)
        ],
    }
    spec: dict[str, Any] = {
        "serviceAccountName": SERVICE_ACCOUNT,
        "automountServiceAccountToken": False,  # training code has no business with the API
        # Below the control plane's class, and preemptionPolicy Never: a queued job waits for the
        # autoscaler instead of evicting another job's workers.
        "priorityClassName": PRIORITY_CLASS,
        "securityContext": pod_security(req),
        # The spot notice window: SIGTERM starts a checkpoint that must finish before the node goes.
        "terminationGracePeriodSeconds": target.grace_s,
        **_placement(req),
        "containers": [container],
        "volumes": [
            {"name": SHARED_VOLUME, "persistentVolumeClaim": {"claimName": target.claim}},
            {"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": f"{req.sizing.shm_mib}Mi"}},
        ],
    }
    affinity = _affinity(req, target)
    if affinity:
        spec["affinity"] = affinity
    if req.workdir is not None:  # --workdir: an init container unpacks the code, the command runs in it
        workdir.apply(spec, req.workdir, req.job_dir, SHARED_VOLUME)
    if req.recovery == "inplace" or target.operator == "job":
        # A Job with a pod failure policy requires Never; the Job controller replaces failed pods. The
        # operators set the pods' policy from the replica spec's ExitCode themselves and record a
        # Warning event for every pod whose template sets one (kubeflow/common pod.go, used by both).
        spec["restartPolicy"] = "Never"
    return {"metadata": {"labels": labels(req)}, "spec": spec}


def job_metadata(req: JobRequest, target: Target) -> dict[str, Any]:
    annotations = {
        ANNOTATION_ZONE: req.zone or "",
        ANNOTATION_MACHINE: req.sizing.machine,
        ANNOTATION_CHECKPOINTS: req.checkpoint_dir,
    }
    if req.recovery == "restart":
        annotations[ANNOTATION_RDZV_ID] = req.rdzv_id
    if req.overrides:
        annotations[ANNOTATION_OVERRIDES] = " ".join(req.overrides)
    return {
        "name": req.name,
        "namespace": target.namespace,
        "labels": {**labels(req), **({} if req.cpu else {platform.LABEL_GPU: req.gpu})},
        "annotations": annotations,
    }


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
                    "template": pod_template(req, target),
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
                    "template": pod_template(req, target),
                }
            },
        },
    }


def build(req: JobRequest, target: Target) -> dict[str, Any]:
    if req.recovery == "inplace":  # no operator: an Indexed Job (inplace_job.py)
        from torchfleet.jobs import inplace_job

        return inplace_job.indexed_job(req, target)
    if target.operator == "job":  # Kubernetes' own Indexed Job, no controller of ours (indexed_job.py)
        from torchfleet.jobs import indexed_job

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
        from torchfleet.jobs import inplace_job

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
        from torchfleet.jobs import inplace_job

        documents += inplace_job.owned_documents(req, target)
    return documents
