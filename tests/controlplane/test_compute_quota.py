"""The training namespace's LimitRange and ResourceQuota (components/kube/compute_quota.py, training.quota) on the
real API server, as the researcher alice: a container that asks for nothing is given the defaults, a pod past a
cap is refused naming the quota, and the CLI's own pods are still admitted under it.

Sent with server-side dry-run, which runs the LimitRanger and ResourceQuota admission plugins (a dry run is
checked against the quota's usage and counts nothing).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import subprocess
import sys

import yaml
from kubernetes.utils import parse_quantity

from components.kube import compute_quota
from components.spec.model import (
    QUOTA_DEFAULT_CPU_MILLIS,
    QUOTA_DEFAULT_MEMORY_MIB,
    QUOTA_MIN_CPU_MILLIS,
    QUOTA_MIN_MEMORY_MIB,
    QuotaSpec,
)
from tests.controlplane.kwok_stages import EXIT_CODE_ANNOTATION
from tests.controlplane.layer import GPU_STACK, get, kubectl, wait_for
from tests.controlplane.test_operators import IMAGE, REPO, rendered
from tests.controlplane.test_researcher import as_researcher, reader, researcher_kubectl

# Each object count the quota holds besides the job kinds' (compute_quota.py), and the kind kubectl names it by.
COUNTED = {"services": "service", "configmaps": "configmap", "count/deployments.apps": "deployment",
           "count/networkpolicies.networking.k8s.io": "networkpolicy"}
# The count of each kind the CLI makes (the job kinds' for a Job).
KEY = {"Job": "count/jobs.batch", "ConfigMap": "configmaps", "Service": "services",
       "Deployment": "count/deployments.apps", "NetworkPolicy": "count/networkpolicies.networking.k8s.io"}
HEADROOM = 2  # objects of each kind admitted under the small counts; the next is refused


def _dry_run(layer, kubeconfig, document: dict) -> tuple[int, str]:
    return researcher_kubectl(layer, kubeconfig, "create", "--dry-run=server", "-o", "json", "-f", "-",
                              input=json.dumps(document))  # fmt: skip


def test_the_layer_made_them(training_layer):
    layer = training_layer
    quota = get(layer.cp, "resourcequota", compute_quota.RESOURCE_QUOTA, "-n", layer.namespace)
    # The local stack runs the `job` operator: batch Jobs are its only job kind counted (compute_quota.py).
    hard = {"requests.cpu", "requests.memory", "requests.nvidia.com/gpu", "pods", "count/pods",
            compute_quota.BATCH_JOBS, *COUNTED}
    assert set(quota["spec"]["hard"]) == hard

    def used():
        status = get(layer.cp, "resourcequota", compute_quota.RESOURCE_QUOTA, "-n", layer.namespace).get("status", {})
        return status.get("used") if "pods" in status.get("used", {}) else None

    # Every count is of a kind the API server always serves, so the quota controller reports its usage at once
    # and never refuses with "status unknown for quota".
    assert set(wait_for("the quota's usage", used)) == hard
    assert get(layer.cp, "limitrange", compute_quota.LIMIT_RANGE, "-n", layer.namespace)


def test_a_container_that_asks_for_nothing_gets_the_defaults(training_layer, researcher):
    pod = reader(training_layer)
    for container in pod["spec"]["containers"]:
        container.pop("resources", None)
    code, out = _dry_run(training_layer, researcher, pod)
    assert code == 0, out
    (container,) = json.loads(out)["spec"]["containers"]
    assert container["resources"]["requests"] == {"cpu": f"{QUOTA_DEFAULT_CPU_MILLIS}m",
                                                  "memory": f"{QUOTA_DEFAULT_MEMORY_MIB}Mi"}, container
    assert "limits" not in container["resources"], container  # no default limit (compute_quota.py says why)


def test_a_pod_past_a_cap_is_refused_naming_the_quota(training_layer, researcher):
    layer = training_layer
    hard = get(layer.cp, "resourcequota", compute_quota.RESOURCE_QUOTA, "-n", layer.namespace)["spec"]["hard"]
    # One more than the cap, in the quota's own units (the API server writes 8192Gi back as 8Ti).
    for resource, value in (("cpu", str(parse_quantity(hard["requests.cpu"]) + 1)),
                            ("memory", str(int(parse_quantity(hard["requests.memory"])) + 1))):
        pod = copy.deepcopy(reader(layer))
        pod["spec"]["containers"][0]["resources"] = {"requests": {resource: value}, "limits": {resource: value}}
        code, out = _dry_run(layer, researcher, pod)
        assert code != 0 and "exceeded quota: torchfleet-compute" in out and f"requests.{resource}" in out, out
    gpus = str(int(parse_quantity(hard["requests.nvidia.com/gpu"])) + 1)
    pod = copy.deepcopy(reader(layer))
    pod["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = gpus
    pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = gpus
    code, out = _dry_run(layer, researcher, pod)
    assert code != 0 and "exceeded quota: torchfleet-compute" in out and "requests.nvidia.com/gpu" in out, out


def test_a_container_asking_for_zero_is_refused_and_the_clis_pods_fit(training_layer, researcher):
    """A review's finding: `requests: {cpu: "0", memory: "0"}` was admitted, the pod BestEffort and counted as
    nothing by the quota. The LimitRange's min refuses it (compute_quota.py); the CLI's pods still fit."""
    layer = training_layer
    limits = get(layer.cp, "limitrange", compute_quota.LIMIT_RANGE, "-n", layer.namespace)["spec"]["limits"]
    assert limits[0]["min"] == {"cpu": f"{QUOTA_MIN_CPU_MILLIS}m", "memory": f"{QUOTA_MIN_MEMORY_MIB}Mi"}
    for requests in ({"cpu": "0", "memory": "0"}, {"cpu": "0"}, {"memory": "0"},
                     {"cpu": f"{QUOTA_MIN_CPU_MILLIS - 1}m"}):  # fmt: skip
        pod = copy.deepcopy(reader(layer))
        pod["spec"]["containers"][0]["resources"] = {"requests": requests}
        code, out = _dry_run(layer, researcher, pod)
        assert code != 0 and "minimum" in out and "usage per Container" in out, (requests, out)
    # The CLI's reader and a training pod of its Job (made here as an administrator: the researcher limits keep
    # training-labelled pods to the Job controller), and a container at the min, are admitted.
    [job] = [d for d in rendered("quota-fit", "job", layer.namespace) if d["kind"] == "Job"]
    trainer = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "quota-fit-0", **{
        k: v for k, v in job["spec"]["template"]["metadata"].items() if k in ("labels", "annotations")}},
        "spec": job["spec"]["template"]["spec"]}
    out = kubectl(layer.cp, "create", "--dry-run=server", "-n", layer.namespace, "-o", "json", "-f", "-",
                  input=json.dumps(trainer))  # fmt: skip
    assert json.loads(out)["metadata"]["name"] == "quota-fit-0", out
    at_min = copy.deepcopy(reader(layer))
    at_min["spec"]["containers"][0]["resources"] = {"requests": {"cpu": f"{QUOTA_MIN_CPU_MILLIS}m",
                                                                 "memory": f"{QUOTA_MIN_MEMORY_MIB}Mi"}}
    for pod in (reader(layer), at_min):
        code, out = _dry_run(layer, researcher, pod)
        assert code == 0, out


def _rendered_in_place(layer, name: str, workdir) -> list[dict]:
    """What `torchfleet submit NAME --recovery inplace --workdir DIR` creates: a ConfigMap, the Job, two
    NetworkPolicies, the Lighthouse's Service and Deployment. The Job suspended and the Deployment at 0 replicas:
    the idle objects that cost no pod, which only an object count bounds."""
    done = subprocess.run(
        [sys.executable, "-m", "torchfleet", "submit", name, "--dry-run", "--stack", GPU_STACK, "--gpu", "t4",
         "--nodes", "1", "--recovery", "inplace", "--workdir", str(workdir), "--image", IMAGE, "-n", layer.namespace,
         "--", "python", "train.py"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    documents = [d for d in yaml.safe_load_all(done.stdout) if d]
    for document in documents:
        if document["kind"] == "Job":
            document["spec"]["suspend"] = True
        if document["kind"] == "Deployment":
            document["spec"]["replicas"] = 0
    return documents


def _counted(layer) -> dict[str, int]:
    """The quota's usage of each object count, once the quota controller has caught up with what is listed."""
    names = {**COUNTED, "count/jobs.batch": "job"}

    def settled():
        quota = get(layer.cp, "resourcequota", compute_quota.RESOURCE_QUOTA, "-n", layer.namespace)
        used = quota.get("status", {}).get("used", {})
        listed = {key: len(get(layer.cp, kind, "-n", layer.namespace)["items"]) for key, kind in names.items()}
        return listed if all(int(used.get(key, -1)) == n for key, n in listed.items()) else None

    return wait_for("the quota's usage to match the namespace's objects", settled)


