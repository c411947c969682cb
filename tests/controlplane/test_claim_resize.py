"""A statically bound claim cannot grow (issue 29, day 2): why the shared claims keep their first request.

The store's size (storage.sizeGb) feeds the shared PersistentVolume's capacity and, before this test,
each shared claim's request. pulumi-kubernetes plans a changed request as an in-place update (its
forceNew table has no spec.resources: torchfleet/preview/force_new/kubernetes.yaml), and the API server
refuses it for a claim bound to a volume of storageClassName "" (kubernetes pkg/apis/core/validation
ValidatePersistentVolumeClaimUpdate and the PersistentVolumeClaimResize admission plugin: only a claim
whose StorageClass allows expansion may grow), so a bigger store failed the `up` on the claim. The
volume's capacity is mutable and carries the size; the claims ignore later request changes
(components/kube/training.py). Run against the real API server (the session's control plane).
"""

from __future__ import annotations

import time

import pytest

NAMESPACE = "claim-resize"


@pytest.fixture(scope="module")
def core(control_plane):
    from kubernetes import client

    api = client.CoreV1Api(control_plane.api())
    api.create_namespace({"metadata": {"name": NAMESPACE}})
    yield api
    api.delete_namespace(NAMESPACE)
    api.delete_persistent_volume(f"{NAMESPACE}-store")


def bound(core) -> str:
    """A PersistentVolume and the claim bound to it, as the training layer makes them (manifests.py)."""
    core.create_persistent_volume({
        "metadata": {"name": f"{NAMESPACE}-store"},
        "spec": {
            "capacity": {"storage": "1Ti"}, "accessModes": ["ReadWriteMany"], "storageClassName": "",
            "persistentVolumeReclaimPolicy": "Retain", "claimRef": {"namespace": NAMESPACE, "name": "shared"},
            "nfs": {"server": "127.0.0.1", "path": "/share"},
        },
    })
    core.create_namespaced_persistent_volume_claim(NAMESPACE, {
        "metadata": {"name": "shared"},
        "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "", "volumeName": f"{NAMESPACE}-store",
                 "resources": {"requests": {"storage": "1Ti"}}},
    })
    deadline = time.monotonic() + 60
    while (phase := core.read_namespaced_persistent_volume_claim("shared", NAMESPACE).status.phase) != "Bound":
        assert time.monotonic() < deadline, f"claim {phase}, not Bound"
        time.sleep(0.5)
    return "shared"


def test_a_bound_static_claim_cannot_grow_but_its_volume_can(core):
    from kubernetes.client.exceptions import ApiException

    claim = bound(core)
    with pytest.raises(ApiException) as refused:
        core.patch_namespaced_persistent_volume_claim(
            claim, NAMESPACE, {"spec": {"resources": {"requests": {"storage": "2Ti"}}}})
    assert refused.value.status in (403, 422), refused.value
    print(f"[claim-resize] {refused.value.status}: {refused.value.body}")
    # The volume's capacity is what changes with the store, in place.
    core.patch_persistent_volume(f"{NAMESPACE}-store", {"spec": {"capacity": {"storage": "2Ti"}}})
    assert core.read_persistent_volume(f"{NAMESPACE}-store").spec.capacity["storage"] == "2Ti"
