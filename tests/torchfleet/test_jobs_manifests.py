"""The job manifests for every operator over a table of flag combinations, validated against the
CRD schemas (ours for ElasticJob, the v1.9 PyTorchJob schema) and, for the core objects (the `job`
operator's Indexed Job, every pod template, network policy), with kubernetes-validate against 1.30
and the newest schema."""

from dataclasses import replace
from pathlib import Path

import kubernetes_validate
import pytest

from components import spec as platform
from torchfleet.jobs import manifests, pod_template, schema
from torchfleet.jobs import target as targets
from torchfleet.jobs.spec import build_request

K8S_VERSIONS = ["1.30.0", "1.37.0"]
TEST_STACKS = Path(__file__).parent / "data" / "stacks"

# (id, target factory, flags)
CASES = [
    ("aws-stack-t4-auto-zone", lambda: targets.from_stack("aws-usw2"),
     dict(gpu="t4", nodes="2:8", gpus_per_node=1)),
    ("aws-stack-a10g-zone", lambda: targets.from_stack("aws-usw2"),
     dict(gpu="a10g", nodes="1:2", gpus_per_node=1, zone="us-west-2a", env=["NCCL_DEBUG=INFO", "SEED=3"])),
    ("gcp-stack-l4", lambda: targets.from_stack("gcp-usc1"),
     dict(gpu="l4", nodes="4", gpus_per_node=1, zone="us-central1-a")),
    ("azure-stack-t4", lambda: targets.from_stack("azure-eus"),
     dict(gpu="t4", nodes="1:8", gpus_per_node=1, mount="/data/shared", zone="2")),
    ("defaults-aws-4gpu-machine", lambda: targets.defaults("aws"),
     dict(gpu="t4", nodes="2:4", gpus_per_node=4)),
    ("stack-4gpu-pool-half-node", lambda: targets.from_stack("kubeflow-4gpu", TEST_STACKS),
     dict(gpu="t4", nodes="1:3", gpus_per_node=2)),
    ("defaults-gcp-module", lambda: targets.defaults("gcp"),
     dict(gpu="a100-40gb", nodes="1:3", gpus_per_node=1, command=["python", "-m", "team.train", "--epochs=3"])),
    ("defaults-shell-command", lambda: targets.defaults("azure"),
     dict(gpu="t4", nodes="1:1", gpus_per_node=1, command=["bash", "run.sh"])),
    ("sweep-member", lambda: targets.defaults("aws"),
     dict(gpu="t4", nodes="1:2", gpus_per_node=1, overrides=("lr=0.1", "batch=64"), sweep="s", name="s-0")),
    ("egress", lambda: targets.defaults("aws"),
     dict(gpu="t4", nodes="1:2", gpus_per_node=1, allow_egress=["0.0.0.0/0", "2600:1f00::/24"], sweep="s")),
]
# CPU jobs (--cpu): no GPU anywhere in the pod.
CPU_CASES = [
    ("local-stack-cpu", lambda: targets.from_stack("local"), dict(cpu=True, gpu=None, nodes="1:2", gpus_per_node=None)),
    ("local-stack-cpu-sized", lambda: targets.from_stack("local"),
     dict(cpu=True, gpu=None, nodes="2", gpus_per_node=None, cpus="500m", memory="768Mi",
          allow_egress=["10.96.0.0/12"])),
    ("aws-stack-cpu-zone", lambda: targets.from_stack("aws-usw2"),
     dict(cpu=True, gpu=None, nodes="1:3", gpus_per_node=None, cpus="1500m", memory="4Gi", zone="us-west-2a")),
    ("defaults-cpu", lambda: targets.defaults("gcp"), dict(cpu=True, gpu=None, nodes="1", gpus_per_node=None)),
]


def _build(case, operator):
    _, make_target, flags = case
    t = replace(make_target(), operator=operator)
    flags = dict(flags)
    req = build_request(
        t, name=flags.pop("name", "resnet"), image="registry.example.com/team/train:1.4.2",
        command=flags.pop("command", ["python", "train.py", "--lr", "0.1"]), **flags,
    )
    return req, t, manifests.build(req, t)


def _pod(job):
    template = manifests.worker_spec(job)["template"]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", **template["metadata"]},
            "spec": template["spec"]}


