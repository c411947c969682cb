"""TrainingLayer under Pulumi's mocks: what every stack's cluster really gets.

Parametrized over every stack in stacks/.
"""

from __future__ import annotations

import pytest

from components.clouds.local import LOCAL_STORE_PATH
from components.kube import kubeflow, node_healer, store_owner
from components.spec import (
    LABEL_CAPACITY,
    LABEL_GPU,
    LABEL_GPU_PRESENT,
    LABEL_JOB,
    LABEL_POOL,
    LABEL_ROLE,
    OPERATORS,
    ROLE_TRAINING,
)
from tests.harness import STACKS, STACKS_DIR, SynthResult, synth_config, synth_stack
from torchfleet.preview.stack_file import load_stack_file

POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
STS = "kubernetes:apps/v1:StatefulSet"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
PV = "kubernetes:core/v1:PersistentVolume"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"
JOB = "kubernetes:batch/v1:Job"
ETCD_LABELS = {"app.kubernetes.io/name": "etcd", "app.kubernetes.io/component": "rendezvous",
               "app.kubernetes.io/part-of": "torchfleet"}
TRAINING_POD = {LABEL_ROLE: ROLE_TRAINING, LABEL_JOB: "any-job"}
GATE_LABELS = {"app.kubernetes.io/name": "etcd-gate"}
GATE_POD = {**GATE_LABELS, "app.kubernetes.io/component": "rendezvous", "app.kubernetes.io/part-of": "torchfleet"}
# The labels every GPU node carries (README.md, "Names, labels, taints").
GPU_NODE = {LABEL_POOL: "gpu", LABEL_GPU: "t4", LABEL_CAPACITY: "spot", LABEL_GPU_PRESENT: "true"}


@pytest.fixture(scope="module", params=STACKS)
def result(request) -> SynthResult:
    return synth_stack(request.param)


@pytest.fixture(scope="module")
def local() -> SynthResult:
    return synth_stack("local")


@pytest.fixture(scope="module")
def local_torchelastic() -> SynthResult:
    """The local stack with the seeds' ElasticJob controller (operator torchelastic; the stacks run `job`)."""
    config = load_stack_file(STACKS_DIR / "Pulumi.local.yaml")
    config["torchfleet:training"] = {**config["torchfleet:training"], "operator": "torchelastic"}
    return synth_config("local", config)


def objects(result: SynthResult, kind: str) -> list[dict]:
    """The layer's objects of `kind` outside the store owner's namespace (tested on their own below)."""
    return [o for o in result.kubernetes_objects() if o["kind"] == kind and not is_store_owner(o)]


def is_store_owner(obj: dict) -> bool:
    meta = obj["metadata"]
    return store_owner.NAMESPACE in (meta.get("namespace"), meta["name"]) or (
        obj["kind"] == "PersistentVolume" and meta["name"].startswith(f"{store_owner.NAMESPACE}-")
    )


def training_volume(result: SynthResult):
    """The recorded PersistentVolume training pods use (not the store owner's)."""
    return result.one(PV, "torchfleet-training-shared-volume")


def training_claim(result: SynthResult):
    (claim,) = [r for r in result.of_type(PVC) if r.inputs["metadata"].get("namespace") != store_owner.NAMESPACE]
    return claim


def one(result: SynthResult, kind: str, name: str) -> dict:
    (found,) = [o for o in objects(result, kind) if o["metadata"]["name"] == name]
    return found


def selects(selector: dict, labels: dict) -> bool:
    """A label selector with matchLabels only (all ours are) against a pod's labels."""
    assert set(selector) <= {"matchLabels"}, f"unexpected selector form {selector}"
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def policies_for(result: SynthResult, labels: dict, direction: str) -> list[dict]:
    return [
        p for p in objects(result, "NetworkPolicy")
        if selects(p["spec"]["podSelector"], labels) and direction in p["spec"]["policyTypes"]
    ]


def pod_spec(obj: dict) -> dict:
    return obj["spec"]["template"]["spec"]


# ---------------------------------------------------------------- etcd


