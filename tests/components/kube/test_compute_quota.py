"""compute_quota.py without mocks: the training namespace's LimitRange and ResourceQuota, the training.quota keys
(every bad value refused naming its key), the layer deploying them, and the CLI's pods asking for what the quota
counts. On the real API server: tests/controlplane/test_compute_quota.py."""

from __future__ import annotations

import pytest
import yaml

from components.kube import compute_quota
from components.spec.model import DEFAULT_NAMESPACE, QuotaSpec
from tests.components.spec.configs import config, ok, only, problems
from tests.harness import synth_config, synth_stack
from tests.k8s.rendered import K8S_VERSIONS, problems_of
from torchfleet.cli import main


def training(**quota_keys):
    return config("aws", training={"quota": quota_keys})


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_every_object_is_valid_kubernetes(version):
    for obj in compute_quota.objects("elastic-job", QuotaSpec(), 64):
        assert problems_of(obj, version) == [], obj["kind"]


def test_defaults_fill_requests_only_and_the_quota_caps_cpu_memory_gpus_pods():
    default = ok(config("aws"))
    quota = default.training.quota
    assert quota.enabled and quota.gpus is None
    limits = compute_quota.limit_range("ns", quota)["spec"]["limits"]
    # No default limit; a min, so that no container asks for 0 (a BestEffort pod the quota counts as nothing).
    assert limits == [{"type": "Container", "defaultRequest": {"cpu": "250m", "memory": "512Mi"},
                       "min": {"cpu": "10m", "memory": "16Mi"}}]
    hard = compute_quota.resource_quota("ns", quota, default.guardrails.max_gpus)["spec"]["hard"]
    assert hard == {"requests.cpu": "1024", "requests.memory": "8192Gi", "requests.nvidia.com/gpu": "64",
                    "pods": "1000"}


def test_overrides():
    spec = ok(training(enabled=False, cpus=64, memoryGiB=512, gpus=8, pods=40, defaultCpuMillis=100,
                       defaultMemoryMiB=128))
    quota = spec.training.quota
    assert quota == QuotaSpec(enabled=False, cpus=64, memory_gib=512, gpus=8, pods=40, default_cpu_millis=100,
                              default_memory_mib=128)
    assert compute_quota.resource_quota("ns", quota, 64)["spec"]["hard"]["requests.nvidia.com/gpu"] == "8"
    assert ok(training(gpus=0)).training.quota.gpus == 0  # a namespace for CPU jobs only


@pytest.mark.parametrize(
    ("keys", "key", "says"),
    [
        ({"enabled": "yes"}, "enabled", "true or false"),
        ({"cpus": 0}, "cpus", ">= 1"),
        ({"cpus": "many"}, "cpus", "whole number"),
        ({"cpus": 1.5}, "cpus", "whole number"),
        ({"memoryGiB": 0}, "memoryGiB", ">= 1"),
        ({"memoryGiB": "1Ti"}, "memoryGiB", "whole number"),
        ({"gpus": -1}, "gpus", ">= 0"),
        ({"gpus": True}, "gpus", "whole number"),
        ({"pods": 1}, "pods", ">= 2"),
        ({"pods": "x"}, "pods", "whole number"),
        ({"defaultCpuMillis": 0}, "defaultCpuMillis", ">= 10"),
        ({"defaultCpuMillis": 9}, "defaultCpuMillis", ">= 10"),  # below the LimitRange's min
        ({"defaultCpuMillis": "250m"}, "defaultCpuMillis", "whole number"),
        ({"cpus": 1, "defaultCpuMillis": 1001}, "defaultCpuMillis", "must not exceed the namespace's cap"),
        ({"defaultMemoryMiB": 15}, "defaultMemoryMiB", ">= 16"),
        ({"defaultMemoryMiB": "512Mi"}, "defaultMemoryMiB", "whole number"),
        ({"memoryGiB": 1, "defaultMemoryMiB": 1025}, "defaultMemoryMiB", "must not exceed the namespace's cap"),
    ],
)
def test_bad_keys_are_refused_naming_the_key(keys, key, says):
    assert says in only(training(**keys), f"torchfleet:training.quota.{key}")


def test_an_unknown_key_and_every_problem_at_once():
    found = problems(training(cpu=3, pods=0, gpus=-2))
    assert {"torchfleet:training.quota.pods", "torchfleet:training.quota.gpus"} <= set(found), found
    assert any("cpu" in k or any("cpu" in m for m in v) for k, v in found.items()), found


def test_the_layer_deploys_them_in_the_training_namespace_and_only_when_enabled():
    layer = synth_stack("local")
    namespace = DEFAULT_NAMESPACE  # the local stack's
    kinds = {(o["kind"], o["metadata"]["name"]) for o in layer.kubernetes_objects()
             if o["kind"] in ("LimitRange", "ResourceQuota") and o["metadata"].get("namespace") == namespace}
    assert {("LimitRange", compute_quota.LIMIT_RANGE), ("ResourceQuota", compute_quota.RESOURCE_QUOTA)} <= kinds
    off = synth_config("off", {"torchfleet:cloud": "local", "torchfleet:training": {"quota": {"enabled": False}}})
    assert not [o for o in off.kubernetes_objects() if o["kind"] in ("LimitRange", "ResourceQuota")
                and o["metadata"]["name"] in (compute_quota.LIMIT_RANGE, compute_quota.RESOURCE_QUOTA)]


@pytest.mark.parametrize("extra", [[], ["--recovery", "inplace"]], ids=["restart", "inplace"])
def test_every_container_the_cli_makes_asks_for_cpu_and_memory(capsys, tmp_path, extra):
    """The quota counts requests: a container without one would get the LimitRange's default, which is not what
    the CLI sized. Every container of every pod the CLI submits names both (the reader's and TensorBoard's are
    pinned by their own tests)."""
    (tmp_path / "train.py").write_text("print('hi')\n")
    code = main(["submit", "tier-quota", "--gpu", "t4", "--nodes", "2", "--image", "r/t:1", "--workdir",
                 str(tmp_path), *extra, "--dry-run", "--", "python", "train.py"])  # fmt: skip
    documents = [d for d in yaml.safe_load_all(capsys.readouterr().out) if d]
    assert code == 0
    specs = [d["spec"]["template"]["spec"] for d in documents if d["kind"] in ("Job", "Deployment")]
    assert len(specs) == (2 if extra else 1)
    for spec in specs:
        for container in [*spec["containers"], *spec.get("initContainers", [])]:
            assert {"cpu", "memory"} <= set(container["resources"]["requests"]), container["name"]
