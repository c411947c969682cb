"""The researcher threat model for a pod, as a pure predicate: ``outside(kind, name, labels, spec)`` lists every way
a pod (or a workload's pod template) a researcher made steps outside it; an empty list means inside.

Applied to the object as the API server returns it (its admission plugins' changes made: a token the
ServiceAccount plugin would mount is a volume there, a class the Priority plugin resolved is named there).
Written from what each limit protects, not from the admission policy's expressions, so that the fuzz test
(test_researcher_fuzz.py) checks the policy and Pod Security together against an independent statement: every
pod the API server admits from a researcher is inside. A researcher's pod

- claims no identity it does not own: no platform label (etcd's app.kubernetes.io/*, whose Services, PDB and
  NetworkPolicies select by them), no Lighthouse label (a job's Lighthouse Service selects it), a job label only
  on its own job's template, the reader and TensorBoard labels only on the pods named for them;
- answers for no DNS name (no hostname or subdomain: etcd's members are <hostname>.<subdomain>);
- outranks nothing (priorityClassName torchfleet-training or none) and is placed by the scheduler (no nodeName);
- bends no other pod's placement (no anti-affinity, which a running pod imposes on its whole topology domain,
  no affinity term reaching other namespaces, pod affinity only towards its own job);
- sees only GPUs it was given: on a GPU node every container has a GPU limit, or (init containers) hides them
  with NVIDIA_VISIBLE_DEVICES=void, and no container chooses that variable otherwise;
- reads no Secret or service-account token (volumes, env, envFrom) and mounts nothing but the shared and
  dataset claims, emptyDir and projected ConfigMaps;
- runs at Pod Security's restricted level (no host namespace or path, non-root, no privilege, no added
  capability but NET_BIND_SERVICE): checked on Pods, the only objects that level is enforced on;
- runs as training-job or job-reader, the accounts bound to no Role;
- reaches only its own job's folder of the shared store, in its maker's folder (subPath <maker's folder>/<job>, the
  maker its torchfleet.io/created-by: a folder outlives its job, a name does not; a job's pods: the job's own name;
  a reader or TensorBoard pod: the job its label names, read-only; any other pod: none of it), through one volume,
  and projects only
  its own job's --workdir code (or, for a job <sweep>-<n> of a sweep, the sweep's): every job runs as uid 10001,
  the owner of every checkpoint, so a wider mount is another job's code and checkpoints;
- never on the manager pool (etcd's nodes, issue 30): no pod or template selects torchfleet.io/pool=manager or
  tolerates a manager taint (any cloud's); the one pool label it may select, and the one torchfleet.io/pool taint
  it may tolerate, is the CPU pool's (torchfleet.io/pool=cpu, exactly).
"""

from __future__ import annotations

import re
from typing import Any

ACCOUNTS = ("training-job", "job-reader")
PRIORITY_CLASSES = (None, "torchfleet-training")
TOLERABLE = ("nvidia.com/gpu", "kubernetes.azure.com/scalesetpriority", "node.kubernetes.io/not-ready",
             "node.kubernetes.io/unreachable")  # fmt: skip
GPU = "nvidia.com/gpu"
GPU_SELECTORS = ("torchfleet.io/gpu", "nvidia.com/gpu.present")
VISIBLE = "NVIDIA_VISIBLE_DEVICES"
MANAGED_BY = ("app.kubernetes.io/managed-by", "torchfleet")
ZONE = "topology.kubernetes.io/zone"
SHARED_CLAIM = "shared-data"
POOL = "torchfleet.io/pool"
CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")
JOB_KINDS = ("Job", "ElasticJob", "PyTorchJob")
WORKDIR_SUFFIX = re.compile(r"-workdir-[0-9a-f]{8}-[0-9]+")  # after the owner: this submit's nonce, the part


def _cpu_pool_toleration(t: dict[str, Any]) -> bool:
    """The CPU pool's taint tolerated exactly (the key is the Azure and tier manager pool's too)."""
    return t.get("key") == POOL and t.get("operator", "Equal") == "Equal" and t.get("value") == "cpu"


def _gpus(container: dict[str, Any]) -> float:
    limit = ((container.get("resources") or {}).get("limits") or {}).get(GPU)
    try:
        return float(str(limit)) if limit is not None else 0.0
    except ValueError:
        return 0.0