def test_etcd_runs_only_on_the_manager_pool(result):
    etcd = one(result, "StatefulSet", "etcd")
    pod = pod_spec(etcd)
    selector = pod.get("nodeSelector", {})
    if result.stack == "local":
        assert selector == {}  # one node: anywhere
    else:
        assert selector, "etcd needs the manager pool's nodeSelector on a cloud"
        assert not selects({"matchLabels": selector}, GPU_NODE), "the selector also matches GPU nodes"
    # No toleration of the GPU taints: it can never land on a spot GPU node either.
    tolerated = {t.get("key") for t in pod.get("tolerations", [])}
    assert not tolerated & {"nvidia.com/gpu", "kubernetes.azure.com/scalesetpriority"}
    # Same pool as the controller: both are control pods.
    if any(d["metadata"]["name"] == "elasticjob-controller" for d in objects(result, "Deployment")):
        assert pod_spec(one(result, "Deployment", "elasticjob-controller")).get("nodeSelector", {}) == selector


def test_every_statefulset_deletes_its_claims_with_it(result):
    """Regression (issue 20, AWS review m5, GCP review F16): claims from volumeClaimTemplates are no
    Pulumi resource, and the default retention (Retain) left etcd's disks billing after `pulumi
    destroy`. The class: every StatefulSet the layer renders that makes claims deletes them with it."""
    with_claims = [s for s in objects(result, "StatefulSet") if s["spec"].get("volumeClaimTemplates")]
    assert with_claims, "etcd keeps its data on claims"
    for sts in with_claims:
        policy = sts["spec"].get("persistentVolumeClaimRetentionPolicy", {})
        assert policy.get("whenDeleted") == "Delete", sts["metadata"]["name"]


def test_etcd_is_pinned_3_5_with_the_v2_api(result):
    container = pod_spec(one(result, "StatefulSet", "etcd"))["containers"][0]
    # Kubernetes' etcd image (bash as /bin/sh, etcdctl) for the start script that rejoins a member.
    assert container["image"].startswith("registry.k8s.io/etcd:3.5.")
    assert "--enable-v2=true" in container["args"]


def test_etcd_members_match_the_stack(result):
    etcd = one(result, "StatefulSet", "etcd")
    replicas = 1 if result.stack == "local" else 3
    assert etcd["spec"]["replicas"] == replicas
    (initial,) = [a for a in pod_spec(etcd)["containers"][0]["args"] if a.startswith("--initial-cluster=")]
    assert initial.count("=http://") == replicas
    zones = [c for c in pod_spec(etcd).get("topologySpreadConstraints", [])
             if c["topologyKey"] == "topology.kubernetes.io/zone"]
    assert (zones == []) == (result.stack == "local")


def quantity(text: str) -> int:
    """Bytes in a Kubernetes quantity (512Mi, 2Gi) or a Go GOMEMLIMIT (800MiB)."""
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
    number = text.removesuffix("B")
    for suffix, factor in units.items():
        if number.endswith(suffix):
            return int(number[: -len(suffix)]) * factor
    return int(number)


def test_etcd_is_sized_for_the_rendezvous_write_load(result):
    # Issue 15: etcd keeps every write since its last snapshot in memory, and every heartbeat writes
    # a job's whole rendezvous state; with etcd's default --snapshot-count (100,000) a 64-node job's
    # heartbeats outgrow the memory limit (bench/rendezvous.py, README.md "Rendezvous at scale").
    etcd = one(result, "StatefulSet", "etcd")
    container = pod_spec(etcd)["containers"][0]
    flags = dict(arg.split("=", 1) for arg in container["args"] if "=" in arg)
    assert int(flags["--snapshot-count"]) <= 10_000
    env = {item["name"]: item.get("value") for item in container.get("env", [])}
    resources = container["resources"]
    limit = quantity(resources["limits"]["memory"])
    assert quantity(env["GOMEMLIMIT"]) < limit  # Go collects harder before the kernel kills it
    assert quantity(resources["requests"]["memory"]) <= limit
    # the v3 backend's quota leaves the data volume room for the WAL and the snapshots
    volume = quantity(etcd["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"])
    assert int(flags["--quota-backend-bytes"]) <= volume // 2


