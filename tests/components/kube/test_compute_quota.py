"""compute_quota.py without mocks: the training namespace's LimitRange and ResourceQuota, the training.quota keys
(every bad value refused naming its key), the layer deploying them, and the CLI's pods asking for what the quota
counts. On the real API server: tests/controlplane/test_compute_quota.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from components.kube import compute_quota
from components.spec.model import DEFAULT_NAMESPACE, OPERATORS, QuotaSpec
from tests.components.spec.configs import config, ok, only, problems
from tests.harness import synth_config, synth_stack
from tests.k8s.rendered import K8S_VERSIONS, problems_of
from torchfleet.cli import main

REPO = Path(__file__).resolve().parents[3]
# Each operator's job kind as the Role names it (group, resource), by its object-count name.
OPERATOR_COUNTS = {"count/elasticjobs.elastic.pytorch.org": ("elastic.pytorch.org", "elasticjobs"),
                   "count/pytorchjobs.kubeflow.org": ("kubeflow.org", "pytorchjobs")}


def training(**quota_keys):
    return config("aws", training={"quota": quota_keys})


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_every_object_is_valid_kubernetes(version):
    for obj in compute_quota.objects("elastic-job", QuotaSpec(), 64, "kubeflow"):
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
                    "pods": "1000", "count/jobs.batch": "1000", "services": "1100", "configmaps": "256",
                    "count/deployments.apps": "1000", "count/networkpolicies.networking.k8s.io": "3100",
                    "count/pods": "5000"}


@pytest.mark.parametrize("operator", OPERATORS)
def test_only_the_stacks_operator_kind_is_counted_beside_batch_jobs(operator):
    """A counted kind the cluster serves but the quota controller has not yet discovered is refused ("status
    unknown for quota") until its next full resync: the other operators' kinds, which another test file or an
    administrator may install later, are never counted (compute_quota.py)."""
    hard = compute_quota.resource_quota("ns", QuotaSpec(), 64, operator)["spec"]["hard"]
    jobs = {key for key in hard if key in ("count/jobs.batch", *OPERATOR_COUNTS)}
    expected = {"job": set(), "torchelastic": {"count/elasticjobs.elastic.pytorch.org"},
                "kubeflow": {"count/pytorchjobs.kubeflow.org"}}[operator]
    assert jobs == {"count/jobs.batch", *expected}
    assert hard["count/jobs.batch"] == "1000" and all(hard[key] == "1000" for key in expected)


@pytest.mark.parametrize("operator", OPERATORS)
def test_every_kind_the_researcher_role_creates_is_counted(operator):
    """The Role's create rules (k8s/base/jobs/role-researcher.yaml) against the quota's hard keys: a kind a
    researcher may create and nothing counts fills etcd or the Service range unbounded (hostile-researcher
    review: 1 MiB ConfigMaps, Services, suspended Jobs). The other operators' kinds are not served under this
    operator's stack: the Role's rule for them grants nothing."""
    role = yaml.safe_load((REPO / "k8s/base/jobs/role-researcher.yaml").read_text())
    created = {(group, resource) for rule in role["rules"] if "create" in rule["verbs"]
               for group in rule["apiGroups"] for resource in rule["resources"] if "/" not in resource}
    created -= {OPERATOR_COUNTS[key] for other in OPERATORS if other != operator
                for key in compute_quota.OPERATOR_KINDS[other]}
    hard = compute_quota.resource_quota("ns", QuotaSpec(), 64, operator)["spec"]["hard"]
    # The quota's names for a kind's objects: the legacy ones of services and configmaps, else
    # count/<resource>.<group> (count/pods for pods: the legacy `pods` counts only pods not yet finished, and a
    # finished one stays stored; k8s.io/kubernetes v1.35.4 pkg/quota/v1/evaluator/core/pods.go PodUsageFunc).
    counted = {(group, resource) for group, resource in created
               if (not group and resource in ("services", "configmaps") and resource in hard)
               or f"count/{resource}{'.' + group if group else ''}" in hard}
    assert counted == created, sorted(created - counted)


def test_overrides():
    spec = ok(training(enabled=False, cpus=64, memoryGiB=512, gpus=8, pods=40, defaultCpuMillis=100,
                       defaultMemoryMiB=128, jobs=30, services=50, configMaps=60, deployments=20, networkPolicies=70,
                       storedPods=90))
    quota = spec.training.quota
    assert quota == QuotaSpec(enabled=False, cpus=64, memory_gib=512, gpus=8, pods=40, default_cpu_millis=100,
                              default_memory_mib=128, jobs=30, services=50, config_maps=60, deployments=20,
                              network_policies=70, stored_pods=90)
    hard = compute_quota.resource_quota("ns", quota, 64, "kubeflow")["spec"]["hard"]
    assert hard["requests.nvidia.com/gpu"] == "8"
    assert {k: hard[k] for k in ("count/jobs.batch", "count/pytorchjobs.kubeflow.org", "services", "configmaps",
                                 "count/deployments.apps", "count/networkpolicies.networking.k8s.io",
                                 "count/pods")} == {
        "count/jobs.batch": "30", "count/pytorchjobs.kubeflow.org": "30",
        "services": "50", "configmaps": "60", "count/deployments.apps": "20",
        "count/networkpolicies.networking.k8s.io": "70", "count/pods": "90"}
    # The least of each (model.py: the platform's own objects, one job and the reader) is accepted.
    least = ok(training(jobs=1, services=4, configMaps=21, deployments=3, networkPolicies=11, pods=2,
                        storedPods=2)).training.quota
    counts = (least.jobs, least.services, least.config_maps, least.deployments, least.network_policies,
              least.stored_pods)
    assert counts == (1, 4, 21, 3, 11, 2)
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
        ({"jobs": 0}, "jobs", ">= 1"),
        ({"jobs": "1k"}, "jobs", "whole number"),
        ({"services": 3}, "services", ">= 4"),  # etcd's and the gate's 3, and one job's
        ({"services": -1}, "services", ">= 4"),
        ({"services": 2.5}, "services", "whole number"),
        ({"configMaps": 20}, "configMaps", ">= 21"),  # 3 of the platform's, 18 of the biggest --workdir
        ({"configMaps": False}, "configMaps", "whole number"),
        ({"deployments": 2}, "deployments", ">= 3"),  # etcd-gate, the torchelastic controller, a Lighthouse
        ({"deployments": "two"}, "deployments", "whole number"),
        ({"networkPolicies": 10}, "networkPolicies", ">= 11"),  # the platform's 8 at most, one job's 3
        ({"networkpolicies": 5}, "networkpolicies", "unknown key"),  # a typo of the key
        ({"storedPods": 1}, "storedPods", ">= 2"),
        ({"storedPods": "5k"}, "storedPods", "whole number"),
        # fewer stored than running: count/pods counts the running ones too, so `pods` would never be reached
        ({"pods": 100, "storedPods": 99}, "storedPods", "must be at least torchfleet:training.quota.pods (100)"),
        ({"storedPods": 999}, "storedPods", "must be at least"),  # below the default pods, 1000
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


def test_docs_config_lists_every_quota_key_with_its_default():
    """docs/config.md's table against the parser: a training.quota key without a row, or a row whose default is
    not the code's, is a key an operator cannot find or is told wrong."""
    from components.spec import sections

    row = re.compile(r"^\| `torchfleet:training\.quota\.(\w+)` \| `([^`]+)`", re.MULTILINE)
    rows = dict(row.findall((REPO / "docs/config.md").read_text()))
    assert set(rows) == sections._QUOTA_KEYS, set(rows) ^ sections._QUOTA_KEYS
    default = QuotaSpec()
    fields = {"enabled": "true" if default.enabled else "false", "cpus": default.cpus, "memoryGiB": default.memory_gib,
              "pods": default.pods, "defaultCpuMillis": default.default_cpu_millis,
              "defaultMemoryMiB": default.default_memory_mib,
              **{key: getattr(default, field) for key, field, *_ in sections._QUOTA_COUNTS}}
    assert {k: rows[k] for k in fields} == {k: str(v) for k, v in fields.items()}
