"""The etcd gate as every stack deploys it (k8s/base/etcd-gate/, policies/): training pods reach etcd's
v2 keys API only through it (review M3: with etcd's client port, any pod could wipe every job's
rendezvous or fill etcd's in-memory v2 store).

The NetworkPolicies are read as data by the evaluator of tests/k8s/netpol.py (the documented rules), on
the layer Pulumi's mocks record for each stack; the Role is what the resolver calls, nothing more
(its real-API-server check: tests/controlplane/test_etcd_gate_resolver.py).
"""

from __future__ import annotations

import pytest
from elastic_trainer.etcd_gate.rules import Limits

from components.kube import manifests, static
from components.spec import LABEL_JOB, LABEL_ROLE, ROLE_TRAINING
from tests.components.kube.test_training import objects, one, pod_spec, quantity, selects
from tests.harness import STACKS, SynthResult, synth_stack
from tests.k8s.netpol import can_connect
from torchfleet.jobs.image_ref import DEFAULT_IMAGE

GATE = {"app.kubernetes.io/name": "etcd-gate", "app.kubernetes.io/component": "rendezvous",
        "app.kubernetes.io/part-of": "torchfleet"}
ETCD = {"app.kubernetes.io/name": "etcd", "app.kubernetes.io/component": "rendezvous",
        "app.kubernetes.io/part-of": "torchfleet"}
TRAINING = {LABEL_ROLE: ROLE_TRAINING, LABEL_JOB: "any-job"}
CONTROLLER = {"app.kubernetes.io/name": "elasticjob-controller"}
OTHER = {"app": "anything-else"}


@pytest.fixture(scope="module", params=STACKS)
def result(request) -> SynthResult:
    return synth_stack(request.param)


def policies(result: SynthResult) -> list[dict]:
    return objects(result, "NetworkPolicy")


def test_training_pods_reach_the_gate_and_never_etcd(result):
    rules = policies(result)
    assert can_connect(rules, TRAINING, GATE, 2379)
    assert not can_connect(rules, TRAINING, ETCD, 2379)
    assert not can_connect(rules, TRAINING, ETCD, 2380)
    assert not can_connect(rules, TRAINING, GATE, 2380)  # the gate's one port only


def test_the_gate_reaches_etcd_and_only_training_pods_reach_the_gate(result):
    rules = policies(result)
    assert can_connect(rules, GATE, ETCD, 2379)
    assert not can_connect(rules, GATE, ETCD, 2380)  # never the peer port
    for source in (CONTROLLER, OTHER, ETCD):
        assert not can_connect(rules, source, GATE, 2379), source
    # etcd's members still replicate, and nothing but them and the gate reaches etcd.
    assert can_connect(rules, ETCD, ETCD, 2380)
    for source in (CONTROLLER, OTHER, TRAINING):
        assert not can_connect(rules, source, ETCD, 2379), source


def test_the_gate_reaches_the_api_server_ports(result):
    (policy,) = [p for p in policies(result) if p["metadata"]["name"] == "etcd-gate-egress"]
    ports = {(p["protocol"], p["port"]) for rule in policy["spec"]["egress"] if "to" not in rule
             for p in rule["ports"]}
    assert ports == {("TCP", 443), ("TCP", 6443)}


def test_jobs_are_pointed_at_the_gates_service(result):
    namespace = result.outputs["namespace"]
    service = one(result, "Service", manifests.ETCD_GATE_NAME)
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["selector"] == {"app.kubernetes.io/name": "etcd-gate"}
    assert [p["port"] for p in service["spec"]["ports"]] == [2379]
    assert result.outputs["etcdEndpoint"] == f"{manifests.ETCD_GATE_NAME}.{namespace}.svc:2379"


def test_the_gate_runs_twice_on_the_manager_pool_restricted_with_its_own_token(result):
    deployment = one(result, "Deployment", "etcd-gate")
    assert deployment["spec"]["replicas"] == 2
    pod = pod_spec(deployment)
    assert pod["priorityClassName"] == "torchfleet-control"
    assert pod["serviceAccountName"] == "etcd-gate" and pod["automountServiceAccountToken"] is True
    term = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
    assert term["topologyKey"] == "kubernetes.io/hostname" and selects(term["labelSelector"], GATE)
    etcd = pod_spec(one(result, "StatefulSet", "etcd"))
    assert pod.get("nodeSelector") == etcd.get("nodeSelector")  # the manager pool, wherever etcd runs
    (container,) = pod["containers"]
    assert container["image"] == DEFAULT_IMAGE  # the trainer image of this release: it ships the gate
    assert container["command"][-2:] == ["-m", "elastic_trainer.etcd_gate"]
    assert "--etcd=etcd:2379" in container["args"]
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True and security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert selects(one(result, "PodDisruptionBudget", "etcd-gate")["spec"]["selector"], GATE)
    account = one(result, "ServiceAccount", "etcd-gate")
    assert account["automountServiceAccountToken"] is False  # only the gate's pod mounts one


