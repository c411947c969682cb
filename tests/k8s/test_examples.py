"""k8s/examples/ and k8s/overlays/kind/ follow the contract jobs must keep (labels, taints, zone, shared claim)."""

from __future__ import annotations

import copy
import re

import pytest
import yaml

from components.clouds.local import LOCAL_STORE_PATH
from components.kube import K8S_EXAMPLES, K8S_ROOT, manifests, static, transforms
from components.spec import AKS_SPOT_TAINT, DEFAULT_CLAIM, DEFAULT_NAMESPACE, GPU_TAINT, LABEL_GPU, LABEL_ZONE
from tests.k8s.rendered import load_one

EXAMPLES = K8S_EXAMPLES
KIND_OVERLAY = K8S_ROOT / "overlays" / "kind"
JOB = load_one(EXAMPLES / "imagenet.yaml")
POD = JOB["spec"]["replicaSpecs"]["Worker"]["template"]
JOBS = ["imagenet", "synthetic-cpu"]


def job_and_pod(name: str) -> tuple[dict, dict]:
    job = load_one(EXAMPLES / f"{name}.yaml")
    return job, job["spec"]["replicaSpecs"]["Worker"]["template"]


@pytest.mark.parametrize("name", JOBS)
def test_job_uses_the_layer_etcd_and_exit_code_restarts(name):
    job, _ = job_and_pod(name)
    assert job["metadata"]["name"] == name
    assert job["spec"]["rdzvEndpoint"] == manifests.etcd_endpoint(DEFAULT_NAMESPACE)
    assert job["spec"]["replicaSpecs"]["Worker"]["restartPolicy"] == "ExitCode"
    assert job["metadata"]["namespace"] == DEFAULT_NAMESPACE


@pytest.mark.parametrize("name", JOBS)
def test_pods_name_the_rendezvous_the_etcd_gate_lets_them_use(name):
    # The controller passes --rdzv_id=<the job's name> (no later --rdzv_id in the examples' args); the
    # gate refuses a pod without this annotation everything (elastic_trainer/etcd_gate/resolvers.py).
    job, pod = job_and_pod(name)
    args = pod["spec"]["containers"][0]["args"]
    assert not [a for a in args if a.startswith("--rdzv_id")]
    assert pod["metadata"]["annotations"] == {"torchfleet.io/rdzv-id": job["metadata"]["name"]}


@pytest.mark.parametrize("name", JOBS)
def test_pods_carry_the_labels_the_policies_select(name):
    _, pod = job_and_pod(name)
    assert pod["metadata"]["labels"] == manifests.training_pod_labels(name)


@pytest.mark.parametrize("name", JOBS)
def test_worker_container_is_the_one_the_controller_reads(name):
    _, pod = job_and_pod(name)
    assert [c["name"] for c in pod["spec"]["containers"]] == ["elasticjob-worker"]


LAUNCHER = ["python", "-m", "elastic_trainer.launcher"]


@pytest.mark.parametrize("name", JOBS)
def test_pods_advertise_their_ip_to_the_rendezvous(name):
    # Regression: torch's dynamic rendezvous advertised socket.getfqdn() (the pod hostname),
    # whose DNS record may not exist, or name the replaced pod, for ~30 s after a replacement.
    _, pod = job_and_pod(name)
    (container,) = pod["spec"]["containers"]
    assert {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}} in container["env"]
    args = container["args"]
    script = next(i for i, a in enumerate(args) if a.endswith(".py"))
    assert "--local-addr=$(POD_IP)" in args[:script]  # a launcher option, not the script's
    assert container["command"] == LAUNCHER


@pytest.mark.parametrize("name", JOBS)
def test_examples_teach_etcd_v2_not_the_legacy_backend(name):
    # The controller prepends --rdzv_backend=etcd (keys lost after 2 hours); a later one wins.
    _, pod = job_and_pod(name)
    args = pod["spec"]["containers"][0]["args"]
    script = next(i for i, a in enumerate(args) if a.endswith(".py"))
    assert [a for a in args[:script] if a.startswith("--rdzv_backend")] == ["--rdzv_backend=etcd-v2"]


@pytest.mark.parametrize("name", JOBS)
def test_pods_declare_the_port_the_controller_looks_up(name):
    # The ElasticJob controller finds "elasticjob-port" by name to create each pod's Service.
    _, pod = job_and_pod(name)
    ports = pod["spec"]["containers"][0]["ports"]
    assert [(p["name"], p["containerPort"]) for p in ports] == [("elasticjob-port", 10291)]


@pytest.mark.parametrize("name", JOBS)
def test_pods_do_not_chown_the_store_at_every_start(name):
    _, pod = job_and_pod(name)
    assert pod["spec"]["securityContext"]["fsGroupChangePolicy"] == "OnRootMismatch"


@pytest.mark.parametrize("name", JOBS)
def test_comments_name_the_uid_pods_run_as(name):
    # Regression: imagenet.yaml said "the job runs as uid 1000"; pods run as TRAINING_UID.
    text = (EXAMPLES / f"{name}.yaml").read_text()
    assert not re.search(r"uid 1000\b", text)


