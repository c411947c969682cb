"""The controllers the project installs, run for real on Kubernetes 1.35 (operators.py), fed the jobs
`torchfleet submit` renders (its --dry-run output: the same dicts submit sends).

- The 2020 ElasticJob controller (pytorch/elastic v0.2.2, k8s.io/api v0.15), in the training
  namespace, which enforces Pod Security `restricted` (k8s/base/namespace.yaml): every pod it makes
  is refused, and since it writes status only after its pods are made, the job never shows any.
  In a namespace at `baseline` (where pods without a seccomp profile are admitted) it runs, and
  shows what its 2020 types and its exit-code rules do to the project's job.
- Kubeflow's training-operator v1.9.4 with its validating webhook: pods admitted under
  `restricted`, scheduled on the GPU nodes in one zone, and the job's condition after a worker exits
  0, 1, 2, 137 or 143 (kwok ends the pod with that code: kwok_stages.py).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from components.spec import LABEL_JOB, LABEL_ZONE
from tests.controlplane import operators
from tests.controlplane.kwok_stages import EXIT_CODE_ANNOTATION
from tests.controlplane.layer import GPU_STACK, get, kubectl, wait_for

REPO = Path(__file__).resolve().parents[2]
IMAGE = "registry.example.com/torchfleet/train:1.0"  # never pulled: kwok runs no container
WAIT_S = 120  # a deadline for a loaded 2-core machine, never the assertion itself
BASELINE_NAMESPACE = "ej-baseline"


def rendered(name: str, operator: str, namespace: str) -> list[dict]:
    """What `torchfleet submit NAME` would create: a 2-node T4 job on the GPU stack's pools."""
    done = subprocess.run(
        [sys.executable, "-m", "torchfleet", "submit", name, "--dry-run", "--stack", GPU_STACK, "--gpu", "t4",
         "--nodes", "2:2", "--operator", operator, "--image", IMAGE, "-n", namespace,
         "--", "python", "examples/synthetic.py"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def submit(cp, name: str, operator: str, namespace: str) -> dict:
    docs = rendered(name, operator, namespace)
    kubectl(cp, "create", "-n", namespace, "-f", "-", input=yaml.safe_dump_all(docs))
    [job] = [doc for doc in docs if doc["kind"] in {"ElasticJob", "PyTorchJob"}]
    return job


def delete(cp, kind: str, name: str, namespace: str) -> None:
    kubectl(cp, "delete", "-n", namespace, kind, name, "--ignore-not-found", "--wait=false", check=False)
    kubectl(cp, "delete", "-n", namespace, "networkpolicy", f"job-{name}", "--ignore-not-found", check=False)
    # Pods go with their job (owner references, the garbage collector): later tests need the nodes.
    wait_for(f"{name}'s pods gone", lambda: not pods(cp, name, namespace), WAIT_S)


def pods(cp, job: str, namespace: str) -> list[dict]:
    return get(cp, "pods", "-n", namespace, "-l", f"{LABEL_JOB}={job}")["items"]


def running(cp, job: str, namespace: str, count: int) -> list[dict]:
    listed = [p for p in pods(cp, job, namespace) if p["status"].get("phase") == "Running"]
    return listed if len(listed) == count else []


def events(cp, kind: str, name: str, namespace: str) -> list[dict]:
    selector = f"involvedObject.kind={kind},involvedObject.name={name}"
    return get(cp, "events", "-n", namespace, "--field-selector", selector)["items"]


def events_of(cp, kind: str, name: str, namespace: str, reason: str, ending: str = "") -> list[dict]:
    return [e for e in events(cp, kind, name, namespace) if e["reason"] == reason and e["message"].endswith(ending)]


def replaced(cp, job: str, namespace: str, gone: dict) -> list[dict]:
    """The pod that took GONE's place (same name, another uid) once both workers run again."""
    return [
        p
        for p in running(cp, job, namespace, 2)
        if p["metadata"]["name"] == gone["metadata"]["name"] and p["metadata"]["uid"] != gone["metadata"]["uid"]
    ]


def true_conditions(cp, resource: str, name: str, namespace: str) -> dict[str, dict]:
    status = get(cp, resource, name, "-n", namespace).get("status") or {}
    return {c["type"]: c for c in status.get("conditions") or [] if c["status"] == "True"}


def exit_pod(cp, pod: dict, code: int) -> None:
    """The pod's container exits CODE, as the kubelet would report it (kwok's pod-exit stage)."""
    name, namespace = pod["metadata"]["name"], pod["metadata"]["namespace"]
    kubectl(cp, "annotate", "-n", namespace, "pod", name, f"{EXIT_CODE_ANNOTATION}={code}")


def in_one_zone_on_t4_nodes(layer, workers: list[dict]) -> None:
    gpu_nodes = {n["metadata"]["name"]: n for n in layer.gpu_nodes}
    placed = [gpu_nodes[p["spec"]["nodeName"]] for p in workers]
    assert {n["metadata"]["labels"]["torchfleet.io/gpu"] for n in placed} == {"t4"}
    assert len({n["metadata"]["labels"][LABEL_ZONE] for n in placed}) == 1


# ---- the controller's source ---------------------------------------------------------------------------
def test_the_elasticjob_controller_source_is_upstream_v0_2_2_verbatim():
    """modules/elasticjob/upstream is pytorch/elastic's kubernetes/ at v0.2.2, byte for byte."""
    folder = operators.ELASTICJOB_SOURCE
    listed = re.findall(r"^([0-9a-f]{40}) (\S+)$", (folder / "SOURCE.md").read_text(), re.M)
    assert len(listed) == 13
    for blob, name in listed:
        done = subprocess.run(["git", "hash-object", str(folder / name)], capture_output=True, text=True, check=True)
        assert done.stdout.strip() == blob, f"{name} differs from upstream"
    go_files = {str(p.relative_to(folder)) for p in folder.rglob("*.go")}
    assert go_files <= {name for _, name in listed}, "a Go file that is not upstream's"


# ---- the ElasticJob controller as deployed: klog and /tmp --------------------------------------------
def test_elasticjob_controller_exits_2_at_its_first_klog_line_when_tmp_is_read_only(training_layer, tmp_path):
    """Review B2, and why k8s/base/controller/deployment.yaml mounts an emptyDir at /tmp: klog v0.x
    logs to files in os.TempDir() (main.go never calls klog.InitFlags), client-go's leader election
    logs at once, and a file klog cannot create ends the process with exit 2."""
    cp, ns = training_layer.cp, training_layer.namespace
    with operators.elasticjob_controller_as_deployed(cp, tmp_path / "ro", ns, tmp_writable=False) as controller:
        wait_for("the controller's exit", lambda: controller.popen.poll() is not None, WAIT_S)
        assert controller.popen.returncode == 2, controller.tail()
        log = controller.text()
    assert "attempting to acquire leader lease" in log
    assert re.search(
        r"^log: exiting because of error: log: cannot create log: open \S+: read-only file system$", log, re.M
    )

    tmp = tmp_path / "rw" / "tmp"
    with operators.elasticjob_controller_as_deployed(cp, tmp_path / "rw", ns, tmp_writable=True) as controller:
        lease = "successfully acquired lease"
        files = wait_for(
            "klog's file with the lease in TMPDIR",
            lambda: [f for f in tmp.glob("elasticjob-controller.*.log.INFO.*") if lease in f.read_text()],
            WAIT_S,
        )
        assert controller.popen.poll() is None
    assert lease not in controller.text()  # client-go's lines reach the files only, not the pod's log
    assert files


# ---- ElasticJob under restricted -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def elasticjob_controller(control_plane, training_layer, tmp_path_factory):
    with operators.elasticjob_controller(control_plane, tmp_path_factory.mktemp("elasticjob")) as controller:
        yield controller


@pytest.fixture(scope="module")
def refused_job(training_layer, elasticjob_controller):
    """The project's ElasticJob in the project's namespace (Pod Security `restricted`)."""
    cp, ns = training_layer.cp, training_layer.namespace
    job = submit(cp, "ej-restricted", "torchelastic", ns)
    try:
        yield job
    finally:
        delete(cp, "elasticjob", "ej-restricted", ns)


def test_elasticjob_every_worker_pod_is_refused_for_its_dropped_seccomp_profile(training_layer, refused_job):
    """Review B1: k8s.io/api v0.15's PodSecurityContext has no seccompProfile, so the pod the
    controller builds from the template lacks it and `restricted` refuses it. It is the one
    violation: everything else the template sets for `restricted` survives the old types."""
    cp, ns, name = training_layer.cp, training_layer.namespace, refused_job["metadata"]["name"]
    template = refused_job["spec"]["replicaSpecs"]["Worker"]["template"]
    assert template["spec"]["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}

    # Two refusals: the controller retried, so the first was not a race with the namespace's setup.
    def refusals() -> list[dict]:
        found = events_of(cp, "ElasticJob", name, ns, "FailedCreatePod")
        return found if sum(e.get("count") or 1 for e in found) >= 2 else []

    refused = wait_for("the controller's FailedCreatePod events, twice", refusals, WAIT_S)
    for event in refused:
        assert event["type"] == "Warning"
        match = re.fullmatch(
            r'Error creating: pods "(?P<pod>[^"]+)" is forbidden: violates PodSecurity "restricted:[^"]+": (?P<why>.+)',
            event["message"],
        )
        assert match, event["message"]
        assert match["pod"].startswith(f"{name}-worker-")
        assert match["why"] == (
            'seccompProfile (pod or container "elasticjob-worker" must set securityContext.seccompProfile.type '
            'to "RuntimeDefault" or "Localhost")'
        )
    assert pods(cp, name, ns) == []
    # kubeflow/common (the version pytorch/elastic pins) job.go ReconcileJobs returns the pod error
    # before it computes status, so a refused job is never updated: no status, no condition, and
    # the stored spec is the one submitted.
    stored = get(cp, "elasticjob", name, "-n", ns)
    assert "status" not in stored
    assert stored["spec"] == refused_job["spec"]


# ---- ElasticJob under baseline -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def baseline_namespace(training_layer):
    """A namespace at Pod Security `baseline` (no seccomp rule) with what the job's pods mount."""
    cp, ns = training_layer.cp, BASELINE_NAMESPACE
    volume = f"{ns}-shared-data"
    objects = [
        {"apiVersion": "v1", "kind": "Namespace",
         "metadata": {"name": ns, "labels": {"pod-security.kubernetes.io/enforce": "baseline"}}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "training-job", "namespace": ns}},
        {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": volume},
         "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany"], "storageClassName": "",
                  "claimRef": {"namespace": ns, "name": "shared-data"},
                  "hostPath": {"path": "/var/lib/torchfleet-test", "type": "DirectoryOrCreate"}}},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "shared-data", "namespace": ns},
         "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "", "volumeName": volume,
                  "resources": {"requests": {"storage": "1Gi"}}}},
    ]  # fmt: skip
    kubectl(cp, "apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(objects))
    try:
        yield ns
    finally:
        kubectl(cp, "delete", "namespace", ns, "--wait=false", check=False)
        kubectl(cp, "delete", "persistentvolume", volume, "--wait=false", check=False)


def test_elasticjob_controller_update_rewrites_the_job_through_its_2020_types(
    training_layer, elasticjob_controller, baseline_namespace
):
    """Where its pods are admitted the controller writes status with a full-object Update of its
    typed ElasticJob (pytorch/elastic controllers/job.go): the stored template loses what
    k8s.io/api v0.15 lacks, and the spec keeps only ElasticJobSpec's keys. Its run policy's JSON key
    is `RunPolicy` (review M1): the policy the CLI asks for must be stored there, or the controller
    used its default, None, and never deletes a finished job's running or Pending pods."""
    cp, ns = training_layer.cp, baseline_namespace
    job = submit(cp, "ej-update", "torchelastic", ns)
    try:
        stored = wait_for(
            "the controller's Update (status conditions)",
            lambda: (j := get(cp, "elasticjob", "ej-update", "-n", ns)).get("status", {}).get("conditions") and j,
            WAIT_S,
        )
        submitted = job["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["securityContext"]
        kept = stored["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["securityContext"]
        assert {"seccompProfile", "fsGroupChangePolicy"} <= submitted.keys()
        assert kept == {k: v for k, v in submitted.items() if k not in {"seccompProfile", "fsGroupChangePolicy"}}
        assert "cleanPodPolicy" not in stored["spec"]
        assert stored["spec"].get("RunPolicy", {}).get("cleanPodPolicy") == "Running"
    finally:
        delete(cp, "elasticjob", "ej-update", ns)


# What the ElasticJob controller does with restartPolicy ExitCode (kubeflow/common 0b3a4c3 pod.go:
# only 130/137/138/143 are retryable; pytorch/elastic controllers/job.go: failures set Restarting,
# then Running replaces it in the same pass; Succeeded needs every one of `replicas` pods).
ELASTICJOB_OUTCOMES = {0: "Running", 1: "Running", 2: "Running", 137: "replaced", 143: "replaced"}


@pytest.mark.parametrize("code", sorted(ELASTICJOB_OUTCOMES))
def test_elasticjob_exit_codes_never_fail_or_finish_a_job_below_max(
    training_layer, elasticjob_controller, baseline_namespace, code
):
    """Review M2: with the project's ExitCode policy an exit 1 or 2 never fails the job, and one
    worker's exit 0 does not finish it (the second one's does); 137 and 143 recreate the pod."""
    cp, ns, name = training_layer.cp, baseline_namespace, f"ej-exit-{code}"
    submit(cp, name, "torchelastic", ns)
    try:
        workers = wait_for(f"{name}'s 2 workers running", lambda: running(cp, name, ns, 2), WAIT_S)
        in_one_zone_on_t4_nodes(training_layer, workers)
        exiting = sorted(workers, key=lambda p: p["metadata"]["name"])[0]
        exit_pod(cp, exiting, code)
        seen = f"{exiting['metadata']['name']} exited with code {code}"
        wait_for(seen, lambda: events_of(cp, "ElasticJob", name, ns, "ExitedWithCode", seen), WAIT_S)
        if ELASTICJOB_OUTCOMES[code] == "replaced":
            wait_for("the replacement worker running", lambda: replaced(cp, name, ns, exiting), WAIT_S)
            return
        # The status the controller wrote once it counted the exit: still Running, nothing more.
        counted = "succeeded" if code == 0 else "failed"

        def counted_status() -> dict:
            status = get(cp, "elasticjob", name, "-n", ns).get("status") or {}
            return status if status.get("replicaStatuses", {}).get("Worker", {}).get(counted) else {}

        status = wait_for(f"the {counted} worker counted in the job's status", counted_status, WAIT_S)
        assert {c["type"] for c in status["conditions"] if c["status"] == "True"} == {"Running"}
        if code != 0:
            assert events_of(cp, "ElasticJob", name, ns, "ElasticJobRestarting")
            # The failed pod is kept, not replaced: its index never runs again.
            same_name = [p for p in pods(cp, name, ns) if p["metadata"]["name"] == exiting["metadata"]["name"]]
            assert [p["metadata"]["uid"] for p in same_name] == [exiting["metadata"]["uid"]]
            return
        # Succeeded takes every one of the `replicas` (MAX) pods.
        exit_pod(cp, sorted(workers, key=lambda p: p["metadata"]["name"])[1], 0)
        wait_for(f"{name} Succeeded", lambda: "Succeeded" in true_conditions(cp, "elasticjob", name, ns), WAIT_S)
    finally:
        delete(cp, "elasticjob", name, ns)


# ---- PyTorchJob under restricted -----------------------------------------------------------------------
def test_pytorchjob_webhook_validates_what_is_submitted(training_layer, training_operator):
    """The operator's own validation runs at admission (webhook on, failurePolicy Fail)."""
    cp, ns = training_layer.cp, training_layer.namespace
    [job] = [d for d in rendered("pt-no-pytorch", "kubeflow", ns) if d["kind"] == "PyTorchJob"]
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["name"] = "trainer"
    out = kubectl(cp, "create", "-n", ns, "-f", "-", input=yaml.safe_dump(job), check=False)
    assert 'admission webhook "validator.pytorchjob.training-operator.kubeflow.org" denied the request' in out
    assert "must have at least one container with name pytorch" in out


# What training-operator v1.9.4 does with restartPolicy ExitCode (pkg/controller.v1/common/pod.go:
# IsRetryableExitCode is >= 128; pytorchjob_controller.go: with an elasticPolicy, one succeeded worker
# completes the job), and so what the README promises for `--operator kubeflow`.
PYTORCHJOB_OUTCOMES = {0: "Succeeded", 1: "Failed", 2: "Failed", 137: "Restarting", 143: "Restarting"}


@pytest.mark.parametrize("code", sorted(PYTORCHJOB_OUTCOMES))
def test_pytorchjob_pods_run_in_one_zone_and_the_exit_code_decides(training_layer, training_operator, code):
    cp, ns, name = training_layer.cp, training_layer.namespace, f"pt-exit-{code}"
    submit(cp, name, "kubeflow", ns)
    try:
        workers = wait_for(f"{name}'s 2 workers running", lambda: running(cp, name, ns, 2), WAIT_S)
        in_one_zone_on_t4_nodes(training_layer, workers)
        refused = [e for e in events(cp, "PyTorchJob", name, ns) if "PodSecurity" in e["message"]]
        assert refused == []

        exiting, other = sorted(workers, key=lambda p: p["metadata"]["name"])
        exit_pod(cp, exiting, code)
        outcome = PYTORCHJOB_OUTCOMES[code]
        if outcome == "Restarting":
            # The failed pod is deleted and made anew under the same name; the job goes on. Its
            # Restarting condition lasts one pass (Running replaces it: pkg/util/status.go
            # filterOutCondition), the event stays.
            wait_for(f"{name}'s event", lambda: events_of(cp, "PyTorchJob", name, ns, "PyTorchJobRestarting"), WAIT_S)
            wait_for("the replacement worker running", lambda: replaced(cp, name, ns, exiting), WAIT_S)
            wait_for(f"{name} Running again", lambda: "Running" in true_conditions(cp, "pytorchjob", name, ns), WAIT_S)
            assert "Failed" not in true_conditions(cp, "pytorchjob", name, ns)
            return
        conditions = wait_for(
            f"{name} {outcome}", lambda: outcome in (c := true_conditions(cp, "pytorchjob", name, ns)) and c, WAIT_S
        )
        reached = conditions[outcome]
        assert reached["reason"] == f"PyTorchJob{outcome}"
        # cleanPodPolicy Running: the worker still running goes, the one that exited stays (for logs).
        wait_for(
            f"{other['metadata']['name']} deleted",
            lambda: {p["metadata"]["name"] for p in pods(cp, name, ns)} == {exiting["metadata"]["name"]},
            WAIT_S,
        )
    finally:
        delete(cp, "pytorchjob", name, ns)
