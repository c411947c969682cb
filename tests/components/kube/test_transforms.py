"""transforms.py on the real k8s/ objects: how a stack parametrizes the static files."""

from __future__ import annotations

import pytest

from components.kube import static, transforms

MANAGER = {"torchfleet.io/pool": "manager"}


def settings(**overrides) -> transforms.LayerSettings:
    values = {
        "namespace": "jobs",
        "claim_name": "team-data",
        "store_capacity": "1Ti",
        "etcd_replicas": 3,
        "manager_selector": MANAGER,
        "zoned": True,
    }
    return transforms.LayerSettings(**{**values, **overrides})


def rendered(relative: str, **overrides) -> dict:
    return transforms.apply(static.load(relative), settings(**overrides))


def etcd_args(sts: dict) -> list[str]:
    return sts["spec"]["template"]["spec"]["containers"][0]["args"]


@pytest.mark.parametrize("relative", static.kustomization_files())
def test_every_object_lands_in_the_stack_namespace(relative):
    obj = rendered(relative)
    if obj["kind"] == "Namespace":
        assert obj["metadata"]["name"] == "jobs"
    elif obj["kind"] in transforms.CLUSTER_SCOPED:
        assert "namespace" not in obj["metadata"]
    else:
        assert obj["metadata"]["namespace"] == "jobs"
    for subject in obj.get("subjects") or []:
        if subject["kind"] == "ServiceAccount":  # users and groups have no namespace
            assert subject["namespace"] == "jobs"


@pytest.mark.parametrize("relative", ["etcd/statefulset.yaml", "controller/deployment.yaml"])
def test_control_pods_go_to_the_manager_pool(relative):
    assert rendered(relative)["spec"]["template"]["spec"]["nodeSelector"] == MANAGER