def test_the_gates_role_is_exactly_its_resolvers_lookups(result):
    role = one(result, "Role", "torchfleet-etcd-gate")
    assert role["metadata"]["namespace"] == result.outputs["namespace"]
    granted = {(group, resource, verb) for rule in role["rules"] for group in rule["apiGroups"]
               for resource in rule["resources"] for verb in rule["verbs"]}
    assert granted == {("", "pods", "list"), ("batch", "jobs", "get")}
    binding = one(result, "RoleBinding", "torchfleet-etcd-gate")
    assert binding["roleRef"]["name"] == "torchfleet-etcd-gate"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "etcd-gate",
                                    "namespace": result.outputs["namespace"]}]


def test_every_operator_gets_the_gate():
    for operator in ("job", "torchelastic", "kubeflow"):
        files = static.files_for(operator)
        assert {"etcd-gate/deployment.yaml", "etcd-gate/service.yaml", "policies/etcd-gate-ingress.yaml",
                "policies/etcd-gate-egress.yaml", "policies/training-to-etcd-gate.yaml"} <= set(files)


# etcd-io/etcd server/v3@v3.5.35 etcdserver/api/v2store/store.go line 101: newWatchHub(1000), the v2 store's
# event history, each event with its key's value and the value it replaced (event_history.go addEvent).
V2_EVENTS_KEPT = 1000
# A snapshot's JSON is held this many times while it is made, and kept once until the next one (pprof of
# bench/etcd_memory.py's attack on etcd 3.5.35: the encoder's pooled buffer, grown by doubling, encoding/json
# encodeStatePool; the copy json.Marshal returns, kept by raft's MemoryStorage; raftpb and snappb marshals).
SNAPSHOT_COPIES = 6


def test_etcd_keeps_what_the_gate_lets_through_within_its_memory(result):
    # Hostile-researcher review: one run rewriting its 64 KiB state took a member to 1,308 MiB resident, past its
    # 1 GiB: etcd kept 15,000 raft entries (--snapshot-count 10,000 and 5,000 catch-up entries), and every snapshot
    # wrote the v2 event history (1,000 values and those they replaced, 128 MiB of JSON at 64 KiB) and the whole
    # store. What a member holds of the gate's writes at their largest is counted here from what the stack
    # deploys: the raft entries (snapshot-count + catch-up, each a value at the state's limit with its key and
    # request), the event history, what all runs hold (max-held-bytes per gate replica) and the snapshots'
    # copies. It must stay under GOMEMLIMIT; the garbage of writing at the gate's rate bound comes on top
    # (bench/etcd_memory.py measures the peak).
    etcd = pod_spec(one(result, "StatefulSet", "etcd"))["containers"][0]
    flags = dict(arg.split("=", 1) for arg in etcd["args"] if "=" in arg)
    version = tuple(int(part) for part in etcd["image"].rpartition(":")[2].split("-")[0].split("."))
    assert version >= (3, 5, 14)  # --experimental-snapshot-catchup-entries: etcd-io/etcd v3.5.14 etcdmain/config.go
    entries = int(flags["--snapshot-count"]) + int(flags["--experimental-snapshot-catchup-entries"])
    deployment = one(result, "Deployment", "etcd-gate")
    (gate,) = pod_spec(deployment)["containers"]
    given = dict(arg.removeprefix("--").split("=", 1) for arg in gate["args"] if arg.startswith("--max-"))
    limits = Limits(**{name.replace("-", "_"): int(value) for name, value in given.items()})
    assert limits == Limits()  # the gate's defaults, written out
    held = deployment["spec"]["replicas"] * limits.max_held_bytes
    snapshot = 2 * V2_EVENTS_KEPT * limits.max_value_bytes + 2 * held  # JSON: a value's bytes, escaped at most 2x
    kept = entries * (limits.max_value_bytes + 1024) + V2_EVENTS_KEPT * limits.max_value_bytes + held
    env = {item["name"]: item.get("value") for item in etcd["env"]}
    total = kept + SNAPSHOT_COPIES * snapshot
    assert total <= quantity(env["GOMEMLIMIT"]), f"{total / 2**20:.0f} MiB"
