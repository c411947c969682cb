"""Fuzzing the researcher limits (issue 30, item 4): pods and Job templates over the fields a researcher controls,
sent to the real API server as the researcher, and every one it admits must be inside the threat model
(threat_model.outside, a pure predicate written apart from the policy's expressions).

Each example starts from the CLI's own reader pod (or a Job around its spec, labelled as the CLI labels a job's
pods) and changes up to three fields, each to a value the CLI writes or one an attacker would try, so that both
admitted and refused objects come up. Sent with server-side dry-run: admission runs, the researcher limits and
Pod Security included (test_researcher_pods.py test_the_policy_runs_on_server_dry_run), and nothing is made. The
predicate reads the object the server returns, after its admission plugins' changes.

Bounded and derandomized (a fixed sequence of examples, no example database) so that it is not flaky and fits
in about a minute on a loaded 2-core machine; --hypothesis-show-statistics shows the mix.
"""

from __future__ import annotations

import copy
import itertools
import json

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.controlplane.test_researcher import reader
from tests.controlplane.threat_model import outside
from torchfleet.jobs import pod_template, reader_pod, store_folder
from torchfleet.jobs import target as targets
from torchfleet.jobs.kubeconfig import connect

EXAMPLES = 150
CREATED_BY, RESEARCHER = "torchfleet.io/created-by", "alice"  # reader_pod.CREATED_BY; conftest's researcher
_names = itertools.count()
SELF = "<self>"  # a label value or selector replaced by the object's own job name

LABELS = [("app.kubernetes.io/name", "etcd"), ("app.kubernetes.io/managed-by", "torchfleet"),
          ("app.kubernetes.io/part-of", "torchfleet"), ("torchfleet.io/lighthouse", "victim"),
          ("torchfleet.io/lighthouse", SELF), ("torchfleet.io/job", "victim"), ("torchfleet.io/job", SELF),
          ("torchfleet.io/role", "training"), ("torchfleet.io/sweep", "s1"), ("torchfleet.io/reader", "victim"),
          ("torchfleet.io/tensorboard", "victim"), ("example.com/free", "x")]  # fmt: skip


def term(job: str, topology: str = "topology.kubernetes.io/zone", **extra) -> dict:
    return {"labelSelector": {"matchLabels": {"torchfleet.io/job": job}}, "topologyKey": topology, **extra}


REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
AFFINITIES = [
    {"podAffinity": {REQUIRED: [term(SELF)]}},  # the CLI's zone co-location
    {"podAffinity": {REQUIRED: [term("victim")]}},
    {"podAffinity": {REQUIRED: [term(SELF, "kubernetes.io/hostname")]}},
    {"podAffinity": {REQUIRED: [term(SELF, namespaceSelector={})]}},
    {"podAffinity": {REQUIRED: [term(SELF, namespaces=["kube-system"])]}},
    {"podAffinity": {PREFERRED: [{"weight": 1, "podAffinityTerm": term(SELF)}]}},
    {"podAntiAffinity": {REQUIRED: [term("victim", "kubernetes.io/os", namespaceSelector={})]}},
    {"podAntiAffinity": {REQUIRED: [term(SELF)]}},
    {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}]}}},
]  # fmt: skip
TOLERATIONS = [
    {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"},
    {"key": "nvidia.com/gpu", "operator": "Exists"},
    {"key": "kubernetes.azure.com/scalesetpriority", "operator": "Equal", "value": "spot", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
    {"operator": "Exists"},
    {"key": "CriticalAddonsOnly", "operator": "Exists"},
    # issue 30: each cloud's manager taint, and the CPU pool's key exactly and wider
    {"key": "components.gke.io/gke-managed-components", "operator": "Exists"},
    {"key": "torchfleet.io/pool", "operator": "Equal", "value": "manager", "effect": "NoSchedule"},
    {"key": "torchfleet.io/pool", "operator": "Equal", "value": "cpu", "effect": "NoSchedule"},
    {"key": "torchfleet.io/pool", "operator": "Exists"},
]
NODE_SELECTORS = [{"torchfleet.io/gpu": "t4"}, {"topology.kubernetes.io/zone": "us-west-2a"},
                  {"torchfleet.io/pool": "manager"}, {"torchfleet.io/pool": "gpu"}, {"torchfleet.io/pool": "cpu"},
                  {"kubernetes.io/hostname": "tier-fuzz-node"}, {"nvidia.com/gpu.present": "true"}]  # fmt: skip
OWN_CODE = {"name": "x", "projected": {"sources": [{"configMap": {"name": f"{SELF}-workdir-0123abcd-0"}}]}}
VICTIM_CODE = {"name": "x", "projected": {"sources": [{"configMap": {"name": "victim-workdir-0123abcd-0"}}]}}
STORE_AGAIN = {"name": "x", "persistentVolumeClaim": {"claimName": "shared-data"}}  # a second volume, mounted whole
VOLUMES = [
    {"name": "x", "secret": {"secretName": "anything"}},
    {"name": "x", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}},
    {"name": "x", "hostPath": {"path": "/etc"}},
    {"name": "x", "persistentVolumeClaim": {"claimName": "data-etcd-0"}},
    {"name": "x", "persistentVolumeClaim": {"claimName": "dataset-imagenet", "readOnly": True}},
    {"name": "x", "projected": {"sources": [{"configMap": {"name": "code"}}]}},
    OWN_CODE,
    VICTIM_CODE,
    {"name": "x", "projected": {"sources": [{"configMap": {"name": "s1-workdir-0123abcd-0"}}]}},  # a sweep's
    STORE_AGAIN,
    {"name": "x", "configMap": {"name": "code"}},
    {"name": "x", "emptyDir": {}},
]
ENV = [
    {"env": [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "anything", "key": "t"}}}]},
    {"envFrom": [{"secretRef": {"name": "anything"}}]},
    {"envFrom": [{"configMapRef": {"name": "anything"}}]},
    {"env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]},
    {"env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]},
    {"env": [{"name": "T", "value": "plain"}]},
    {"env": [{"name": "T", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]},
]
SECURITY = ["root", "privileged", "escalation", "host-network", "net-admin", "no-non-root"]
# The shared store's mount (the CLI's: subPath <maker's folder>/<job>, read-only in a reader): its own, the same
# job name's folder of another maker (bob's, or the old layout's <job>: what a job of a reused name took over),
# another folder, the whole store, a subPathExpr, writable.
STORE = [("subPath", f"@{RESEARCHER}/{SELF}"), ("subPath", f"@bob/{SELF}"), ("subPath", SELF), ("subPath", "victim"),
         ("subPath", f"@{RESEARCHER}/victim"), ("subPath", None), ("subPathExpr", "$(T)"), ("readOnly", False),
         ("claimReadOnly", False)]  # fmt: skip
GPUS = ["1", "0"]


def changes() -> st.SearchStrategy:
    """(field, value) pairs, up to three fields of the spec."""
    field = st.sampled_from([
        ("labels", st.sampled_from(LABELS)),
        ("hostname", st.just("etcd-0")),
        ("subdomain", st.just("etcd-peers")),
        ("priorityClassName", st.sampled_from(["torchfleet-training", "torchfleet-control", "system-node-critical"])),
        ("nodeName", st.just("tier-fuzz-node")),
        ("affinity", st.sampled_from(AFFINITIES)),
        ("tolerations", st.lists(st.sampled_from(TOLERATIONS), min_size=1, max_size=2)),
        ("nodeSelector", st.sampled_from(NODE_SELECTORS)),
        ("volumes", st.sampled_from(VOLUMES)),
        ("env", st.sampled_from(ENV)),
        ("initContainer", st.sampled_from([None, *ENV])),
        ("securityContext", st.sampled_from(SECURITY)),
        ("serviceAccountName", st.sampled_from(["training-job", "default", "etcd"])),
        ("automountServiceAccountToken", st.booleans()),
        ("gpu", st.sampled_from(GPUS)),
        ("store", st.sampled_from(STORE)),
    ])  # fmt: skip
    return st.lists(field.flatmap(lambda f: f[1].map(lambda v: (f[0], v))), max_size=3)


def own(value, job: str):
    return json.loads(json.dumps(value).replace(SELF, job))


def apply_change(document: dict, metadata: dict, spec: dict, job: str, field: str, value) -> None:
    container = spec["containers"][0]
    value = own(copy.deepcopy(value), job)
    if field == "labels":
        metadata.setdefault("labels", {})[value[0]] = value[1]
    elif field in ("hostname", "subdomain", "priorityClassName", "nodeName", "affinity", "serviceAccountName",
                   "automountServiceAccountToken"):  # fmt: skip
        spec[field] = value
    elif field == "tolerations":
        spec["tolerations"] = value
    elif field == "nodeSelector":
        spec["nodeSelector"] = {**spec.get("nodeSelector", {}), **value}
    elif field == "volumes":
        spec["volumes"].append(value)
        container["volumeMounts"].append({"name": "x", "mountPath": "/mnt/x"})
    elif field == "env":
        for key, items in value.items():
            container[key] = [*container.get(key, []), *items]
    elif field == "initContainer":
        first = {k: copy.deepcopy(v) for k, v in container.items() if k != "env"} | {"name": "first"}
        first.update(value or {})
        spec["initContainers"] = [first]
    elif field == "securityContext":
        context = container["securityContext"]
        {
            "root": lambda: spec["securityContext"].update(runAsUser=0),
            "privileged": lambda: context.update(privileged=True),
            "escalation": lambda: context.update(allowPrivilegeEscalation=True),
            "host-network": lambda: spec.update(hostNetwork=True),
            "net-admin": lambda: context["capabilities"].update(add=["NET_ADMIN"]),
            "no-non-root": lambda: spec["securityContext"].pop("runAsNonRoot", None),  # twice in one example: once
        }[value]()
    elif field == "gpu":
        for part in ("requests", "limits"):
            container["resources"][part]["nvidia.com/gpu"] = value
    elif field == "store":
        key, setting = value
        mount = next(m for m in container["volumeMounts"] if m["name"] == pod_template.SHARED_VOLUME)
        if key == "claimReadOnly":
            next(v for v in spec["volumes"] if v["name"] == pod_template.SHARED_VOLUME)["persistentVolumeClaim"].pop(
                "readOnly", None)
        elif key == "subPathExpr":
            mount.pop("subPath", None)
            mount["subPathExpr"] = setting
        elif setting is None:
            mount.pop(key, None)
        else:
            mount[key] = setting


def build(layer, kind: str, edits: list) -> dict:
    """The reader pod, or a Job around its spec labelled as a job's pods, with EDITS applied."""
    n = next(_names)
    pod = reader_pod.build_pod(f"tier-fuzz-reader-{n:06x}", "tier-fuzz", "/mnt/shared", "registry.example.com/t:1",
                               targets.defaults("aws", layer.namespace), None)  # fmt: skip
    if kind == "Pod":
        # Who made it, as the CLI records it for the reader-owner policy (the tier's researcher is alice).
        pod["metadata"]["annotations"] = {CREATED_BY: RESEARCHER}
        document, metadata, spec, job = pod, pod["metadata"], pod["spec"], "tier-fuzz"
    else:
        job = f"tier-fuzz-{n}"
        labels = {
            "torchfleet.io/role": "training",
            "torchfleet.io/job": job,
            "app.kubernetes.io/managed-by": "torchfleet",
        }
        # Who made the Job and so its pods, as the CLI records it (validatingadmissionpolicy-owner.yaml).
        metadata, spec = {"labels": labels, "annotations": {CREATED_BY: RESEARCHER}}, pod["spec"]
        spec.pop("activeDeadlineSeconds")
        # The job's own folder of the store, as its pods mount it (pod_template.shared_mount), not the reader's job.
        spec["containers"][0]["volumeMounts"][0] = pod_template.shared_mount("/mnt/shared", job, read_only=True)
        spec.get("nodeSelector", {}).pop("torchfleet.io/pool", None)  # a GPU job's pods select no pool
        document = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": job, "namespace": layer.namespace, "labels": dict(labels),
                         "annotations": {CREATED_BY: RESEARCHER}},
            "spec": {"backoffLimit": 0, "template": {"metadata": metadata, "spec": spec}},
        }
    store_folder.place(document, RESEARCHER)  # as JobClient.stamped does: alice's folder of the store
    for field, value in edits:
        apply_change(document, metadata, spec, job, field, value)
    return document


