"""How the program parametrizes the static k8s/ objects: small pure functions on manifest dicts.

Each takes a manifest as YAML gives it (camelCase keys) and changes it in place; `apply`
runs them all and is what the Pulumi ConfigFile transformations call. Tested without mocks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from components.kube import manifests
from components.spec import MANAGER_TOLERATIONS

# Kinds with no namespace among the static files and those the layer makes.
CLUSTER_SCOPED = frozenset(
    {
        "Namespace",
        "CustomResourceDefinition",
        "PriorityClass",
        "ClusterRole",
        "ClusterRoleBinding",
        "PersistentVolume",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    }
)
LABEL_ZONE = "topology.kubernetes.io/zone"
PULUMI_WAIT_FOR = "pulumi.com/waitFor"


@dataclass(frozen=True)
class LayerSettings:
    """What the stack decides about the static objects."""

    namespace: str
    claim_name: str
    store_capacity: str
    etcd_replicas: int
    # nodeSelector of the manager pool, for control pods; empty: any node (local clusters).
    manager_selector: dict[str, str] = field(default_factory=dict)
    # Whether nodes carry topology.kubernetes.io/zone. A spread constraint on a missing label
    # leaves pods Pending, because nodes without the key are not candidates:
    # https://kubernetes.io/docs/concepts/scheduling-eviction/topology-spread-constraints/#interaction-with-node-affinity-and-node-selectors
    zoned: bool = True
    # StorageClass of etcd's data volumes (clouds/base.py ClusterHandle.storage_class); None:
    # storageClassName left unset, so the cluster's default class provisions them.
    storage_class: str | None = None

    @property
    def pv_name(self) -> str:
        return manifests.shared_volume_name(self.namespace, self.claim_name)


def set_namespace(obj: dict[str, Any], namespace: str) -> None:
    """Move a namespaced object (and ServiceAccount subjects of bindings) to `namespace`."""
    meta = obj.setdefault("metadata", {})
    kind = obj["kind"]
    if kind == "Namespace":
        meta["name"] = namespace
    elif kind not in CLUSTER_SCOPED:
        meta["namespace"] = namespace
    for subject in obj.get("subjects") or []:
        if subject.get("kind") == "ServiceAccount":
            subject["namespace"] = namespace


def _pod_spec(obj: dict[str, Any]) -> dict[str, Any] | None:
    if obj["kind"] in ("Deployment", "StatefulSet"):
        return obj["spec"]["template"]["spec"]
    return None


def manager_tolerations() -> list[dict[str, str]]:
    """Every cloud's manager taint, tolerated (spec/model.py MANAGER_TOLERATIONS): a fresh copy per pod."""
    return [dict(t) for t in MANAGER_TOLERATIONS]


def set_manager_selector(obj: dict[str, Any], selector: dict[str, str]) -> None:
    """Put control pods (every Deployment/StatefulSet in k8s/base/) on the manager pool, which is tainted
    so that nothing else lands there (issue 30): they select it and tolerate its taint. The tolerations go
    on with no selector too (the local stack), where they change nothing on an untainted node."""
    pod = _pod_spec(obj)
    if pod is None:
        return
    if selector:
        pod["nodeSelector"] = dict(selector)
    else:
        pod.pop("nodeSelector", None)
    kept = [t for t in pod.get("tolerations") or [] if t not in MANAGER_TOLERATIONS]
    pod["tolerations"] = kept + manager_tolerations()


def drop_zone_spread(obj: dict[str, Any]) -> None:
    """Remove zone spread constraints (for clusters whose nodes have no zone label)."""
    pod = _pod_spec(obj)
    if pod is None or "topologySpreadConstraints" not in pod:
        return
    kept = [c for c in pod["topologySpreadConstraints"] if c.get("topologyKey") != LABEL_ZONE]
    if kept:
        pod["topologySpreadConstraints"] = kept
    else:
        del pod["topologySpreadConstraints"]


def _is_etcd(obj: dict[str, Any]) -> bool:
    return obj["kind"] == "StatefulSet" and obj["metadata"]["name"] == manifests.ETCD_NAME


