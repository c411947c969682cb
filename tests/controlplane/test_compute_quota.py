"""The training namespace's LimitRange and ResourceQuota (components/kube/compute_quota.py, training.quota) on the
real API server, as the researcher alice: a container that asks for nothing is given the defaults, a pod past a
cap is refused naming the quota, and the CLI's own pods are still admitted under it.

Sent with server-side dry-run, which runs the LimitRanger and ResourceQuota admission plugins (a dry run is
checked against the quota's usage and counts nothing).
"""

from __future__ import annotations

import copy
import json

from kubernetes.utils import parse_quantity

from components.kube import compute_quota
from components.spec.model import (
    QUOTA_DEFAULT_CPU_MILLIS,
    QUOTA_DEFAULT_MEMORY_MIB,
    QUOTA_MIN_CPU_MILLIS,
    QUOTA_MIN_MEMORY_MIB,
)
from tests.controlplane.layer import get, kubectl
from tests.controlplane.test_operators import rendered
from tests.controlplane.test_researcher import reader, researcher_kubectl


def _dry_run(layer, kubeconfig, document: dict) -> tuple[int, str]:
    return researcher_kubectl(layer, kubeconfig, "create", "--dry-run=server", "-o", "json", "-f", "-",
                              input=json.dumps(document))  # fmt: skip


def test_the_layer_made_them(training_layer):
    layer = training_layer
    quota = get(layer.cp, "resourcequota", compute_quota.RESOURCE_QUOTA, "-n", layer.namespace)
    assert set(quota["spec"]["hard"]) == {"requests.cpu", "requests.memory", "requests.nvidia.com/gpu", "pods"}
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