# Every cloud's manager taint (issue 30: the pool is tainted so that only platform pods land beside etcd).
MANAGER_TOLERATIONS = [
    {"key": "CriticalAddonsOnly", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
    {"key": "components.gke.io/gke-managed-components", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
    {"key": "torchfleet.io/pool", "operator": "Equal", "value": "manager", "effect": "NoSchedule"},
]


CONTROL_PODS = ["etcd/statefulset.yaml", "controller/deployment.yaml", "etcd-gate/deployment.yaml"]


@pytest.mark.parametrize("relative", CONTROL_PODS)
@pytest.mark.parametrize("selector", [MANAGER, {}])
def test_control_pods_tolerate_every_clouds_manager_taint_and_only_it(relative, selector):
    """Exactly each cloud's manager taint, never an Exists on torchfleet.io/pool (which would tolerate the CPU
    pool's taint too); with no selector as well (the local stack, the test tier's tainted manager nodes)."""
    pod = rendered(relative, manager_selector=selector)["spec"]["template"]["spec"]
    assert pod["tolerations"] == MANAGER_TOLERATIONS


def test_no_manager_selector_means_any_node():
    pod = rendered("etcd/statefulset.yaml", manager_selector={})["spec"]["template"]["spec"]
    assert "nodeSelector" not in pod


def test_the_manager_tolerations_are_added_once():
    obj = static.load("etcd/statefulset.yaml")
    transforms.set_manager_selector(obj, MANAGER)
    transforms.set_manager_selector(obj, MANAGER)
    assert obj["spec"]["template"]["spec"]["tolerations"] == MANAGER_TOLERATIONS


@pytest.mark.parametrize("replicas", [1, 3, 5])
def test_etcd_members_match_replicas(replicas):
    sts = rendered("etcd/statefulset.yaml", etcd_replicas=replicas)
    assert sts["spec"]["replicas"] == replicas
    (initial,) = [a for a in etcd_args(sts) if a.startswith("--initial-cluster=")]
    members = initial.removeprefix("--initial-cluster=").split(",")
    assert [m.split("=")[0] for m in members] == [f"etcd-{i}" for i in range(replicas)]


def test_etcd_keeps_its_other_flags_in_place():
    before = etcd_args(static.load("etcd/statefulset.yaml"))
    after = etcd_args(rendered("etcd/statefulset.yaml", etcd_replicas=1))
    assert len(after) == len(before)
    assert [a for a in after if not a.startswith("--initial-cluster=")] == [
        a for a in before if not a.startswith("--initial-cluster=")
    ]
    assert "--enable-v2=true" in after


def test_zone_spread_kept_on_zoned_clusters_and_dropped_elsewhere():
    def keys(**kw):
        pod = rendered("etcd/statefulset.yaml", **kw)["spec"]["template"]["spec"]
        return [c["topologyKey"] for c in pod.get("topologySpreadConstraints", [])]

    assert keys(zoned=True) == ["topology.kubernetes.io/zone"]
    assert keys(zoned=False) == []


def test_etcd_zone_spread_is_soft_so_members_never_wait_for_a_zone():
    """Regression: DoNotSchedule over zones left members Pending on a manager pool that is one
    multi-zone Auto Scaling group starting at one node (the autoscaler cannot pick the zone)."""
    pod = rendered("etcd/statefulset.yaml")["spec"]["template"]["spec"]
    (zone,) = pod["topologySpreadConstraints"]
    assert zone["whenUnsatisfiable"] == "ScheduleAnyway"
    assert zone["maxSkew"] == 1
    assert zone["labelSelector"] == {"matchLabels": {"app.kubernetes.io/name": "etcd"}}


@pytest.mark.parametrize("zoned", [True, False])
def test_etcd_members_never_share_a_node(zoned):
    """Regression (issue 19): a soft hostname spread let all three members share the manager pool's
    first node, whose loss took the quorum. One member per node is required, wherever zones are."""
    pod = rendered("etcd/statefulset.yaml", zoned=zoned)["spec"]["template"]["spec"]
    assert set(pod["affinity"]) == {"podAntiAffinity"}
    (rule,) = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert rule["topologyKey"] == "kubernetes.io/hostname"
    labels = rendered("etcd/statefulset.yaml")["spec"]["template"]["metadata"]["labels"]
    assert rule["labelSelector"]["matchLabels"].items() <= labels.items()  # it selects the members


@pytest.mark.parametrize("storage_class", ["torchfleet-gp3-encrypted", "premium-rwo"])
def test_etcd_volumes_get_the_cloud_storage_class(storage_class):
    sts = rendered("etcd/statefulset.yaml", storage_class=storage_class)
    assert [t["spec"]["storageClassName"] for t in sts["spec"]["volumeClaimTemplates"]] == [storage_class]


def test_etcd_volumes_use_the_cluster_default_without_a_storage_class():
    sts = rendered("etcd/statefulset.yaml", storage_class=None)
    (template,) = sts["spec"]["volumeClaimTemplates"]
    assert "storageClassName" not in template["spec"]  # "" would turn dynamic provisioning off
    # And a class set earlier (a reused dict) is removed, not left behind.
    template["spec"]["storageClassName"] = "old"
    transforms.set_etcd_storage_class(sts, None)
    assert "storageClassName" not in template["spec"]


@pytest.mark.parametrize("relative", ["storage/claim.yaml", "controller/deployment.yaml"])
def test_storage_class_touches_only_etcd(relative):
    assert rendered(relative, storage_class="x") == rendered(relative, storage_class=None)


def test_drop_zone_spread_removes_an_emptied_list():
    obj = {
        "kind": "Deployment",
        "spec": {"template": {"spec": {"topologySpreadConstraints": [{"topologyKey": "topology.kubernetes.io/zone"}]}}},
    }
    transforms.drop_zone_spread(obj)
    assert "topologySpreadConstraints" not in obj["spec"]["template"]["spec"]


def test_claim_is_renamed_and_bound_to_the_layer_volume():
    claim = rendered("storage/claim.yaml", store_capacity="20Gi")
    assert claim["metadata"]["name"] == "team-data"
    assert claim["spec"]["volumeName"] == "jobs-team-data"
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert claim["spec"]["storageClassName"] == ""
    assert claim["spec"]["resources"] == {"requests": {"storage": "20Gi"}}


def test_the_researcher_limits_allow_the_renamed_claim():
    """The admission policy names the shared claim: a stack's claim name must reach it, or researchers'
    pods could not mount the store (review 20, item 2: the limits now restrict which claims pods mount)."""
    static_claim = static.load("storage/claim.yaml")["metadata"]["name"]
    policy = static.load("cluster/validatingadmissionpolicy-researcher-limits.yaml")
    [before] = [v["expression"] for v in policy["spec"]["variables"] if v["name"] == "sharedClaim"]
    assert before == repr(static_claim)
    after = rendered("cluster/validatingadmissionpolicy-researcher-limits.yaml")
    [claim] = [v["expression"] for v in after["spec"]["variables"] if v["name"] == "sharedClaim"]
    assert claim == "'team-data'"


def test_etcd_transform_refuses_a_statefulset_without_initial_cluster():
    sts = static.load("etcd/statefulset.yaml")
    container = sts["spec"]["template"]["spec"]["containers"][0]
    container["args"] = [a for a in container["args"] if not a.startswith("--initial-cluster=")]
    with pytest.raises(ValueError, match="expected one --initial-cluster="):
        transforms.set_etcd_members(sts, 3)


@pytest.mark.parametrize("relative", ["etcd/service.yaml", "policies/default-deny.yaml", "namespace.yaml"])
def test_objects_without_pods_are_left_alone_by_pod_transforms(relative):
    obj = static.load(relative)
    before = repr(obj)
    transforms.set_manager_selector(obj, MANAGER)
    transforms.drop_zone_spread(obj)
    transforms.set_etcd_members(obj, 5)
    transforms.set_etcd_storage_class(obj, "x")
    assert repr(obj) == before