def test_etcd_is_cluster_internal(result):
    for name in ("etcd", "etcd-peers"):
        service = one(result, "Service", name)
        assert service["spec"]["type"] == "ClusterIP"
    assert not [s for s in objects(result, "Service") if s["spec"].get("type") in ("NodePort", "LoadBalancer")]


def test_etcd_accepts_only_the_gate_and_its_members(result):
    rules = [r for p in policies_for(result, ETCD_LABELS, "Ingress") for r in p["spec"].get("ingress", [])]
    assert rules, "etcd has no ingress policy: default deny would cut rendezvous off"
    for rule in rules:
        for peer in rule["from"]:
            assert set(peer) == {"podSelector"}, f"etcd reachable from outside the namespace: {peer}"
            labels = peer["podSelector"]["matchLabels"]
            if labels == GATE_LABELS:
                assert rule["ports"] == [{"protocol": "TCP", "port": 2379}]
            else:
                assert labels == {"app.kubernetes.io/name": "etcd"}
    # Neither a training pod nor the controller matches an allowing rule: only the gate does.
    for other in (TRAINING_POD, {"app.kubernetes.io/name": "elasticjob-controller"}):
        assert not any(selects(peer["podSelector"], other) for rule in rules for peer in rule["from"])
    assert any(selects(peer["podSelector"], GATE_POD) for rule in rules for peer in rule["from"])


def test_etcd_has_probes_budget_and_is_non_root(result):
    etcd = one(result, "StatefulSet", "etcd")
    pod = pod_spec(etcd)
    container = pod["containers"][0]
    assert {"startupProbe", "livenessProbe", "readinessProbe"} <= set(container)
    assert container["resources"]["requests"] and container["resources"]["limits"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert etcd["spec"]["volumeClaimTemplates"][0]["spec"]["accessModes"] == ["ReadWriteOnce"]
    pdb = one(result, "PodDisruptionBudget", "etcd")
    assert selects(pdb["spec"]["selector"], ETCD_LABELS)


# ---------------------------------------------------------------- controller and RBAC


def test_rbac_has_no_wildcard_and_no_secrets(result, local_torchelastic):
    roles = objects(result, "ClusterRole") + objects(result, "Role")
    if result.outputs["operator"] == "job":
        # Kubernetes' own Job controller runs the jobs: the layer grants nothing but the researchers' Role
        # (k8s/base/jobs/role-researcher.yaml), which is namespaced.
        # and the etcd gate's (k8s/base/etcd-gate/role.yaml), which is namespaced too.
        assert {("Role", "torchfleet-etcd-gate"), ("Role", "torchfleet-researcher")} <= {
            (r["kind"], r["metadata"]["name"]) for r in roles}
        roles = objects(local_torchelastic, "ClusterRole") + objects(local_torchelastic, "Role")
    assert roles
    for role in roles:
        for rule in role["rules"]:
            for field in ("apiGroups", "resources", "verbs", "resourceNames"):
                assert "*" not in rule.get(field, []), f"{role['metadata']['name']}: wildcard in {field}"
            assert "secrets" not in rule.get("resources", [])


def test_controller_has_its_own_account_bound_to_its_role(local_torchelastic):
    local = local_torchelastic
    deployment = one(local, "Deployment", "elasticjob-controller")
    assert pod_spec(deployment)["serviceAccountName"] == "elasticjob-controller"
    assert pod_spec(deployment)["containers"][0]["image"] == "torchelastic/kubernetes:0.1.0"
    assert "--enable-leader-election" in pod_spec(deployment)["containers"][0]["args"]
    binding = one(local, "ClusterRoleBinding", "torchfleet-elasticjob-controller")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "elasticjob-controller",
                                    "namespace": "elastic-job"}]
    assert binding["roleRef"]["name"] == "torchfleet-elasticjob-controller"


# ---------------------------------------------------------------- the shared store


