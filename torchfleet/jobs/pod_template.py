"""The training pod every job kind runs, and the labels and annotations every job object carries.

Pure builders, shared by manifests.py (ElasticJob, PyTorchJob), indexed_job.py (the ``job`` operator) and
inplace_job.py (``--recovery inplace``): the pod's security (the namespace's ``restricted`` level), placement
(GPU nodes, taints, one zone), resources, volumes and environment, around the container its recovery mode
asks for (``restart_container`` here, ``inplace_job.worker_container``). It imports no other job builder:
each job kind builds on it.
"""

from __future__ import annotations

from typing import Any

from components import spec as platform
from components.kube import manifests as kube_manifests
from torchfleet.jobs import workdir
from torchfleet.jobs.spec import JobRequest
from torchfleet.jobs.target import Target

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
# Pods on a node that stopped reporting (node.kubernetes.io/unreachable, not-ready) are evicted after
# this many seconds instead of the DefaultTolerationSeconds admission plugin's 300. The node
# lifecycle controller taints a node only after its node-monitor-grace-period (50 s since
# Kubernetes 1.32), and such a node's pod is lost to its job long before: the other agents
# declare it dead within one rendezvous heartbeat budget (3 s to 15 s, rdzvconf.py) and go on
# without it, so 5 more minutes only delay its replacement (an eviction only marks the pod for
# deletion; the Job replaces it once PodGC fails it, when the Node is deleted or tainted
# node.kubernetes.io/out-of-service: tests/controlplane/node_loss.py). 30 s more rides out a kubelet restart
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


def shared_mount(mount: str, job: str, *, read_only: bool = False) -> dict[str, Any]:
    """The shared store as every pod of JOB mounts it (its training and --workdir containers, its reader and
    TensorBoard pods): only the job's own folder, ``subPath: JOB`` here, which the client puts under its maker's
    folder as it records the maker (``<maker's folder>/JOB``: store_folder.place, in JobClient.stamped; a folder
    named only for the job outlived it and went to whoever next took the name), at ``MOUNT/JOB``, the path it had
    under the whole-store mount, so $TORCHFLEET_CHECKPOINT_DIR, the workdir target and the trainer's paths are
    unchanged. A job's code then cannot reach another job's code or checkpoints on the store; the researcher
    limits refuse any other mount of the claim (k8s/base/cluster/validatingadmissionpolicy-researcher-limits.yaml).

    A missing folder is made by the kubelet before the container starts (k8s.io/kubernetes v1.35.4
    pkg/kubelet/kubelet_pods.go makeMounts: SafeMakeDir with the volume root's mode, GetMode; then
    pkg/volume/util/subpath/subpath_linux.go doSafeMakeDir: mkdirat per level without following links, and
    fchmod to that mode, setgid included, for every level it makes: the maker's folder too, lines 427-470).
    The store's root is 2775 and group 10001 (components/kube/store_owner.py)
    and a folder made in a setgid folder takes its group, so the folder is 2775 with the training group and its
    pods (runAsGroup and fsGroup 10001) can write it, whoever the kubelet writes as (root, or 10001 through an
    EFS access point). The folder stays after the job: the maker's later job of the same name resumes from it."""
    out: dict[str, Any] = {"name": SHARED_VOLUME, "mountPath": f"{mount.rstrip('/')}/{job}", "subPath": job}
    if read_only:
        out["readOnly"] = True
    return out


def store_root(volume_mount: dict[str, Any]) -> str | None:
    """Where a job's pods have the store's root (``--mount``), from their shared volumeMount: shared_mount's
    ``MOUNT/JOB`` less its last element (the subPath's job, ``<maker's folder>/JOB`` or ``JOB`` of a job submitted
    before makers' folders), or the mountPath of a job submitted before per-job mounts (the whole store)."""
    path, sub = volume_mount.get("mountPath"), volume_mount.get("subPath")
    if not path or not sub:
        return path
    job = sub.rstrip("/").rsplit("/", 1)[-1]
    if not job or not path.rstrip("/").endswith(f"/{job}"):
        return None  # not a mount this CLI made: the caller's default applies
    return path.rstrip("/")[: -len(job) - 1] or "/"


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