@pytest.mark.parametrize("operator", platform.OPERATORS)
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_job_passes_its_crd_schema_and_core_schemas(case, operator):
    req, t, job = _build(case, operator)
    if operator == "job":  # batch/v1: the API server's own schema
        assert manifests.is_indexed_job(job)
    else:
        assert schema.problems(job) == []
    pod = _pod(job)
    policies = manifests.network_policies(req, t)
    assert len(policies) == (2 if req.egress else 1)
    for version in K8S_VERSIONS:
        if operator == "job":
            kubernetes_validate.validate(job, version, strict=True)
        kubernetes_validate.validate(pod, version, strict=True)
        for policy in policies:
            kubernetes_validate.validate(policy, version, strict=True)


@pytest.mark.parametrize("operator", platform.OPERATORS)
@pytest.mark.parametrize("case", CPU_CASES, ids=[c[0] for c in CPU_CASES])
def test_cpu_job_passes_the_schemas_and_asks_for_no_gpu(case, operator):
    test_job_passes_its_crd_schema_and_core_schemas(case, operator)
    req, t, job = _build(case, operator)
    pod = manifests.worker_spec(job)["template"]
    spec = pod["spec"]
    (container,) = spec["containers"]
    assert req.cpu and req.nproc_per_node == 1
    # No GPU or spot taint; on a cloud the CPU pool's, exactly (never a manager pool's: issue 30).
    cpu_pool = [] if t.cloud == "local" else [{**platform.CPU_TAINT, "operator": "Equal"}]
    assert spec["tolerations"][:len(cpu_pool)] == cpu_pool
    assert [x["key"] for x in spec["tolerations"][len(cpu_pool):]] == list(pod_template.NODE_LOSS_TAINTS)
    assert platform.LABEL_GPU not in spec.get("nodeSelector", {})
    pool = {} if t.cloud == "local" else {platform.LABEL_POOL: platform.CPU_POOL_NAME}
    assert platform.LABEL_GPU not in job["metadata"]["labels"]
    for kind in ("requests", "limits"):
        assert platform.GPU_RESOURCE not in container["resources"][kind]
    assert container["resources"]["requests"]["cpu"] == f"{req.sizing.cpu_millis}m"
    assert container["resources"]["limits"]["memory"] == f"{req.sizing.memory_mib}Mi"
    assert container["args"][:2] == ["--nproc_per_node=1", pod_template.LOCAL_ADDR_ARG]
    if req.zone:
        assert spec["nodeSelector"] == {**pool, platform.LABEL_ZONE: req.zone}
    else:
        assert spec.get("nodeSelector", {}) == pool
    # kind/minikube nodes have no zone label: a required zone affinity would keep pods Pending.
    assert ("affinity" in spec) == (t.cloud != "local" and not req.zone)
    if operator == "kubeflow":
        assert job["spec"]["nprocPerNode"] == "1"


def test_cpu_sizes_from_the_flags():
    t = targets.from_stack("local")
    req = build_request(t, name="a", gpu=None, cpu=True, nodes="1", gpus_per_node=None, image="r/t:1",
                        command=["t.py"], cpus="2.5", memory="6Gi")
    assert (req.sizing.cpu_millis, req.sizing.memory_mib, req.sizing.shm_mib) == (2500, 6144, 1536)
    assert req.sizing.loader_workers == 1 and req.sizing.machine == "cpu"