def _names(layer, kind: str) -> set[str]:
    return {o["metadata"]["name"] for o in get(layer.cp, kind, "-n", layer.namespace)["items"]}


def test_past_each_object_count_the_researchers_object_is_refused(training_layer, researcher, capsys, tmp_path):
    """A review's finding: as a researcher, 1 MiB ConfigMaps, ClusterIP Services and suspended Jobs were created
    without limit (no pod, no CPU: the compute quota never saw them). Under small counts (the namespace's objects
    now and two more of each kind), the researcher's first two of each kind are created and the third is refused by
    torchfleet-compute, naming the count; the namespace's quota is then put back as the layer made it."""
    layer = training_layer
    (tmp_path / "train.py").write_text("print('hi')\n")
    documents = [d for name in ("qc-a", "qc-b", "qc-c") for d in _rendered_in_place(layer, name, tmp_path)]
    original = get(layer.cp, "resourcequota", compute_quota.RESOURCE_QUOTA, "-n", layer.namespace)
    used = _counted(layer)
    small = dataclasses.replace(
        QuotaSpec(), jobs=used["count/jobs.batch"] + HEADROOM, services=used["services"] + HEADROOM,
        config_maps=used["configmaps"] + HEADROOM, deployments=used["count/deployments.apps"] + HEADROOM,
        network_policies=used["count/networkpolicies.networking.k8s.io"] + HEADROOM)  # fmt: skip
    quota = compute_quota.resource_quota(layer.namespace, small, 64)
    hard = quota["spec"]["hard"]
    created: list[tuple[str, str]] = []

    def in_force(expected):
        status = get(layer.cp, "resourcequota", compute_quota.RESOURCE_QUOTA, "-n", layer.namespace).get("status", {})
        return all(status.get("hard", {}).get(k) == expected[k] for k in ("count/jobs.batch", *COUNTED))

    try:
        kubectl(layer.cp, "apply", "--server-side", "--force-conflicts", "-f", "-", input=json.dumps(quota))
        # Admission enforces the quota's status.hard, which the quota controller copies from spec.
        wait_for("the small counts in force", lambda: in_force(hard))
        for kind in ("ConfigMap", "Job", "NetworkPolicy", "Service", "Deployment"):
            key = KEY[kind]
            of_kind = [d for d in documents if d["kind"] == kind]
            for document in of_kind[:HEADROOM]:
                code, out = researcher_kubectl(layer, researcher, "create", "-f", "-", input=json.dumps(document))
                assert code == 0, (kind, out)
                created.append((kind, document["metadata"]["name"]))
            beyond = of_kind[HEADROOM]
            code, out = researcher_kubectl(layer, researcher, "create", "-f", "-", input=json.dumps(beyond))
            assert code != 0 and "exceeded quota: torchfleet-compute" in out and f"{key}=" in out, (kind, out)
        # `torchfleet submit` with every count full: its first object (the job's NetworkPolicy) is refused, the
        # CLI says which quota, what to do, and leaves nothing (torchfleet/jobs/cluster.py _quota_refusal).
        before = {kind: _names(layer, kind) for kind in COUNTED.values()}
        code, out = as_researcher(layer, researcher, capsys, "submit", "qc-cli", "--gpu", "t4", "--nodes", "1",
                                  "--image", IMAGE, "--", "python", "train.py")  # fmt: skip
        assert code != 0, out
        assert "quota refused the NetworkPolicy" in out and "torchfleet-compute" in out, out
        assert "training.quota" in out and "Traceback" not in out, out
        assert {kind: _names(layer, kind) for kind in COUNTED.values()} == before
    finally:
        for kind, name in created:
            kubectl(layer.cp, "delete", "-n", layer.namespace, kind, name, "--ignore-not-found", "--wait=false",
                    check=False)  # fmt: skip
        restored = {k: v for k, v in original.items() if k in ("apiVersion", "kind")}
        restored["metadata"] = {k: original["metadata"][k] for k in ("name", "namespace", "labels")}
        restored["spec"] = original["spec"]
        kubectl(layer.cp, "apply", "--server-side", "--force-conflicts", "-f", "-", input=json.dumps(restored))
        wait_for("the layer's counts back in force", lambda: in_force(original["spec"]["hard"]))


