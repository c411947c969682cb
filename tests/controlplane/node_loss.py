"""A node that stops reporting, on the real control plane: what becomes of its training pod.

Shared by tests/controlplane/test_node_loss.py (replacement happens) and bench/node_loss.py (how long
each step takes). A node whose kubelet went silent (a spot instance gone, a partition) is a kwok node
taken out of kwok's hands (``silence``). What follows is
Kubernetes v1.35.4's own (k8s.io/kubernetes@v1.35.4):

- the node lifecycle controller marks the node Ready=Unknown after --node-monitor-grace-period and
  taints it node.kubernetes.io/unreachable:NoExecute (pkg/controller/nodelifecycle);
- the taint manager evicts the pod once its toleration (torchfleet: 30 s, pod_template.py
  NODE_LOSS_TOLERATION_S) runs out: a deletion no kubelet will finish, so the pod stays
  terminating in phase Running;
- the Job controller replaces a pod only once it is Failed (podReplacementPolicy: Failed, which
  Kubernetes requires with a pod failure policy: pkg/apis/batch/validation/validation.go
  validatePodReplacementPolicy), and PodGC makes a terminating pod Failed only if its node is not
  ready AND tainted node.kubernetes.io/out-of-service (pkg/controller/podgc/gc_controller.go
  gcTerminating), or once the Node object is gone (gcOrphaned, after a 40 s quarantine);
- the replacement of an index then waits its backoff: 10 s doubled for every earlier failure of that
  index, ignored ones included (pkg/controller/job/backoff_utils.go getRemainingTimePerIndex with
  indexed_job_utils.go getIndexAbsoluteFailureCount), at most 10 minutes, counted from the failed
  pod's end.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from components.spec import LABEL_JOB
from tests.controlplane.kwok_stages import NODE_ANNOTATION
from tests.controlplane.layer import get, kubectl, wait_for

COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"
# Generous hang detectors, never the measurement: the node controller's grace period (50 s by
# default), the 30 s toleration, PodGC's 20 s period or 40 s quarantine, a 10 s backoff, and a loaded
# machine.
STEP_TIMEOUT_S = 400


@dataclass
class Timeline:
    """Seconds since the node went silent at which each step was seen (polled every 0.5 s)."""

    node: str
    index: str
    steps: dict[str, float] = field(default_factory=dict)

    def mark(self, step: str, start: float) -> None:
        self.steps[step] = round(time.monotonic() - start, 1)


def pods_of(layer, job: str) -> list[dict]:
    return get(layer.cp, "pods", "-n", layer.namespace, "-l", f"{LABEL_JOB}={job}")["items"]


def index_of(pod: dict) -> str:
    return pod["metadata"]["labels"].get(COMPLETION_INDEX, "")


def node_ready(layer, name: str) -> str:
    node = get(layer.cp, "node", name)
    return next((c["status"] for c in node["status"].get("conditions", []) if c["type"] == "Ready"), "")


def silence(layer, node: str) -> None:
    """The node's kubelet stops reporting. kwok stops applying its stages to a node without its
    annotation, but its lease controller keeps renewing the node's Lease; it leaves alone a Lease that
    another holder holds and that has not expired, so the Lease is taken over for a day and never
    renewed: the node controller sees no heartbeat from then on (it watches renewTime)."""
    kubectl(layer.cp, "annotate", "node", node, f"{NODE_ANNOTATION}-")
    now = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
    patch = {"spec": {"holderIdentity": "silenced-by-test", "leaseDurationSeconds": 86400, "renewTime": now}}
    kubectl(layer.cp, "-n", "kube-node-lease", "patch", "lease", node, "--type=merge", "-p", json.dumps(patch))


def revive(layer, node: str, untaint: bool = True) -> None:
    """The node reports again, untainted (for the tests after this one on the shared tier) unless
    UNTAINT is False (the node healer's test: the healer must remove its own taint)."""
    if untaint:
        kubectl(layer.cp, "taint", "node", node, f"{OUT_OF_SERVICE}-", check=False)
    kubectl(layer.cp, "-n", "kube-node-lease", "delete", "lease", node, "--ignore-not-found")  # kwok makes it again
    kubectl(layer.cp, "annotate", "--overwrite", "node", node, f"{NODE_ANNOTATION}=fake")


def lose_a_node(layer, job: str, remedy: str, quiet_s: float = 30, untaint: bool = True) -> Timeline:
    """Silence the node of JOB's index-0 pod; once the pod is terminating, watch QUIET_S seconds for a
    replacement (none comes: the bug), then apply REMEDY ("out-of-service": taint the node as a node
    reaper would; "delete": delete the Node object, as a cloud's node controller does for a terminated
    instance; "healer": none, the node healer runs and must act alone) and wait for the index's
    replacement. Returns when each step was seen."""
    pods = wait_for(
        f"{job}'s pods running",
        lambda: [p for p in pods_of(layer, job) if p["status"].get("phase") == "Running"] or None,
    )
    lost = next(p for p in pods if index_of(p) == "0") if any(index_of(p) == "0" for p in pods) else pods[0]
    timeline = Timeline(node=lost["spec"]["nodeName"], index=index_of(lost))
    uid = lost["metadata"]["uid"]
    saved = get(layer.cp, "node", timeline.node)
    try:
        return _lose(layer, job, remedy, quiet_s, timeline, uid)
    finally:
        restore(layer, saved, untaint)


def restore(layer, saved: dict, untaint: bool = True) -> None:
    """The node back as it was, reporting (re-created if deleted): later tests share the tier's nodes."""
    name = saved["metadata"]["name"]
    if kubectl(layer.cp, "get", "node", name, "--ignore-not-found", "-o", "name").strip():
        revive(layer, name, untaint)
        return
    metadata = {k: saved["metadata"][k] for k in ("name", "labels", "annotations") if k in saved["metadata"]}
    metadata["annotations"] = {**metadata.get("annotations", {}), NODE_ANNOTATION: "fake"}
    spec = {k: v for k, v in saved["spec"].items() if k != "taints"}
    spec["taints"] = [t for t in saved["spec"].get("taints", []) if not t["key"].startswith("node.kubernetes.io/")]
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": metadata,
        "spec": spec,
        "status": {"capacity": saved["status"]["capacity"], "allocatable": saved["status"]["allocatable"]},
    }
    import json

    kubectl(layer.cp, "create", "-f", "-", input=json.dumps(node))


