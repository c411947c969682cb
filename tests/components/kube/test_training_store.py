"""TrainingLayer under mocks: the store owner Job and etcd's StorageClass follow the cloud's handle.

Every stack is synthesized with the handle its cloud hands the layer recorded, so "the Job exists
exactly when the store does not enforce its owner" is checked against the cloud's own answer; a
`local` cloud whose handle says the opposite (store enforces the owner, etcd gets a named
StorageClass) covers the other branch.
"""

from __future__ import annotations

import dataclasses
import shlex

import pytest

from components import platform
from components.clouds.local import LocalCluster
from components.kube import store_owner
from components.kube.training import TrainingLayerArgs
from components.spec import TRAINING_UID
from tests.components.kube.test_training import is_store_owner
from tests.harness import STACKS, SynthResult, synth_config, synth_stack

JOB = "kubernetes:batch/v1:Job"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"
PV = "kubernetes:core/v1:PersistentVolume"
STORAGE_CLASS = "torchfleet-etcd-encrypted"
# The capabilities the baseline Pod Security level lets a container add:
# https://kubernetes.io/docs/concepts/security/pod-security-standards/#baseline
BASELINE_CAPABILITIES = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                         "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
# Where a PersistentVolume says what it is, as opposed to how it is bound.
PV_BINDING = {"claimRef", "storageClassName", "accessModes", "persistentVolumeReclaimPolicy", "capacity"}


class EnforcingLocal(LocalCluster):
    """`local`, but with a store that enforces its owner and a StorageClass for etcd (as AWS does)."""

    def __init__(self, name, spec, opts=None):
        super().__init__(name, spec, opts)
        store = dataclasses.replace(self.handle.store, owner_enforced=True)
        self.handle = dataclasses.replace(self.handle, store=store, storage_class=STORAGE_CLASS)


def synth_recording_handle(run):
    """(what `run()` synthesized, the ClusterHandle the cloud gave the training layer)."""
    handles = []

    def recording_args(spec, cluster):
        handles.append(cluster)
        return TrainingLayerArgs(spec=spec, cluster=cluster)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(platform, "TrainingLayerArgs", recording_args)
        result = run()
    (handle,) = handles
    return result, handle


@pytest.fixture(scope="module", params=STACKS)
def stack(request):
    return synth_recording_handle(lambda: synth_stack(request.param))


@pytest.fixture(scope="module")
def enforcing() -> SynthResult:
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(platform.CLOUDS, "local", f"{__name__}:EnforcingLocal")
        return synth_config("enforcing", {"torchfleet:cloud": "local"})


def owner_objects(result: SynthResult) -> list[dict]:
    return [o for o in result.kubernetes_objects() if is_store_owner(o)]


def one(objects: list[dict], kind: str, name: str | None = None) -> dict:
    (found,) = [o for o in objects if o["kind"] == kind and name in (None, o["metadata"]["name"])]
    return found


def training_pv(result: SynthResult) -> dict:
    return result.one(PV, "torchfleet-training-shared-volume").inputs


def depends_on(resource, other) -> bool:
    return any(d.endswith(f"::{other.name}") for d in resource.options["dependencies"])


# ---------------------------------------------------------------- every stack, as its cloud says


def test_job_exists_exactly_when_the_store_does_not_enforce_its_owner(stack):
    result, handle = stack
    jobs = result.of_type(JOB)
    if handle.store.owner_enforced:
        assert jobs == [] and owner_objects(result) == []
    else:
        assert [j.inputs["metadata"]["name"] for j in jobs] == ["store-owner-elastic-job-shared-data"]


def test_job_mounts_the_store_through_a_volume_like_the_training_one(stack):
    result, handle = stack
    if handle.store.owner_enforced:
        pytest.skip("the store enforces its owner: no Job")
    objects = owner_objects(result)
    job = one(objects, "Job")
    pod = job["spec"]["template"]["spec"]
    (volume,) = pod["volumes"]
    claim = one(objects, "PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"])
    pv = one(objects, "PersistentVolume", claim["spec"]["volumeName"])
    assert pv["spec"]["claimRef"] == {"namespace": store_owner.NAMESPACE, "name": claim["metadata"]["name"]}
    assert pv["spec"]["storageClassName"] == claim["spec"]["storageClassName"] == ""
    training = training_pv(result)["spec"]
    # The same store, mounted the same way: source and mount options equal, only the binding
    # (and, where the driver allows one, the handle: test below) differs.
    assert _without_handle({k: v for k, v in pv["spec"].items() if k not in PV_BINDING}) == _without_handle(
        {k: v for k, v in training.items() if k not in PV_BINDING}
    )
    (container,) = pod["containers"]
    assert container["volumeMounts"] == [{"name": volume["name"], "mountPath": store_owner.MOUNT_PATH}]


def _without_handle(spec: dict) -> dict:
    if "csi" not in spec:
        return spec
    return {**spec, "csi": {k: v for k, v in spec["csi"].items() if k != "volumeHandle"}}


# CSI drivers whose volume handle has a fixed form, so a second handle for the same share cannot be
# made: the Filestore driver refuses an id of other than 4 "/"-separated tokens
# (gcp-filestore-csi-driver pkg/csi_driver/utils.go getFileInstanceFromID). Its two PVs rely on the
# store-owner Job running before any job exists (the training claim waits for it).
FIXED_FORM_HANDLES = {"filestore.csi.storage.gke.io"}


