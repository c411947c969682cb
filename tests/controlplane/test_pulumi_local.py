"""`pulumi up --stack local`, `preview` and `destroy` through the real engine and the real
Kubernetes provider (tests/controlplane/pulumi_engine.py) against a real API server.

The stack is stacks/Pulumi.local.yaml as committed: the provider reaches the test API server
through KUBECONFIG, as it reaches a kind cluster through the current context. Pods run on one
fake node (kwok), so the provider's await logic sees what a kubelet would report: the etcd
StatefulSet's and the controller's pods Ready, the store owner Job's pod Succeeded
(kwok_stages.py), the claims Bound by the real PV controller. Nothing here sets skipAwait.

One thing a kind cluster has that this one lacks: a default StorageClass with a provisioner
(kind's local-path). Without one the etcd StatefulSet's claim stays unbound, its pod Pending
("pod has unbound immediate PersistentVolumeClaims"), and the provider waits out its 10 minutes;
so the test makes the volume that provisioner would, before each `up` (provision_etcd_volumes).

Its own control plane, not the session's `control_plane`: the `training_layer` fixture applies the
same layer (same namespace, PriorityClasses, CRD, PersistentVolume names) into that one with
kubectl, and the engine's creates would collide with it ("already exists") or its destroy delete it.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import yaml

from components.kube import static
from tests.controlplane import nodes
from tests.controlplane.cluster import ControlPlane
from tests.controlplane.pulumi_engine import REPO, Engine

pytestmark = pytest.mark.pulumi_engine  # waits for the engine's build (tests/conftest.py)

STACK_FILE = REPO / "stacks" / "Pulumi.local.yaml"
PSA_RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with ControlPlane.start(tmp_path_factory.mktemp("pulumi-controlplane")) as cp:
        # One untainted node, as a kind cluster has: etcd, the controller and the store owner Job land here.
        node = nodes.node("local-0", {}, [], {"cpu": "8", "memory": "32Gi", "pods": "110"})
        from kubernetes import client

        client.CoreV1Api(cp.api()).create_node(node)
        yield cp


@pytest.fixture(scope="module")
def engine(cluster, tmp_path_factory):
    stack_config = yaml.safe_load(STACK_FILE.read_text())
    return Engine.create(tmp_path_factory.mktemp("pulumi-local"), cluster.kubeconfig, stack_config)


def provision_etcd_volumes(cp: ControlPlane) -> None:
    """A fresh PersistentVolume bound ahead to each etcd member's claim (data-etcd-N), as a
    dynamic provisioner would make it; a Released one from an earlier run is replaced."""
    from kubernetes import client

    core = client.CoreV1Api(cp.api())
    want = expected_layer()
    for i in range(want["etcd_replicas"]):
        name = f"test-provisioned-etcd-{i}"
        if any(pv.metadata.name == name for pv in core.list_persistent_volume().items):
            core.delete_persistent_volume(name)
            wait_for_absent(lambda n=name: core.list_persistent_volume(field_selector=f"metadata.name={n}").items)
        volume = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": name},
            "spec": {
                "capacity": {"storage": "2Gi"},  # k8s/base/etcd/statefulset.yaml volumeClaimTemplates
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain",
                "hostPath": {"path": f"/var/lib/{name}", "type": "DirectoryOrCreate"},
                "claimRef": {"namespace": want["namespace"], "name": f"data-etcd-{i}"},
            },
        }
        core.create_persistent_volume(volume)


def wait_for_absent(listing, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while listing():
        assert time.monotonic() < deadline, f"still there after {timeout_s} s: {listing()}"
        time.sleep(0.5)


def stack_resources(engine: Engine) -> list[dict[str, Any]]:
    """The Kubernetes objects the stack's state holds: apiVersion, kind, name, namespace."""
    state = json.loads(engine.cli("stack", "export", "--stack", engine.stack).stdout)
    out = []
    for resource in state["deployment"].get("resources", []):
        outputs = resource.get("outputs", {})
        if resource["type"].startswith("kubernetes:") and "kind" in outputs and "metadata" in outputs:
            meta = outputs["metadata"]
            out.append(
                {
                    "apiVersion": outputs["apiVersion"],
                    "kind": outputs["kind"],
                    "name": meta["name"],
                    "namespace": meta.get("namespace"),
                }
            )
    return out


