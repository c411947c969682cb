"""The training namespace's compute ceiling and container defaults (pure manifest dicts), from
`training.quota` (components/spec/sections.py _parse_quota, docs/config.md).

- A LimitRange gives a container that asks for no CPU or memory a request
  (`defaultRequest`, https://kubernetes.io/docs/concepts/policy/limit-range/): the scheduler then counts
  it, and the quota below can be enforced at all (a quota on requests.cpu or requests.memory refuses a
  pod whose containers name none: https://kubernetes.io/docs/concepts/policy/resource-quotas/#requests-vs-limits).
  No default *limit*: a training container asks for its machine's CPUs without a CPU limit
  (torchfleet/jobs/pod_template.py _resources), and a default limit below that request would make the
  API server refuse it.
- Its `min` (QUOTA_MIN_CPU_MILLIS, QUOTA_MIN_MEMORY_MIB) refuses a container that asks for less, an explicit
  `requests: {cpu: "0", memory: "0"}` included: that pod would be BestEffort and count nothing against the
  quota (the LimitRanger checks a request below min and a limit below min, and requires no limit:
  k8s.io/kubernetes v1.35.4 plugin/pkg/admission/limitranger/admission.go minConstraint). Every container the
  CLI makes asks for more (the smallest, the Lighthouse's, 100m and 32Mi).
- A ResourceQuota caps what every pod of the namespace together requests: CPUs, memory, GPUs
  (`requests.nvidia.com/gpu`: extended resources are quota'd by their request only, which equals their
  limit) and the number of pods. It is one namespace shared by every researcher, so this is a ceiling on a
  runaway sweep, not a share per person.
- The same quota counts the objects of every kind the researcher Role (k8s/base/jobs/role-researcher.yaml) may
  create there (https://kubernetes.io/docs/concepts/policy/resource-quotas/#object-count-quota): Jobs, the
  stack's operator's ElasticJobs or PyTorchJobs, Services, ConfigMaps, Deployments and NetworkPolicies (pods
  above). Those cost no CPU or pod when idle (a suspended Job, a 1 MiB ConfigMap, a Service), yet fill etcd,
  which every namespace shares, or the cluster's Service range. Only the stack's own operator's kind is counted
  (OPERATOR_KINDS), never the other's: quota admission refuses creating a counted kind with "status unknown for
  quota" until the quota controller has discovered its CRD and recounted, and it recounts a quota only on its
  full resync (kube-controller-manager --resource-quota-sync-period, 5 minutes by default), so a count of a kind
  someone else installs later would refuse that kind for minutes (seen on the test control plane, stop 34:
  test_operators' PyTorchJobs refused). The stack's own operator kind has the same window once, just after
  its CRD is first installed (docs/jobs.md says what `submit` then prints).
  Pods are counted twice: `pods` counts those not yet finished (what runs), `count/pods` every pod stored, a
  Succeeded or Failed one included (k8s.io/kubernetes v1.35.4 pkg/quota/v1/evaluator/core/pods.go PodUsageFunc,
  QuotaV1Pod): without it a researcher's pods that exit at once, or a Job whose podFailurePolicy ignores every
  failure, kept pods in etcd without limit, `pods` never reached.
  No `services.loadbalancers`/`services.nodeports`: torchfleet-researcher-limits already refuses every Service
  type but ClusterIP, and externalIPs. The Role grants no PersistentVolumeClaims.

Every pod the CLI makes names its own CPU and memory requests (the training pods, the workdir init
container, the Lighthouse, the reader, TensorBoard), so the defaults only fill in for someone else's.
"""

from __future__ import annotations

from typing import Any

from components.kube import manifests
from components.spec.model import QUOTA_MIN_CPU_MILLIS, QUOTA_MIN_MEMORY_MIB, QuotaSpec

LIMIT_RANGE = "torchfleet-container-defaults"
RESOURCE_QUOTA = "torchfleet-compute"
GPU = "nvidia.com/gpu"
# The job kinds counted, by object-count name (count/<resource>.<group>): batch Jobs, which every API server
# serves and the Role grants whatever the operator, and the operator's own kind (training.operator).
BATCH_JOBS = "count/jobs.batch"
OPERATOR_KINDS = {
    "job": (),
    "torchelastic": ("count/elasticjobs.elastic.pytorch.org",),
    "kubeflow": ("count/pytorchjobs.kubeflow.org",),
}


def limit_range(namespace: str, quota: QuotaSpec) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": LIMIT_RANGE, "namespace": namespace, "labels": dict(manifests.PART_OF)},
        "spec": {
            "limits": [
                {
                    "type": "Container",
                    "defaultRequest": {
                        "cpu": f"{quota.default_cpu_millis}m",
                        "memory": f"{quota.default_memory_mib}Mi",
                    },
                    "min": {"cpu": f"{QUOTA_MIN_CPU_MILLIS}m", "memory": f"{QUOTA_MIN_MEMORY_MIB}Mi"},
                }
            ]
        },
    }


def resource_quota(namespace: str, quota: QuotaSpec, max_gpus: int, operator: str = "job") -> dict[str, Any]:
    """``max_gpus``: guardrails.maxGpus, the GPUs' cap unless training.quota.gpus names one; ``operator``:
    training.operator, whose job kind is counted besides batch Jobs."""
    gpus = max_gpus if quota.gpus is None else quota.gpus
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": RESOURCE_QUOTA, "namespace": namespace, "labels": dict(manifests.PART_OF)},
        "spec": {
            "hard": {
                "requests.cpu": str(quota.cpus),
                "requests.memory": f"{quota.memory_gib}Gi",
                f"requests.{GPU}": str(gpus),
                "pods": str(quota.pods),
                **{kind: str(quota.jobs) for kind in (BATCH_JOBS, *OPERATOR_KINDS[operator])},
                "services": str(quota.services),
                "configmaps": str(quota.config_maps),
                "count/deployments.apps": str(quota.deployments),
                "count/networkpolicies.networking.k8s.io": str(quota.network_policies),
                "count/pods": str(quota.stored_pods),
            }
        },
    }


def objects(namespace: str, quota: QuotaSpec, max_gpus: int, operator: str) -> list[dict[str, Any]]:
    return [limit_range(namespace, quota), resource_quota(namespace, quota, max_gpus, operator)]