@pytest.mark.parametrize("operator", platform.OPERATORS)
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_job_carries_the_platform_contract(case, operator):
    req, t, job = _build(case, operator)
    pod = manifests.worker_spec(job)["template"]
    spec = pod["spec"]
    (container,) = spec["containers"]
    # Every pod carries role and job: the namespace's network policies admit traffic by them.
    assert pod["metadata"]["labels"][platform.LABEL_ROLE] == "training"
    assert pod["metadata"]["labels"][platform.LABEL_JOB] == req.name
    assert spec["nodeSelector"][platform.LABEL_GPU] == req.gpu
    tolerated = {(x["key"], x.get("value"), x["effect"]) for x in spec["tolerations"]}
    for taint in (platform.GPU_TAINT, platform.AKS_SPOT_TAINT):
        assert (taint["key"], taint["value"], taint["effect"]) in tolerated
    if req.zone:
        assert spec["nodeSelector"][platform.LABEL_ZONE] == req.zone
        assert "affinity" not in spec
    else:
        term = spec["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
        assert term == {"labelSelector": {"matchLabels": {platform.LABEL_JOB: req.name}},
                        "topologyKey": platform.LABEL_ZONE}
    assert container["name"] == {"job": "worker", "torchelastic": "elasticjob-worker", "kubeflow": "pytorch"}[operator]
    assert container["command"] == ["python", "-m", "elastic_trainer.launcher"]
    assert container["args"][0] == f"--nproc_per_node={req.gpus_per_node}"
    # Regression (multi-node rendezvous): torch advertised socket.getfqdn(), the pod's hostname,
    # which may not resolve (or name the replaced pod) for ~30 s; the pod IP always routes. Before
    # the script: the ElasticJob controller prepends its own args, and script args follow it.
    assert container["args"][1] == "--local-addr=$(POD_IP)"
    script_at = container["args"].index(req.command[0], 2)
    assert container["args"][script_at:] == list(req.command)
    assert container["env"][0] == {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
    # The ports each controller looks up by name (ElasticJob: a Service per pod from it); no controller, no port.
    port = {"torchelastic": [("elasticjob-port", 10291)], "kubeflow": [("pytorchjob-port", 23456)], "job": []}[operator]
    assert [(p["name"], p["containerPort"]) for p in container.get("ports", [])] == port
    assert spec["securityContext"]["fsGroupChangePolicy"] == "OnRootMismatch"
    assert container["resources"]["requests"][platform.GPU_RESOURCE] == str(req.gpus_per_node)
    assert container["resources"]["limits"][platform.GPU_RESOURCE] == str(req.gpus_per_node)
    assert spec["terminationGracePeriodSeconds"] == t.grace_s
    assert spec["serviceAccountName"] == "training-job" and spec["automountServiceAccountToken"] is False
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    # Only the job's own folder of the store, where the whole store put it (issue 30: per-job isolation).
    assert volumes[mounts[f"{req.mount}/{req.name}"]]["persistentVolumeClaim"]["claimName"] == t.claim
    [shared] = [m for m in container["volumeMounts"] if m["name"] == mounts[f"{req.mount}/{req.name}"]]
    assert shared["subPath"] == req.name and "subPathExpr" not in shared and req.mount not in mounts
    assert volumes[mounts["/dev/shm"]]["emptyDir"]["medium"] == "Memory"
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["TORCHFLEET_CHECKPOINT_DIR"] == f"{req.mount}/{req.name}/checkpoints"
    assert env["TORCHFLEET_OUTPUT_DIR"] == f"{req.mount}/{req.name}/output"
    assert int(env["TORCHFLEET_DATALOADER_WORKERS"]) >= 1
    if req.overrides:
        assert container["args"][-len(req.overrides):] == list(req.overrides)


@pytest.mark.parametrize("operator", platform.OPERATORS)
@pytest.mark.parametrize("case", [*CASES, *CPU_CASES], ids=[c[0] for c in [*CASES, *CPU_CASES]])
def test_pods_on_a_lost_node_are_replaced_after_30_s_not_300(case, operator):
    # Regression (issue 19): training pods took DefaultTolerationSeconds' 300 s on an unreachable node.
    _, _, job = _build(case, operator)
    spec = manifests.worker_spec(job)["template"]["spec"]
    loss = {x["key"]: x for x in spec["tolerations"] if x.get("effect") == "NoExecute"}
    assert set(loss) == {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}
    for toleration in loss.values():
        assert toleration["operator"] == "Exists" and toleration["tolerationSeconds"] == 30


@pytest.mark.parametrize("operator", platform.OPERATORS)
def test_only_a_batch_job_sets_the_pods_restart_policy(operator):
    # Regression (issue 19): `restartPolicy: Never` in an ElasticJob's or PyTorchJob's template made the
    # controller record a Warning event for every pod it created (kubeflow/common pod.go); they set it
    # from the replica spec's ExitCode. A Job with a pod failure policy requires Never.
    _, _, job = _build(CASES[0], operator)
    spec = manifests.worker_spec(job)["template"]["spec"]
    assert spec.get("restartPolicy") == ("Never" if operator == "job" else None)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_elastic_job_fields(case):
    req, t, job = _build(case, "torchelastic")
    assert job["apiVersion"] == "elastic.pytorch.org/v1alpha1" and job["kind"] == "ElasticJob"
    assert job["spec"]["rdzvEndpoint"] == t.etcd_endpoint
    assert (job["spec"]["minReplicas"], job["spec"]["maxReplicas"]) == (req.min_nodes, req.max_nodes)
    worker = job["spec"]["replicaSpecs"]["Worker"]
    assert worker["replicas"] == req.max_nodes and worker["restartPolicy"] == "ExitCode"
    # Regression (issue 19): the controller reads RunPolicy under the key `RunPolicy` (a named Go field
    # tagged ",inline"); a spec-level cleanPodPolicy was ignored, and erased by its next Update.
    assert job["spec"]["RunPolicy"] == {"cleanPodPolicy": "Running"} and "cleanPodPolicy" not in job["spec"]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_pytorch_job_fields(case):
    req, t, job = _build(case, "kubeflow")
    assert job["apiVersion"] == "kubeflow.org/v1" and job["kind"] == "PyTorchJob"
    policy = job["spec"]["elasticPolicy"]
    assert policy == {"rdzvBackend": "etcd-v2", "rdzvHost": t.etcd_host, "rdzvPort": 2379, "rdzvId": req.rdzv_id,
                      "minReplicas": req.min_nodes, "maxReplicas": req.max_nodes}
    assert job["spec"]["nprocPerNode"] == str(req.gpus_per_node)
    assert set(job["spec"]["pytorchReplicaSpecs"]) == {"Worker"}  # elastic: workers only, no Master


def test_default_etcd_endpoint_matches_the_training_layer_service():
    # Jobs reach the rendezvous through the etcd gate (issue 30): k8s/base/etcd-gate/service.yaml, in the
    # job namespace.
    import yaml

    from components.kube import K8S_BASE

    service = yaml.safe_load((K8S_BASE / "etcd-gate" / "service.yaml").read_text())
    port = service["spec"]["ports"][0]["port"]
    assert targets.defaults().etcd_endpoint == f"{service['metadata']['name']}.elastic-job.svc:{port}"


def test_service_account_exists_in_the_training_layer():
    import yaml

    from components.kube import K8S_BASE

    accounts = [yaml.safe_load(p.read_text()) for p in K8S_BASE.rglob("*.yaml")
                if "kind: ServiceAccount" in p.read_text()]
    assert pod_template.SERVICE_ACCOUNT in {a["metadata"]["name"] for a in accounts}


def test_sizing_follows_the_machine_and_the_share_of_its_gpus():
    t = targets.from_stack("kubeflow-4gpu", TEST_STACKS)
    whole = build_request(t, name="a", gpu="t4", nodes="1", gpus_per_node=4, image="r/t:1", command=["t.py"])
    half = build_request(t, name="a", gpu="t4", nodes="1", gpus_per_node=2, image="r/t:1", command=["t.py"])
    assert whole.sizing.machine == half.sizing.machine == "g4dn.12xlarge"
    # 48 vCPU / 192 GiB: most of the machine, never all of it (kubelet, daemonsets).
    assert 40_000 <= whole.sizing.cpu_millis < 48_000
    assert 160 * 1024 <= whole.sizing.memory_mib < 192 * 1024
    assert half.sizing.cpu_millis == pytest.approx(whole.sizing.cpu_millis / 2, abs=100)
    # About one core per GPU for its training process, the rest for its data loaders.
    assert whole.sizing.loader_workers == whole.sizing.cpu_millis // 1000 // 4 - 1
    assert whole.sizing.shm_mib <= whole.sizing.memory_mib // 4


def test_small_machine_still_gets_one_loader_and_fits_its_requests():
    t = targets.defaults("aws")
    req = build_request(t, name="a", gpu="t4", nodes="1", gpus_per_node=1, image="r/t:1", command=["t.py"])
    assert req.sizing.machine == "g4dn.xlarge"  # 4 vCPU, 16 GiB
    assert req.sizing.loader_workers >= 1
    assert req.sizing.cpu_millis <= 4000 - 400 and req.sizing.memory_mib <= 16 * 1024 - 2048


def test_priority_class_exists_in_the_training_layer():
    import yaml

    from components.kube import K8S_BASE
    from components.kube.static import kustomization_files

    files = [K8S_BASE / f for f in kustomization_files()]
    classes = [yaml.safe_load(f.read_text()) for f in files if "kind: PriorityClass" in f.read_text()]
    names = {c["metadata"]["name"]: c for c in classes}
    assert pod_template.PRIORITY_CLASS in names
    # A queued job must wait for the autoscaler, not evict another job's workers.
    assert names[pod_template.PRIORITY_CLASS]["preemptionPolicy"] == "Never"