def test_claim_is_read_write_many_and_bound_to_the_store_volume(result):
    (pv,) = objects(result, "PersistentVolume")
    (claim,) = objects(result, "PersistentVolumeClaim")
    assert pv["spec"]["accessModes"] == claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert claim["spec"]["volumeName"] == pv["metadata"]["name"]
    assert claim["spec"]["storageClassName"] == pv["spec"]["storageClassName"] == ""
    assert pv["spec"]["claimRef"] == {"namespace": claim["metadata"]["namespace"], "name": claim["metadata"]["name"]}
    assert claim["metadata"]["name"] == result.outputs["sharedClaim"]
    sources = set(pv["spec"]) & {"csi", "nfs", "hostPath", "azureFile"}
    assert len(sources) == 1
    if result.stack == "local":
        assert pv["spec"]["hostPath"]["path"] == LOCAL_STORE_PATH
    else:
        assert sources <= {"csi", "nfs"}
    # The claim is created after the volume it binds to.
    claim_deps = training_claim(result).options["dependencies"]
    assert any(d.endswith(f"::{training_volume(result).name}") for d in claim_deps)


# ---------------------------------------------------------------- network policies


def test_namespace_denies_by_default(result):
    deny = one(result, "NetworkPolicy", "default-deny")
    assert deny["spec"]["podSelector"] == {}
    assert deny["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert "ingress" not in deny["spec"] and "egress" not in deny["spec"]


def test_every_pod_may_use_dns_only_in_kube_system(result):
    dns = one(result, "NetworkPolicy", "allow-dns")
    assert dns["spec"]["podSelector"] == {}
    (rule,) = dns["spec"]["egress"]
    assert rule["to"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}}}]
    assert {(p["protocol"], p["port"]) for p in rule["ports"]} == {("UDP", 53), ("TCP", 53)}


def test_training_pods_reach_the_etcd_gate_on_2379_and_never_etcd(result):
    rules = [r for p in policies_for(result, TRAINING_POD, "Egress") for r in p["spec"].get("egress", [])]
    to_gate = [r for r in rules for peer in r.get("to", []) if "podSelector" in peer
               and selects(peer["podSelector"], GATE_POD)]
    assert to_gate and all(r["ports"] == [{"protocol": "TCP", "port": 2379}] for r in to_gate)
    to_etcd = [r for r in rules for peer in r.get("to", []) if "podSelector" in peer
               and selects(peer["podSelector"], ETCD_LABELS)]
    assert to_etcd == []