def test_pinned_zone_is_a_zone_of_the_aws_example_stack_and_says_so():
    text = (EXAMPLES / "imagenet.yaml").read_text()
    zone = POD["spec"]["nodeSelector"][LABEL_ZONE]
    assert zone == "us-west-2a" and "change it" in text and "Pulumi.aws-usw2.yaml" in text


def test_pods_tolerate_the_gpu_taints_and_stay_in_one_zone():
    tolerations = [{k: t[k] for k in ("key", "value", "effect")} for t in POD["spec"]["tolerations"]]
    assert GPU_TAINT in tolerations and AKS_SPOT_TAINT in tolerations
    assert {LABEL_GPU, LABEL_ZONE} <= set(POD["spec"]["nodeSelector"])


@pytest.mark.parametrize("name", JOBS)
def test_pods_mount_the_shared_claim_and_a_memory_shm(name):
    _, pod = job_and_pod(name)
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    mounts = {m["mountPath"]: m for m in pod["spec"]["containers"][0]["volumeMounts"]}
    # Folders of the claim, never its root writable: a pod that can write the store's root could plant a link at
    # another job's folder path, which the kubelet follows (docs/threat-model.md, boundary 2).
    shared = {path: m for path, m in mounts.items() if m["name"] == "shared"}
    assert volumes["shared"]["persistentVolumeClaim"]["claimName"] == DEFAULT_CLAIM
    assert shared and all(m.get("subPath") and path == f"/mnt/shared/{m['subPath']}" for path, m in shared.items())
    writable = [m["subPath"] for m in shared.values() if not m.get("readOnly")]
    assert writable == [name], writable  # the job's own folder, named as the job
    mounts = {path: m["name"] for path, m in mounts.items()}
    assert volumes[mounts["/dev/shm"]]["emptyDir"]["medium"] == "Memory"


@pytest.mark.parametrize("name", JOBS)
def test_pods_run_as_the_job_account_without_a_token(name):
    _, pod = job_and_pod(name)
    assert pod["spec"]["serviceAccountName"] == "training-job"
    assert pod["spec"]["automountServiceAccountToken"] is False
    assert pod["spec"]["priorityClassName"] == "torchfleet-training"
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True


@pytest.mark.parametrize("name", JOBS)
def test_job_policy_file_is_what_the_builder_makes(name):
    assert load_one(EXAMPLES / f"{name}-networkpolicy.yaml") == manifests.job_network_policy(
        DEFAULT_NAMESPACE, name
    )


def test_cpu_example_asks_for_no_gpu():
    _, pod = job_and_pod("synthetic-cpu")
    resources = pod["spec"]["containers"][0]["resources"]
    assert "nvidia.com/gpu" not in resources.get("limits", {})
    assert "nodeSelector" not in pod["spec"]


def test_hostpath_volume_file_is_what_the_program_makes_for_local():
    source = {"hostPath": {"path": LOCAL_STORE_PATH, "type": "DirectoryOrCreate"}}
    assert load_one(KIND_OVERLAY / "shared-volume-hostpath.yaml") == manifests.persistent_volume(
        DEFAULT_NAMESPACE, DEFAULT_CLAIM, source, "20Gi"
    )


# ---------------------------------------------------------------- the kind overlay


KIND = yaml.safe_load((KIND_OVERLAY / "kustomization.yaml").read_text())


def json_patch(obj: dict, ops: list[dict]) -> dict:
    """The RFC 6902 subset the overlay uses (replace, remove), as kustomize applies it."""
    obj = copy.deepcopy(obj)
    for op in ops:
        *parents, last = op["path"].lstrip("/").split("/")
        node = obj
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        key = int(last) if isinstance(node, list) else last
        if op["op"] == "replace":
            exists = key < len(node) if isinstance(node, list) else key in node
            assert exists, f"replace of a missing {op['path']} (RFC 6902 refuses it, so does kustomize)"
            node[key] = op["value"]
        elif op["op"] == "remove":
            del node[key]
        else:
            raise AssertionError(f"unexpected op {op['op']}")
    return obj


def test_kind_overlay_builds_on_the_layer_and_adds_the_volume():
    assert KIND["resources"] == ["../../base", "shared-volume-hostpath.yaml"]


def test_kind_overlay_makes_etcd_what_the_local_stack_makes():
    (patch,) = KIND["patches"]
    assert patch["target"] == {"kind": "StatefulSet", "name": "etcd"}
    base = static.load("etcd/statefulset.yaml")
    patched = json_patch(base, yaml.safe_load(patch["patch"]))
    local = transforms.apply(
        copy.deepcopy(base),
        transforms.LayerSettings(
            namespace=DEFAULT_NAMESPACE, claim_name=DEFAULT_CLAIM, store_capacity="20Gi", etcd_replicas=1, zoned=False
        ),
    )
    assert patched["spec"]["replicas"] == local["spec"]["replicas"] == 1
    pod, local_pod = patched["spec"]["template"]["spec"], local["spec"]["template"]["spec"]
    assert pod["containers"][0]["args"] == local_pod["containers"][0]["args"]
    assert pod.get("topologySpreadConstraints") == local_pod.get("topologySpreadConstraints")