def dynamic(cp: ControlPlane):
    from kubernetes.dynamic import DynamicClient

    return DynamicClient(cp.api())  # one discovery per client: make one per check, not per object


def live(dyn, ref: dict[str, Any]) -> dict[str, Any] | None:
    """The object REF names as the API server has it, or None if it has none."""
    from kubernetes.dynamic.exceptions import NotFoundError

    api = dyn.resources.get(api_version=ref["apiVersion"], kind=ref["kind"])
    try:
        return api.get(name=ref["name"], namespace=ref["namespace"]).to_dict()
    except NotFoundError:
        return None


def wait_gone(cp: ControlPlane, refs: list[dict[str, Any]], timeout_s: float = 120) -> list[dict[str, Any]]:
    """REFS that still exist after TIMEOUT_S (a namespace's content goes with it, asynchronously)."""
    deadline = time.monotonic() + timeout_s
    left, dyn = refs, dynamic(cp)
    while left and time.monotonic() < deadline:
        left = [ref for ref in left if live(dyn, ref) is not None]
        if left:
            time.sleep(1)
    return left


def expected_layer() -> dict[str, Any]:
    """What the local stack's config asks for: its namespace and the static files' object names."""
    config = yaml.safe_load(STACK_FILE.read_text())["config"]
    training = config["torchfleet:training"]
    namespace = training["namespace"]
    objects = [static.load(f) for f in static.files_for(training["operator"])]
    policies = {o["metadata"]["name"] for o in objects if o["kind"] == "NetworkPolicy"}
    return {"namespace": namespace, "etcd_replicas": training["etcdReplicas"], "policies": policies}


def assert_layer_up(cp: ControlPlane, resources: list[dict[str, Any]]) -> None:
    from kubernetes import client

    want = expected_layer()
    ns = want["namespace"]
    core, apps = client.CoreV1Api(cp.api()), client.AppsV1Api(cp.api())
    networking = client.NetworkingV1Api(cp.api())

    dyn = dynamic(cp)
    missing = [ref for ref in resources if live(dyn, ref) is None]
    assert not missing, f"in the stack's state but not on the API server: {missing}"

    labels = core.read_namespace(ns).metadata.labels
    assert PSA_RESTRICTED.items() <= labels.items(), f"namespace {ns} labels: {labels}"

    etcd = apps.read_namespaced_stateful_set("etcd", ns)
    assert etcd.spec.replicas == want["etcd_replicas"]
    assert etcd.status.ready_replicas == want["etcd_replicas"], etcd.status

    policies = {p.metadata.name for p in networking.list_namespaced_network_policy(ns).items}
    assert want["policies"] <= policies, f"missing NetworkPolicies: {want['policies'] - policies}"

    claims = core.list_namespaced_persistent_volume_claim(ns).items
    assert claims, f"no PersistentVolumeClaim in {ns}"
    assert all(c.status.phase == "Bound" for c in claims), [(c.metadata.name, c.status.phase) for c in claims]


# Two ups and two destroys through the engine: minutes on a loaded 2-core machine.
@pytest.mark.timeout(1800)
def test_up_preview_destroy_up(cluster, engine):
    started = time.monotonic()
    provision_etcd_volumes(cluster)
    up = engine.pulumi("up", "--yes", "--skip-preview")
    resources = stack_resources(engine)
    assert len(resources) >= 10, f"the stack registered only {resources}\n{up.stdout[-3000:]}"
    assert_layer_up(cluster, resources)
    # The provider came from build.py's bin folder: the engine downloaded no plugin.
    downloaded = sorted(p.name for p in (engine.workdir / "home" / "plugins").glob("*"))
    assert not downloaded, f"plugins downloaded into PULUMI_HOME: {downloaded}"

    # Idempotence: the provider's diff of the program against the live objects is empty.
    engine.pulumi("preview", "--expect-no-changes", "--diff")

    engine.pulumi("destroy", "--yes", "--skip-preview")
    assert stack_resources(engine) == []
    left = wait_gone(cluster, resources)
    assert not left, f"still on the API server after destroy: {left}"

    # Up again after destroy: nothing the first run left behind stands in the way.
    provision_etcd_volumes(cluster)
    engine.pulumi("up", "--yes", "--skip-preview")
    assert_layer_up(cluster, stack_resources(engine))
    engine.pulumi("destroy", "--yes", "--skip-preview")
    print(f"[pulumi-local] up, preview, destroy, up, destroy: {time.monotonic() - started:.0f} s")