def test_training_pods_reach_the_store_on_nfs_where_it_is_remote(result):
    store = [p for p in objects(result, "NetworkPolicy") if p["metadata"]["name"] == "training-to-store"]
    if result.stack == "local":
        assert store == []  # hostPath: nothing on the network
        return
    if result.stack.startswith("gcp"):
        assert store == []  # the Filestore export refuses pod addresses (test_gcp.py, GCP review F10)
        return
    (policy,) = store
    assert selects(policy["spec"]["podSelector"], TRAINING_POD)
    (rule,) = policy["spec"]["egress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 2049}]
    assert rule["to"] and all(set(peer) == {"ipBlock"} for peer in rule["to"])


# ---------------------------------------------------------------- priorities, accounts, outputs


def test_control_pods_outrank_training_pods(result):
    control = one(result, "PriorityClass", "torchfleet-control")
    training = one(result, "PriorityClass", "torchfleet-training")
    assert control["value"] > training["value"]
    assert training["preemptionPolicy"] == "Never"
    for obj in objects(result, "StatefulSet") + objects(result, "Deployment"):
        if obj["metadata"].get("namespace") == result.outputs["namespace"]:
            assert pod_spec(obj)["priorityClassName"] == "torchfleet-control"


def test_jobs_get_an_account_without_a_token(result):
    account = one(result, "ServiceAccount", "training-job")
    assert account["automountServiceAccountToken"] is False


def test_outputs(result):
    namespace = result.outputs["namespace"]
    assert namespace == "elastic-job"
    assert result.outputs["etcdEndpoint"] == f"etcd-gate.{namespace}.svc:2379"
    assert result.outputs["operator"] in OPERATORS
    assert result.outputs["sharedClaim"] == "shared-data"


def test_layer_objects_use_the_cluster_provider(result):
    layer = result.one("torchfleet:kube:TrainingLayer")
    kube = [r for r in result.resources if r.custom and r.type.startswith("kubernetes:")
            and (r.parent == layer.key or result_parent_chain_has(result, r, layer.key))]
    assert kube
    providers = {r.options["provider"].split("::")[-2] for r in kube}
    assert len(providers) == 1 and providers.pop().endswith("-k8s")


def result_parent_chain_has(result: SynthResult, r, key: str) -> bool:
    by_key = {x.key: x for x in result.resources}
    parent = r.parent
    while parent:
        if parent == key:
            return True
        parent = by_key[parent].parent if parent in by_key else None
    return False


# ---------------------------------------------------------------- config variants (local)


@pytest.fixture(scope="module")
def kubeflow_local() -> SynthResult:
    return synth_config("kf", {"torchfleet:cloud": "local", "torchfleet:training": {"operator": "kubeflow"}})


def test_kubeflow_installs_the_pinned_training_operator_instead(kubeflow_local):
    directory = kubeflow_local.one("kubernetes:kustomize/v2:Directory")
    assert directory.inputs["directory"] == kubeflow.TRAINING_OPERATOR_MANIFESTS
    assert directory.inputs["directory"].endswith("//manifests/overlays/standalone?ref=v1.9.4")
    kinds = {o["kind"] for o in kubeflow_local.kubernetes_objects()}
    assert "CustomResourceDefinition" not in kinds
    # no ElasticJob controller (the node healer's Deployment is the layer's own: test_node_healer.py)
    assert "elasticjob-controller" not in {d["metadata"]["name"] for d in objects(kubeflow_local, "Deployment")}
    assert one(kubeflow_local, "StatefulSet", "etcd")  # the same etcd serves PyTorchJob
    assert kubeflow_local.outputs["operator"] == "kubeflow"


def test_torchelastic_stack_has_no_kubeflow(local):
    assert local.of_type("kubernetes:kustomize/v2:Directory") == []


@pytest.fixture(scope="module")
def renamed() -> SynthResult:
    return synth_config("ns", {"torchfleet:cloud": "local",
                               "torchfleet:training": {"namespace": "ml", "etcdReplicas": 3}})


def test_namespace_and_members_follow_config(renamed):
    assert renamed.outputs["namespace"] == "ml"
    assert renamed.outputs["etcdEndpoint"] == "etcd-gate.ml.svc:2379"
    for obj in renamed.kubernetes_objects():
        if is_store_owner(obj) or node_healer.NAMESPACE in (obj["metadata"].get("namespace"), obj["metadata"]["name"]):
            continue  # a fixed namespace; its objects' names follow the training namespace (test_training_store)
        if obj["kind"] == "Namespace":
            assert obj["metadata"]["name"] == "ml"
        elif "namespace" in obj["metadata"]:
            assert obj["metadata"]["namespace"] == "ml"
    (pv,) = objects(renamed, "PersistentVolume")
    assert pv["metadata"]["name"] == "ml-shared-data"
    assert pv["spec"]["claimRef"]["namespace"] == "ml"
    assert one(renamed, "StatefulSet", "etcd")["spec"]["replicas"] == 3


def test_namespaced_objects_wait_for_their_namespace(local):
    namespaces = {r.inputs["metadata"]["name"]: r for r in local.of_type("kubernetes:core/v1:Namespace")}
    assert set(namespaces) == {"elastic-job", store_owner.NAMESPACE, node_healer.NAMESPACE}
    waiting = local.of_type(STS) + local.of_type(DEPLOYMENT) + local.of_type(POLICY) + local.of_type(PVC)
    waiting += local.of_type(JOB)
    for r in waiting:
        namespace = namespaces[r.inputs["metadata"]["namespace"]]
        assert any(d.endswith(f"::{namespace.name}") for d in r.options["dependencies"]), r.name


def test_only_the_claim_waits_for_the_volume(local):
    volume = training_volume(local)
    waiting = {r.type for r in local.resources if r.custom
               and any(d.endswith(f"::{volume.name}") for d in r.options["dependencies"])}
    assert waiting == {PVC}