def cpu_pool(target: Target) -> dict[str, Any]:
    """Where the CLI's pods without a GPU go on a cloud stack: the CPU pool (torchfleet:cpuPool), by its label
    and its exact taint (spec/model.py CPU_TAINT). CPU jobs, readers, TensorBoard and Lighthouses run a
    researcher's code or image, so never on the manager pool beside etcd, which is tainted and which no
    researcher's pod may tolerate or select (issue 30; the researcher limits refuse both). The local stack's
    one node carries no pool label: nothing."""
    if target.cloud == "local":
        return {}
    tolerations = [{**platform.CPU_TAINT, "operator": "Equal"}]
    if target.cloud == "azure":  # AKS taints a spot pool itself (cpuPool.spot: clouds/azure/cpu_pool.py)
        tolerations.append({**platform.AKS_SPOT_TAINT, "operator": "Equal"})
    return {"nodeSelector": {platform.LABEL_POOL: platform.CPU_POOL_NAME}, "tolerations": tolerations}


def _placement(req: JobRequest, target: Target) -> dict[str, Any]:
    """GPU jobs: the GPU's nodes, tolerating the GPU and spot taints. CPU jobs: the CPU pool (cpu_pool), so
    they never take a GPU node nor the manager pool."""
    pool = cpu_pool(target) if req.cpu else {}
    selector = dict(pool.get("nodeSelector", {})) if req.cpu else {platform.LABEL_GPU: req.gpu}
    if req.zone:
        selector[platform.LABEL_ZONE] = req.zone
    out: dict[str, Any] = {"nodeSelector": selector} if selector else {}
    node_loss = [{"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": NODE_LOSS_TOLERATION_S}
                 for key in NODE_LOSS_TAINTS]
    if req.cpu:
        out["tolerations"] = [*pool.get("tolerations", []), *node_loss]
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


def restart_container(req: JobRequest, target: Target) -> dict[str, Any]:
    """The launcher as torchrun's elastic agent (``--recovery restart``), as each operator runs it: the
    container's name, args, environment and ports, for ``pod_template``."""
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


def pod_template(req: JobRequest, target: Target, worker: dict[str, Any]) -> dict[str, Any]:
    """The training pod around ``worker``, what the recovery mode puts in its container: name, args, env
    and optional ports (``restart_container``, or ``inplace_job.worker_container``)."""
    container = {
        "name": worker["name"],
        "image": req.image,
        # A recreated pod re-resolves the tag: cheap, layers are cached. The local stack runs
        # images loaded into the node (`kind load docker-image`), which a pull would not find.
        "imagePullPolicy": "IfNotPresent" if target.cloud == "local" else "Always",
        "command": list(LAUNCHER),
        "args": worker["args"],
        "env": worker["env"],
        **({"ports": worker["ports"]} if "ports" in worker else {}),
        "resources": _resources(req),
        "securityContext": container_security(),
        "volumeMounts": [
            shared_mount(req.mount, req.name),
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
        **_placement(req, target),
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
    metadata: dict[str, Any] = {"labels": labels(req)}
    if req.recovery == "restart":
        # On every operator's pods, not only on the Job: the etcd gate tells a pod's run by this
        # annotation (training-image/elastic_trainer/etcd_gate/resolvers.py), and an ElasticJob's or a
        # PyTorchJob's pods have no batch/v1 Job to read it from. The operators copy the template's
        # metadata onto the pods they create.
        metadata["annotations"] = {ANNOTATION_RDZV_ID: req.rdzv_id}
    return {"metadata": metadata, "spec": spec}


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