def send(api: client.ApiClient, namespace: str, document: dict) -> dict | None:
    """The object as the API server would persist it, or None if it refused it (403 or 422)."""
    create = (client.CoreV1Api(api).create_namespaced_pod if document["kind"] == "Pod"
              else client.BatchV1Api(api).create_namespaced_job)  # fmt: skip
    try:
        response = create(namespace, document, dry_run="All", _preload_content=False)
    except ApiException as refusal:
        if refusal.status in (403, 422):
            return None
        raise
    return json.loads(response.data)


def pod_of(obj: dict) -> tuple[str, str, dict, dict, str]:
    """(kind, name, the pod's labels, the pod's spec, its recorded maker) of a returned Pod or Job."""
    maker = (obj["metadata"].get("annotations") or {}).get(CREATED_BY, "")
    if obj["kind"] == "Pod":
        return "Pod", obj["metadata"]["name"], obj["metadata"].get("labels") or {}, obj["spec"], maker
    template = obj["spec"]["template"]
    return (obj["kind"], obj["metadata"]["name"], (template.get("metadata") or {}).get("labels") or {},
            template["spec"], maker)


def test_every_admitted_pod_is_inside_the_threat_model(training_layer, researcher):
    layer, api = training_layer, connect(researcher)
    seen = {"admitted": 0, "refused": 0}
    for kind in ("Pod", "Job"):  # the unchanged objects: admitted, and inside
        obj = send(api, layer.namespace, build(layer, kind, []))
        assert obj is not None and outside(*pod_of(obj)) == [], obj

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip
    @given(kind=st.sampled_from(["Pod", "Job"]), edits=changes())
    def admitted_only_inside(kind, edits):
        obj = send(api, layer.namespace, build(layer, kind, edits))
        seen["refused" if obj is None else "admitted"] += 1
        if obj is not None:
            event(f"admitted {kind}")
            assert outside(*pod_of(obj)) == [], (edits, obj)

    admitted_only_inside()
    # Not vacuous: the sequence is fixed (derandomize), and both outcomes come up in it.
    assert seen["admitted"] >= 10 and seen["refused"] >= 10, seen