def set_etcd_members(obj: dict[str, Any], replicas: int) -> None:
    """Size the etcd StatefulSet, and list exactly its members in --initial-cluster."""
    if not _is_etcd(obj):
        return
    obj["spec"]["replicas"] = replicas
    container = obj["spec"]["template"]["spec"]["containers"][0]
    flag = "--initial-cluster="
    args = [a for a in container["args"] if not a.startswith(flag)]
    if len(args) != len(container["args"]) - 1:
        raise ValueError(f"k8s/base/etcd/statefulset.yaml: expected one {flag} argument")
    index = next(i for i, a in enumerate(container["args"]) if a.startswith(flag))
    args.insert(index, flag + manifests.etcd_initial_cluster(replicas))
    container["args"] = args


def set_etcd_storage_class(obj: dict[str, Any], storage_class: str | None) -> None:
    """Give etcd's volumeClaimTemplates the cloud's StorageClass, or none (the cluster default).

    Unset, not "": an empty storageClassName turns dynamic provisioning off and the claims would
    wait for a PersistentVolume nobody makes.
    https://kubernetes.io/docs/concepts/storage/persistent-volumes/#class-1
    """
    if not _is_etcd(obj):
        return
    for template in obj["spec"].get("volumeClaimTemplates") or []:
        if storage_class:
            template["spec"]["storageClassName"] = storage_class
        else:
            template["spec"].pop("storageClassName", None)


def await_established(obj: dict[str, Any]) -> None:
    """Pulumi counts a CRD created only once the API server serves it (condition Established).

    pulumi-kubernetes has no await logic of its own for CRDs (provider/pkg/await/awaiters.go
    lists none); its `pulumi.com/waitFor` annotation ("Improving Kubernetes management with
    Pulumi's await logic", pulumi.com blog; pyproject.toml pins pulumi-kubernetes 4.34.2) adds one,
    so what depends on the CRD (the controller, static.AFTER) starts once it is served.
    """
    if obj["kind"] != "CustomResourceDefinition":
        return
    annotations = obj.setdefault("metadata", {}).setdefault("annotations", {})
    annotations[PULUMI_WAIT_FOR] = "condition=Established"


def bind_claim(obj: dict[str, Any], claim_name: str, pv_name: str, capacity: str) -> None:
    """Name the shared claim and bind it to the layer's PersistentVolume."""
    if obj["kind"] != "PersistentVolumeClaim" or obj["metadata"]["name"] != manifests.STATIC_CLAIM_NAME:
        return
    obj["metadata"]["name"] = claim_name
    obj["spec"]["volumeName"] = pv_name
    obj["spec"]["resources"] = {"requests": {"storage": capacity}}


RESEARCHER_LIMITS = "torchfleet-researcher-limits"  # k8s/base/cluster/validatingadmissionpolicy-researcher-limits.yaml
SHARED_CLAIM_VARIABLE = "sharedClaim"


def set_researcher_claim(obj: dict[str, Any], claim_name: str) -> None:
    """The researcher limits let pods mount the shared claim by name: the name bind_claim gives it."""
    if obj["kind"] != "ValidatingAdmissionPolicy" or obj["metadata"]["name"] != RESEARCHER_LIMITS:
        return
    variables = [v for v in obj["spec"]["variables"] if v["name"] == SHARED_CLAIM_VARIABLE]
    if len(variables) != 1:
        raise ValueError(f"{RESEARCHER_LIMITS}: expected one variable {SHARED_CLAIM_VARIABLE}")
    variables[0]["expression"] = repr(claim_name)  # a DNS name: no quote or backslash to escape


def apply(obj: dict[str, Any], settings: LayerSettings) -> dict[str, Any]:
    """Every transformation, in place; returns obj for convenience."""
    set_namespace(obj, settings.namespace)
    set_manager_selector(obj, settings.manager_selector)
    if not settings.zoned:
        drop_zone_spread(obj)
    set_etcd_members(obj, settings.etcd_replicas)
    set_etcd_storage_class(obj, settings.storage_class)
    bind_claim(obj, settings.claim_name, settings.pv_name, settings.store_capacity)
    set_researcher_claim(obj, settings.claim_name)
    await_established(obj)
    return obj
