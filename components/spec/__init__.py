"""The platform spec: frozen dataclasses built from stack config, and the one validator.

Pure Python (no pulumi import) so every rule is tested without mocks. `parse(raw)` takes the
stack's config as a dict keyed by full config key ("torchfleet:gpuPools", "aws:region"), with
structured values already decoded, and returns a PlatformSpec or raises ConfigError listing
every problem at once, each naming its key path and what would be valid. The checks against each
cloud's own limits (regions, versions, networks, derived names) live in cloud_limits.py.

The package, one module a purpose: model (the dataclasses and shared names), parse (`parse`),
fields (reading one raw value), pools (the manager and GPU pools), sections (the other sections).
"""

from components.spec.dataset_spec import DatasetSpec
from components.spec.model import (
    AKS_SPOT_TAINT,
    CPU_POOL_NAME,
    CPU_TAINT,
    DEFAULT_CLAIM,
    DEFAULT_KUBERNETES_VERSION,
    DEFAULT_MANAGER_MACHINE,
    DEFAULT_NAMESPACE,
    GPU_RESOURCE,
    GPU_TAINT,
    LABEL_CAPACITY,
    LABEL_GPU,
    LABEL_GPU_PRESENT,
    LABEL_JOB,
    LABEL_POOL,
    LABEL_ROLE,
    LABEL_ZONE,
    MANAGER_POOL_NAME,
    MANAGER_TAINTS,
    MANAGER_TOLERATIONS,
    NS,
    OPERATORS,
    ROLE_TRAINING,
    TRAINING_UID,
    AccessSpec,
    AutoscalerSpec,
    ConfigError,
    CpuPoolSpec,
    GpuPoolSpec,
    GuardrailSpec,
    NetworkSpec,
    NodePoolSpec,
    PlatformSpec,
    StorageSpec,
    TrainingSpec,
)
from components.spec.parse import parse

__all__ = [
    "AKS_SPOT_TAINT", "CPU_POOL_NAME", "CPU_TAINT", "DEFAULT_CLAIM", "DEFAULT_KUBERNETES_VERSION",
    "DEFAULT_MANAGER_MACHINE", "DEFAULT_NAMESPACE", "GPU_RESOURCE", "GPU_TAINT", "LABEL_CAPACITY", "LABEL_GPU",
    "LABEL_GPU_PRESENT", "LABEL_JOB", "LABEL_POOL", "LABEL_ROLE", "LABEL_ZONE", "MANAGER_POOL_NAME", "MANAGER_TAINTS",
    "MANAGER_TOLERATIONS", "NS", "OPERATORS", "ROLE_TRAINING", "TRAINING_UID",
    "AccessSpec", "AutoscalerSpec", "ConfigError", "CpuPoolSpec", "DatasetSpec", "GpuPoolSpec", "GuardrailSpec",
    "NetworkSpec", "NodePoolSpec", "PlatformSpec", "StorageSpec", "TrainingSpec", "parse",
]