# ---- the predicate itself (no control plane) -------------------------------------------------------------------


class _Layer:
    namespace = "elastic-job"


@pytest.mark.parametrize("kind", ["Pod", "Job"])
def test_the_clis_pods_are_inside(kind):
    document = build(_Layer, kind, [])
    assert outside(*pod_of(document)) == []
    zone = build(_Layer, "Job", [("affinity", AFFINITIES[0]), ("tolerations", [TOLERATIONS[0]]), ("gpu", "1"),
                                 ("nodeSelector", NODE_SELECTORS[0])])  # fmt: skip
    assert outside(*pod_of(zone)) == []
    assert outside(*pod_of(reader(_Layer))) == []


@pytest.mark.parametrize(
    ("edits", "why"),
    [
        ([("labels", ("app.kubernetes.io/name", "etcd"))], "platform label"),
        ([("labels", ("torchfleet.io/job", "victim"))], "job label victim"),
        ([("hostname", "etcd-0")], "sets hostname"),
        ([("priorityClassName", "system-node-critical")], "priority class"),
        ([("affinity", AFFINITIES[6])], "anti-affinity"),
        ([("affinity", AFFINITIES[3])], "other namespaces"),
        ([("tolerations", [TOLERATIONS[4]])], "every taint"),
        ([("tolerations", [TOLERATIONS[0]])], "without a GPU"),
        ([("env", ENV[3])], "chooses its GPUs"),
        ([("env", ENV[0])], "reads a Secret"),
        ([("env", ENV[1])], "envFrom"),
        ([("volumes", VOLUMES[1])], "volume x"),
        ([("securityContext", "net-admin")], "adds capabilities"),
        ([("store", ("subPath", "victim"))], "mounts victim of the store"),
        ([("store", ("subPath", SELF))], "mounts tier-fuzz"),  # the old layout's folder of the same name
        ([("store", ("subPath", f"@bob/{SELF}"))], "mounts @bob/tier-fuzz"),  # another maker's of the same name
        ([("store", ("subPath", None))], "mounts the whole store"),
        ([("store", ("subPathExpr", "$(T)"))], "mounts $(T) of the store"),
        ([("volumes", VICTIM_CODE)], "projects ConfigMap victim-workdir"),
        ([("volumes", STORE_AGAIN)], "two volumes of the shared store"),
    ],
)
def test_hostile_pods_are_outside(edits, why):
    kinds = ("Pod",) if edits[0][0] == "securityContext" else ("Pod", "Job")  # enforced on pods only
    for kind in kinds:
        found = outside(*pod_of(build(_Layer, kind, edits)))
        assert any(why in line for line in found), found


def test_a_job_writes_its_own_folder_a_reader_only_reads_it():
    """The store's mount writable is a job's pods' own (they write checkpoints), never a reader's; its own --workdir
    ConfigMaps are a job's, a reader projects none."""
    for edits in ([("store", ("readOnly", False))], [("store", ("claimReadOnly", False))]):
        assert outside(*pod_of(build(_Layer, "Job", edits))) == []
        assert any("reader" in line for line in outside(*pod_of(build(_Layer, "Pod", edits))))
    assert outside(*pod_of(build(_Layer, "Job", [("volumes", OWN_CODE)]))) == []
    assert any("projects ConfigMap" in line for line in outside(*pod_of(build(_Layer, "Pod", [("volumes", OWN_CODE)]))))