def _lose(layer, job: str, remedy: str, quiet_s: float, timeline: Timeline, uid: str) -> Timeline:
    start = time.monotonic()
    silence(layer, timeline.node)
    wait_for(f"{timeline.node} not ready", lambda: node_ready(layer, timeline.node) != "True", STEP_TIMEOUT_S)
    timeline.mark("node_not_ready", start)

    def the_pod() -> dict | None:
        return next((p for p in pods_of(layer, job) if p["metadata"]["uid"] == uid), None)

    wait_for(
        f"{job}'s pod on {timeline.node} evicted",
        lambda: (p := the_pod()) is None or p["metadata"].get("deletionTimestamp"),
        STEP_TIMEOUT_S,
    )
    timeline.mark("pod_terminating", start)
    if remedy == "healer":
        return _healed(layer, job, timeline, uid, start)

    def replacement() -> dict | None:
        return replacement_of(layer, job, timeline, uid)

    deadline = time.monotonic() + quiet_s
    while time.monotonic() < deadline:
        if replacement() is not None:
            timeline.mark("replaced_before_remedy", start)
            return timeline
        time.sleep(0.5)
    timeline.mark("no_replacement_until", start)
    if remedy == "out-of-service":
        kubectl(layer.cp, "taint", "node", timeline.node, f"{OUT_OF_SERVICE}=nodeshutdown:NoExecute")
    elif remedy == "delete":
        kubectl(layer.cp, "delete", "node", timeline.node, "--wait=false")
    else:
        raise ValueError(f"remedy must be 'out-of-service' or 'delete', got {remedy!r}")
    remedied = time.monotonic()
    timeline.mark("remedy_applied", start)
    wait_for(f"{job}'s pod on {timeline.node} gone", lambda: the_pod() is None, STEP_TIMEOUT_S)
    timeline.mark("old_pod_gone", start)
    wait_for(f"a replacement for index {timeline.index} of {job}", replacement, STEP_TIMEOUT_S)
    timeline.mark("replaced", start)
    timeline.steps["replaced_after_remedy"] = round(time.monotonic() - remedied, 1)
    return timeline


def replacement_of(layer, job: str, timeline: Timeline, uid: str) -> dict | None:
    return next(
        (
            p
            for p in pods_of(layer, job)
            if index_of(p) == timeline.index
            and p["metadata"]["uid"] != uid
            and not p["metadata"].get("deletionTimestamp")
        ),
        None,
    )


def _healed(layer, job: str, timeline: Timeline, uid: str, start: float) -> Timeline:
    """No one acts but the node healer: note when its taint appears and when the index is replaced."""

    def replaced() -> dict | None:
        if "tainted" not in timeline.steps and any(
            t["key"] == OUT_OF_SERVICE for t in get(layer.cp, "node", timeline.node)["spec"].get("taints") or []
        ):
            timeline.mark("tainted", start)
        return replacement_of(layer, job, timeline, uid)

    wait_for(f"a replacement for index {timeline.index} of {job}, healed", replaced, STEP_TIMEOUT_S)
    timeline.mark("replaced", start)
    return timeline