def _labels(kind: str, name: str, labels: dict[str, str]) -> list[str]:
    why = []
    own_job = None if kind in ("Pod", "Deployment") else name
    for key, value in labels.items():
        if key.startswith("app.kubernetes.io/") and (key, value) != MANAGED_BY:
            why.append(f"platform label {key}={value}")
        if key == "torchfleet.io/lighthouse" and not (kind == "Deployment" and name == f"{value}-lighthouse"):
            why.append(f"Lighthouse label of {value}")
        if key == "torchfleet.io/job" and value != own_job:
            why.append(f"job label {value} on {kind} {name}")
        if key == "torchfleet.io/role" and own_job is None:
            why.append(f"training role label on a {kind} of no job")
        if key == "torchfleet.io/reader" and not (kind == "Pod" and name.startswith(f"{value}-reader-")):
            why.append(f"reader label of {value} on {name}")
        if key == "torchfleet.io/tensorboard" and not (kind == "Pod" and name == f"{value}-tensorboard"):
            why.append(f"TensorBoard label of {value} on {name}")
    return why


def _affinity(kind: str, name: str, affinity: dict[str, Any]) -> list[str]:
    why = []
    if affinity.get("podAntiAffinity"):
        why.append("pod anti-affinity")
    for term_list in (
        "requiredDuringSchedulingIgnoredDuringExecution",
        "preferredDuringSchedulingIgnoredDuringExecution",
    ):
        for entry in (affinity.get("podAffinity") or {}).get(term_list) or []:
            term = entry.get("podAffinityTerm", entry)
            if term.get("namespaceSelector") is not None or term.get("namespaces"):
                why.append("an affinity term over other namespaces")
            selector = term.get("labelSelector") or {}
            if (
                kind == "Pod"
                or selector.get("matchExpressions")
                or selector.get("matchLabels") != {"torchfleet.io/job": name}
            ):
                why.append(f"pod affinity towards pods other than job {name}'s")
    return why


def _containers(spec: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(where, c) for where in CONTAINER_LISTS for c in spec.get(where) or []]


def _gpu_visibility(spec: dict[str, Any]) -> list[str]:
    why = []
    tolerates = any(not t.get("key") or t.get("key") == GPU for t in spec.get("tolerations") or [])
    selects = (
        any(key in GPU_SELECTORS for key in spec.get("nodeSelector") or {})
        or (spec.get("nodeSelector") or {}).get("torchfleet.io/pool") == "gpu"
    )
    for where, container in _containers(spec):
        env = container.get("env") or []
        if any(e.get("name") == VISIBLE and e.get("value") != "void" for e in env):
            why.append(f"{where} {container.get('name')} chooses its GPUs")
        void = any(e.get("name") == VISIBLE and e.get("value") == "void" for e in env)
        if (tolerates or selects) and _gpus(container) <= 0 and not (where == "initContainers" and void):
            why.append(f"{where} {container.get('name')} on a GPU node without a GPU of its own")
    return why


def _secrets(spec: dict[str, Any]) -> list[str]:
    why = []
    for where, container in _containers(spec):
        if container.get("envFrom"):
            why.append(f"{where} {container.get('name')} has envFrom")  # a Secret's, or any variable unchecked
        if any(((e.get("valueFrom") or {}).get("secretKeyRef")) for e in container.get("env") or []):
            why.append(f"{where} {container.get('name')} reads a Secret into its environment")
    for volume in spec.get("volumes") or []:
        claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
        sources = (volume.get("projected") or {}).get("sources") or []
        if volume.get("emptyDir") is not None:
            continue
        if claim is not None and (claim == SHARED_CLAIM or claim.startswith("dataset-")):
            continue
        if volume.get("projected") is not None and all("configMap" in s for s in sources):
            continue
        why.append(f"volume {volume.get('name')} ({sorted(k for k in volume if k != 'name')})")
    return why