def test_finished_pods_count_against_the_pods_kept(training_layer, researcher):
    """A review's finding: the quota's `pods` counts only pods not yet finished (k8s.io/kubernetes v1.35.4
    pkg/quota/v1/evaluator/core/pods.go QuotaV1Pod: a Succeeded or Failed pod counts nothing), so a researcher
    whose pods exit at once (or a Job retrying a failing index) kept making pods that stay in etcd until deleted,
    past any `pods` cap: only the cluster-wide PodGC threshold removed them, oldest first, other users' finished
    pods (and their logs) included. `count/pods` counts every pod stored (same file, PodUsageFunc). Under small
    counts (the namespace's pods and two more), alice's first pod exits (kwok's pod-exit stage, as the kubelet
    reports it), her second is admitted, and her third, which `pods` alone admits, is refused."""
    layer = training_layer
    original = get(layer.cp, "resourcequota", compute_quota.RESOURCE_QUOTA, "-n", layer.namespace)

    def used(key: str) -> int:
        return int(get(layer.cp, "resourcequota", compute_quota.RESOURCE_QUOTA, "-n", layer.namespace)
                   .get("status", {}).get("used", {}).get(key, -1))  # fmt: skip

    def pods_used() -> int:
        return used("pods")

    def settled():
        """(unfinished, stored) once no pod is going away (an earlier file's) and the quota counts what is listed."""
        listed = get(layer.cp, "pod", "-n", layer.namespace)["items"]
        if any(p["metadata"].get("deletionTimestamp") for p in listed):
            return None
        active = sum(p.get("status", {}).get("phase") not in ("Succeeded", "Failed") for p in listed)
        return (active, len(listed)) if (used("pods"), used("count/pods")) == (active, len(listed)) else None

    active, stored = wait_for("the quota's pod counts to match the namespace's pods", settled)
    small = dataclasses.replace(QuotaSpec(), pods=max(active + HEADROOM, 2), stored_pods=stored + HEADROOM)
    quota = compute_quota.resource_quota(layer.namespace, small, 64)
    hard = quota["spec"]["hard"]
    pods = [copy.deepcopy(reader(layer)) for _ in range(HEADROOM + 1)]

    def in_force(expected):
        status = get(layer.cp, "resourcequota", compute_quota.RESOURCE_QUOTA, "-n", layer.namespace).get("status", {})
        return all(status.get("hard", {}).get(k) == expected[k] for k in ("pods", "count/pods"))

    def phase(name):
        return get(layer.cp, "pod", name, "-n", layer.namespace).get("status", {}).get("phase")

    try:
        kubectl(layer.cp, "apply", "--server-side", "--force-conflicts", "-f", "-", input=json.dumps(quota))
        wait_for("the small counts in force", lambda: in_force(hard))
        first = pods[0]["metadata"]["name"]
        code, out = researcher_kubectl(layer, researcher, "create", "-f", "-", input=json.dumps(pods[0]))
        assert code == 0, out
        wait_for("the first pod running", lambda: phase(first) == "Running")
        # Its code exits (the kubelet's report, played by kwok's pod-exit stage): the pod is Failed and stays.
        kubectl(layer.cp, "annotate", "pod", first, "-n", layer.namespace, f"{EXIT_CODE_ANNOTATION}=1")
        wait_for("the first pod failed", lambda: phase(first) == "Failed")
        wait_for("the finished pod no longer counted in pods", lambda: pods_used() == active)
        code, out = researcher_kubectl(layer, researcher, "create", "-f", "-", input=json.dumps(pods[1]))
        assert code == 0, out
        code, out = researcher_kubectl(layer, researcher, "create", "-f", "-", input=json.dumps(pods[2]))
        assert code != 0 and "exceeded quota: torchfleet-compute" in out and "count/pods=" in out, out
    finally:
        for pod in pods:
            kubectl(layer.cp, "delete", "-n", layer.namespace, "pod", pod["metadata"]["name"], "--ignore-not-found",
                    "--wait=false", check=False)  # fmt: skip
        restored = {k: v for k, v in original.items() if k in ("apiVersion", "kind")}
        restored["metadata"] = {k: original["metadata"][k] for k in ("name", "namespace", "labels")}
        restored["spec"] = original["spec"]
        kubectl(layer.cp, "apply", "--server-side", "--force-conflicts", "-f", "-", input=json.dumps(restored))
        wait_for("the layer's counts back in force", lambda: in_force(original["spec"]["hard"]))
