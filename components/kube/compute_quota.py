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


def limit_range(namespace: str, quota: QuotaSpec) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": LIMIT_RANGE, "namespace": namespace, "labels": dict(manifests.PART_OF)},
        "spec": {"limits": [{"type": "Container", "defaultRequest": {
            "cpu": f"{quota.default_cpu_millis}m", "memory": f"{quota.default_memory_mib}Mi"},
            "min": {"cpu": f"{QUOTA_MIN_CPU_MILLIS}m", "memory": f"{QUOTA_MIN_MEMORY_MIB}Mi"}}]},
    }


def resource_quota(namespace: str, quota: QuotaSpec, max_gpus: int) -> dict[str, Any]:
    """``max_gpus``: guardrails.maxGpus, the GPUs' cap unless training.quota.gpus names one."""
    gpus = max_gpus if quota.gpus is None else quota.gpus
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": RESOURCE_QUOTA, "namespace": namespace, "labels": dict(manifests.PART_OF)},
        "spec": {"hard": {
            "requests.cpu": str(quota.cpus),
            "requests.memory": f"{quota.memory_gib}Gi",
            f"requests.{GPU}": str(gpus),
            "pods": str(quota.pods),
        }},
    }


def objects(namespace: str, quota: QuotaSpec, max_gpus: int) -> list[dict[str, Any]]:
    return [limit_range(namespace, quota), resource_quota(namespace, quota, max_gpus)]