def _store(kind: str, name: str, labels: dict[str, str], spec: dict[str, Any], maker: str) -> list[str]:
    why = []
    volumes = spec.get("volumes") or []
    claims = {v.get("name"): v["persistentVolumeClaim"] for v in volumes
              if (v.get("persistentVolumeClaim") or {}).get("claimName") == SHARED_CLAIM}  # fmt: skip
    if sum((v.get("persistentVolumeClaim") or {}).get("claimName") == SHARED_CLAIM for v in volumes) > 1:
        why.append("two volumes of the shared store")
    if kind in JOB_KINDS:
        job = name
    elif kind == "Pod":
        job = labels.get("torchfleet.io/reader") or labels.get("torchfleet.io/tensorboard")
    else:
        job = None
    reads_only = kind == "Pod"  # a reader or TensorBoard pod: only the job's own pods write its folder
    if claims and job is None:
        why.append(f"the shared store mounted by a {kind} of no job")
    if reads_only and any(not claim.get("readOnly") for claim in claims.values()):
        why.append("the shared store's volume writable in a reader")
    for where, container in _containers(spec):
        for mount in container.get("volumeMounts") or []:
            if mount.get("name") not in claims:
                continue
            if mount.get("subPathExpr") or mount.get("subPath") != _folder(maker, job):
                reach = mount.get("subPathExpr") or mount.get("subPath") or "the whole store"
                why.append(f"{where} {container.get('name')} mounts {reach} of the store, not job {job}'s folder "
                           f"of its maker {maker!r}")
            if reads_only and not mount.get("readOnly"):
                why.append(f"{where} {container.get('name')} may write job {job}'s folder from a reader")
    owners = {name} if kind in JOB_KINDS else set()
    sweep = labels.get("torchfleet.io/sweep")
    if owners and sweep and re.fullmatch(re.escape(sweep) + r"-[0-9]+", name):
        owners.add(sweep)
    for volume in volumes:
        for source in (volume.get("projected") or {}).get("sources") or []:
            config_map = (source.get("configMap") or {}).get("name") if "configMap" in source else None
            if "configMap" in source and not any(
                config_map and config_map.startswith(owner) and WORKDIR_SUFFIX.fullmatch(config_map[len(owner):])
                for owner in owners
            ):
                why.append(f"projects ConfigMap {config_map}, not its own job's --workdir code")
    return why


def _folder(maker: str, job: str | None) -> str | None:
    """A job's folder of the store: its maker's folder, then the job (issue 30: a folder named only for the job
    outlived it and went to whoever next took the name). The mapping is the CLI's (store_folder.py), which
    test_researcher_store.py holds equal to the policy's on the real API server."""
    from torchfleet.jobs import store_folder
    from torchfleet.jobs.errors import UsageError

    try:
        return store_folder.sub_path(maker, job) if maker and job else None
    except UsageError:
        return None  # a username that names no folder: no mount of the store is inside


def _restricted(spec: dict[str, Any]) -> list[str]:
    why = [field for field in ("hostNetwork", "hostPID", "hostIPC") if spec.get(field)]
    pod = spec.get("securityContext") or {}
    for where, container in _containers(spec):
        context = container.get("securityContext") or {}
        if context.get("privileged"):
            why.append(f"{where} privileged")
        if context.get("allowPrivilegeEscalation") is not False:
            why.append(f"{where} may escalate privilege")
        if context.get("runAsUser", pod.get("runAsUser")) == 0:
            why.append(f"{where} runs as root")
        if context.get("runAsNonRoot", pod.get("runAsNonRoot")) is not True:
            why.append(f"{where} is not required to run as non-root")
        added = set(((context.get("capabilities") or {}).get("add")) or []) - {"NET_BIND_SERVICE"}
        if added:
            why.append(f"{where} adds capabilities {sorted(added)}")
    return why


def outside(kind: str, name: str, labels: dict[str, str] | None, spec: dict[str, Any], maker: str = "") -> list[str]:
    """Every way this pod (KIND Pod) or pod template (of the workload KIND named NAME, made by MAKER: its
    torchfleet.io/created-by) is outside the model."""
    why = _labels(kind, name, labels or {})
    why += [f"sets {field}" for field in ("hostname", "subdomain", "nodeName", "runtimeClassName") if spec.get(field)]
    if spec.get("priorityClassName") not in PRIORITY_CLASSES:
        why.append(f"priority class {spec['priorityClassName']}")
    if spec.get("serviceAccountName") not in ACCOUNTS:
        why.append(f"service account {spec.get('serviceAccountName')}")
    if spec.get("automountServiceAccountToken"):
        why.append("a service-account token")  # a template's pods are made by an exempt controller
    affinity = spec.get("affinity") or {}
    if affinity.get("nodeAffinity"):
        why.append("node affinity")
    why += _affinity(kind, name, affinity)
    why += [f"tolerates {t.get('key') or 'every taint'}" for t in spec.get("tolerations") or []
            if t.get("key") not in TOLERABLE and not _cpu_pool_toleration(t)]  # fmt: skip
    why += _gpu_visibility(spec) + _secrets(spec) + _store(kind, name, labels or {}, spec, maker)
    if (spec.get("nodeSelector") or {}).get(POOL, "cpu") != "cpu":
        why.append(f"selects {POOL}={spec['nodeSelector'][POOL]}: only the CPU pool (manager: beside etcd)")
    if kind == "Pod":
        # Pod Security Admission enforces on pods only: a workload's template gets a warning, and the pods its
        # controller makes are refused (https://kubernetes.io/docs/concepts/security/pod-security-admission/,
        # "Workload resources and Pod templates"). The fuzz found a root Job template admitted: by design.
        why += _restricted(spec)
    return why