def test_no_two_persistent_volumes_share_a_csi_handle(stack):
    """Regression (issue 20, Azure review 7): the training PV and the store-owner PV carried one
    volumeHandle; kubelet stages a CSI volume by its handle, so on one node the two share (and
    unstage) one mount, and AKS asks for a handle unique in the cluster. The class: every CSI
    PersistentVolume a stack renders has its own handle, where the driver can take one."""
    result, _ = stack
    seen: dict[tuple[str, str], str] = {}
    for pv in result.of_type(PV):
        csi = pv.inputs["spec"].get("csi")
        if not csi or csi["driver"] in FIXED_FORM_HANDLES:
            continue
        key = (csi["driver"], csi["volumeHandle"])
        assert key not in seen, f"{pv.name} and {seen[key]} share {key}"
        seen[key] = pv.name


def test_job_gives_the_store_root_to_the_training_uid(stack):
    result, handle = stack
    if handle.store.owner_enforced:
        pytest.skip("the store enforces its owner: no Job")
    (container,) = one(owner_objects(result), "Job")["spec"]["template"]["spec"]["containers"]
    shell, flag, script = container["command"]
    assert (shell, flag) == ("sh", "-c")
    commands = [shlex.split(c) for c in script.split(";")]
    mount = store_owner.MOUNT_PATH
    assert ["chown", f"{TRAINING_UID}:{TRAINING_UID}", mount] in commands
    assert ["chmod", "2775", mount] in commands
    assert not any("-R" in c for c in commands), "ownership of the root only: never recursive"


def test_training_claim_waits_for_the_job(stack):
    result, handle = stack
    (claim,) = [r for r in result.of_type(PVC) if r.inputs["metadata"]["namespace"] != store_owner.NAMESPACE]
    assert depends_on(claim, result.one(PV, "torchfleet-training-shared-volume"))
    if handle.store.owner_enforced:
        return
    job = result.one(JOB)
    assert depends_on(claim, job)
    (owner_claim,) = [r for r in result.of_type(PVC) if r is not claim]
    assert depends_on(job, owner_claim)
    assert depends_on(owner_claim, result.one(PV, "torchfleet-training-store-owner-volume"))
    # Nothing else reaches the store: no control pod mounts the training claim.
    for obj in result.kubernetes_objects():
        if obj["kind"] in ("Deployment", "StatefulSet"):
            volumes = obj["spec"]["template"]["spec"].get("volumes", [])
            assert not [v for v in volumes if "persistentVolumeClaim" in v], obj["metadata"]["name"]


def test_job_runs_as_root_only_as_far_as_baseline_allows(stack):
    result, handle = stack
    if handle.store.owner_enforced:
        pytest.skip("the store enforces its owner: no Job")
    objects = owner_objects(result)
    namespace = one(objects, "Namespace", store_owner.NAMESPACE)
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"
    deny = one(objects, "NetworkPolicy")
    assert deny["spec"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    job = one(objects, "Job")
    spec = job["spec"]
    # Regression (GCP review m6): a TTL deleted the finished Job, so refresh + up recreated it every day.
    assert spec["backoffLimit"] >= 1 and "ttlSecondsAfterFinished" not in spec
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Never" and pod["automountServiceAccountToken"] is False
    assert not {"hostNetwork", "hostPID", "hostIPC"} & set(pod)
    assert all(set(v) == {"name", "persistentVolumeClaim"} for v in pod["volumes"])
    (container,) = pod["containers"]
    security = container["securityContext"]
    assert security["privileged"] is False and security["allowPrivilegeEscalation"] is False
    assert security["readOnlyRootFilesystem"] is True
    assert security["capabilities"]["drop"] == ["ALL"]
    assert set(security["capabilities"]["add"]) <= BASELINE_CAPABILITIES
    assert container["resources"]["requests"] and container["resources"]["limits"]
    assert container["image"] == store_owner.IMAGE
    # The manager pool where the cloud has one, like every control pod.
    assert pod.get("nodeSelector", {}) == handle.manager_selector


def test_etcd_storage_class_is_left_to_the_cluster_unless_the_cloud_names_one(stack):
    result, handle = stack
    (etcd,) = [o for o in result.kubernetes_objects() if o["kind"] == "StatefulSet"]
    (template,) = etcd["spec"]["volumeClaimTemplates"]
    if handle.storage_class is None:
        assert "storageClassName" not in template["spec"]  # "" would turn provisioning off
    else:
        assert template["spec"]["storageClassName"] == handle.storage_class


# ---------------------------------------------------------------- the other branch


def test_a_store_that_enforces_its_owner_gets_no_job(enforcing):
    assert enforcing.of_type(JOB) == []
    assert owner_objects(enforcing) == []
    (claim,) = enforcing.of_type(PVC)
    deps = [d for d in claim.options["dependencies"] if "PersistentVolume::" in d]
    assert [d.rsplit("::", 1)[-1] for d in deps] == ["torchfleet-training-shared-volume"]


def test_etcd_volumes_get_the_cloud_storage_class(enforcing):
    (etcd,) = [o for o in enforcing.kubernetes_objects() if o["kind"] == "StatefulSet"]
    (template,) = etcd["spec"]["volumeClaimTemplates"]
    assert template["spec"]["storageClassName"] == STORAGE_CLASS


def test_owner_objects_are_named_after_the_training_namespace():
    result = synth_config("ns", {"torchfleet:cloud": "local", "torchfleet:training": {"namespace": "ml"}})
    objects = owner_objects(result)
    job = one(objects, "Job")
    assert job["metadata"]["name"] == "store-owner-ml-shared-data"
    assert one(objects, "PersistentVolumeClaim")["metadata"]["name"] == "ml-shared-data"
    assert one(objects, "PersistentVolume")["metadata"]["name"] == f"{store_owner.NAMESPACE}-ml-shared-data"
