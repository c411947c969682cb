"""The platform spec as frozen dataclasses, and the names every part shares (labels, taints, the training uid)."""

from __future__ import annotations

from dataclasses import dataclass, field

from components import catalog
from components.clouds.traits import CLOUD_TRAITS, CloudTraits
from components.spec.dataset_spec import DatasetSpec

NS = "torchfleet"
# In standard support on EKS, GKE (REGULAR channel) and AKS (Standard tier) as of the catalog's check
# (catalog/kubernetes.yaml, 2026-11-23: until 2027-03-27, 2027-04-11 and 2027-03-31), with an
# autoscaler image pinned for it (clouds/aws/autoscaling.py).
DEFAULT_KUBERNETES_VERSION = "1.35"
DEFAULT_NAMESPACE = "elastic-job"
DEFAULT_CLAIM = "shared-data"
# The first is the default: "job" is Kubernetes' own batch/v1 Indexed Job running torchrun's elastic agents
# (torchfleet/jobs/indexed_job.py); the 2020 ElasticJob controller cannot start a pod under the `restricted`
# Pod Security level (README.md, "For researchers: running jobs").
OPERATORS = ("job", "torchelastic", "kubeflow")
# On-demand machines for the manager pool (etcd, controllers, autoscaler) when config names none.
DEFAULT_MANAGER_MACHINE = {
    "aws": "m6i.large",
    "gcp": "e2-standard-4",
    "azure": "Standard_D4s_v5",
    "local": "",
}

# The contract between pools, jobs and the CLI (README.md, "Names, labels, taints").
LABEL_POOL = "torchfleet.io/pool"
LABEL_GPU = "torchfleet.io/gpu"
LABEL_CAPACITY = "torchfleet.io/capacity"
LABEL_GPU_PRESENT = "nvidia.com/gpu.present"
LABEL_ZONE = "topology.kubernetes.io/zone"
GPU_RESOURCE = "nvidia.com/gpu"
# Value always set: the EKS cluster autoscaler drops node-template taints without a value.
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
# AKS puts this on every spot pool itself; declared so there is no diff, tolerated by jobs.
AKS_SPOT_TAINT = {"key": "kubernetes.azure.com/scalesetpriority", "value": "spot", "effect": "NoSchedule"}
MANAGER_POOL_NAME = "manager"
# The manager pool's taint, one per cloud, so that only the platform's pods land beside etcd, its gate and the
# controllers (docs/threat-model.md, "Run code beside etcd"): a pod the CLI or a researcher makes tolerates none
# of them (k8s/base/cluster/validatingadmissionpolicy-researcher-limits.yaml). Each is the key that cloud's own
# cluster add-ons already tolerate where the pool also hosts them, so they keep a place to run:
# - aws: EKS has no system pool of its own; CoreDNS and the EBS and EFS CSI controllers run on the manager
#   groups and tolerate CriticalAddonsOnly ("This NodePool has a CriticalAddonsOnly taint. Many EKS add-ons,
#   such as CoreDNS, tolerate this taint": https://docs.aws.amazon.com/eks/latest/userguide/set-builtin-node-pools.html;
#   kubernetes-sigs/aws-ebs-csi-driver charts/aws-ebs-csi-driver/values.yaml at 006340ee and
#   kubernetes-sigs/aws-efs-csi-driver charts/aws-efs-csi-driver/values.yaml at 00a24b48, controller.tolerations).
# - gcp: GKE's own Deployments (kube-dns, metrics-server, konnectivity-agent, event-exporter) run on the manager
#   pool and tolerate components.gke.io/gke-managed-components (a GKE cluster's event-exporter-gke Deployment
#   carries exactly that toleration), and nothing else of ours.
# - azure: AKS's add-ons run on the cluster's System pool, tainted CriticalAddonsOnly (clouds/azure/cluster.py),
#   so the manager pool, a User pool, carries the platform's own key.
# The local stack has no pools (one kind/minikube node): nothing is tainted there; the test tier's manager nodes
# carry the azure form (tests/controlplane/nodes.py).
# Value always set: the EKS cluster autoscaler drops node-template taints without one (as GPU_TAINT).
MANAGER_TAINTS = {
    "aws": {"key": "CriticalAddonsOnly", "value": "true", "effect": "NoSchedule"},
    "gcp": {"key": "components.gke.io/gke-managed-components", "value": "true", "effect": "NoSchedule"},
    "azure": {"key": "torchfleet.io/pool", "value": MANAGER_POOL_NAME, "effect": "NoSchedule"},
}
# What every platform pod on the manager pool tolerates: each cloud's manager taint exactly (key, value, effect;
# never Exists on torchfleet.io/pool, which would tolerate the CPU pool's taint too), so one static manifest fits
# every cloud: a toleration of a taint a node does not carry changes nothing, and the pod's nodeSelector, not its
# tolerations, keeps it on the manager pool.
MANAGER_TOLERATIONS = tuple(
    {"key": t["key"], "operator": "Equal", "value": t["value"], "effect": t["effect"]}
    for t in sorted(MANAGER_TAINTS.values(), key=lambda t: t["key"])
)
# The CPU pool (torchfleet:cpuPool, optional): where CPU jobs, readers, TensorBoard and Lighthouses run, all of
# them researcher code or researcher-chosen images. Labelled and tainted so that only pods that ask for it land
# there (GKE's and EKS's add-ons tolerate neither, so they never keep a CPU node from scaling to zero).
CPU_POOL_NAME = "cpu"
CPU_TAINT = {"key": LABEL_POOL, "value": CPU_POOL_NAME, "effect": "NoSchedule"}
# The training image's user (training-image/Dockerfile USER): jobs run as it, the shared store's
# root belongs to it. Numeric so runAsNonRoot can be verified.
TRAINING_UID = 10001
# On every pod of a training job (the job builder sets them; network policies select on them).
LABEL_ROLE = "torchfleet.io/role"
ROLE_TRAINING = "training"
LABEL_JOB = "torchfleet.io/job"


class ConfigError(ValueError):
    """Every problem found in a stack config, each as 'key: what is wrong; what would be valid'."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("invalid stack config:\n  - " + "\n  - ".join(self.problems))


@dataclass(frozen=True)
class NodePoolSpec:
    machine_type: str
    min_nodes: int
    max_nodes: int
    disk_size_gb: int = 100
    # AKS's enableEncryptionAtHost (Azure only; spec/pools.py checks the size supports it).
    encryption_at_host: bool = False


@dataclass(frozen=True)
class CpuPoolSpec:
    """torchfleet:cpuPool (optional): the pool for every pod of a researcher's that asks for no GPU (CPU jobs,
    readers, TensorBoard, Lighthouses), labelled and tainted torchfleet.io/pool=cpu, scaling from zero."""

    machine_type: str
    zones: tuple[str, ...]
    min_nodes: int
    max_nodes: int
    spot: bool = False
    disk_size_gb: int = 100
    encryption_at_host: bool = False  # AKS's enableEncryptionAtHost, as NodePoolSpec's

    @property
    def capacity(self) -> str:
        return "spot" if self.spot else "on-demand"

    @property
    def labels(self) -> dict[str, str]:
        return {LABEL_POOL: CPU_POOL_NAME, LABEL_CAPACITY: self.capacity}


@dataclass(frozen=True)
class GpuPoolSpec:
    """One GPU pool: one GPU type in exactly one zone."""

    gpu: str
    zone: str
    machines: tuple[catalog.Machine, ...]
    min_nodes: int
    max_nodes: int
    spot: bool = True
    disk_size_gb: int = 200
    accelerator: str | None = None  # GCP's guest_accelerator type
    encryption_at_host: bool = False  # AKS's enableEncryptionAtHost, as NodePoolSpec's

    @property
    def name(self) -> str:
        return f"gpu-{self.gpu}-{self.zone}"

    @property
    def machine_types(self) -> list[str]:
        return [m.type for m in self.machines]

    @property
    def gpus_per_node(self) -> int:
        return self.machines[0].gpus

    @property
    def capacity(self) -> str:
        return "spot" if self.spot else "on-demand"

    @property
    def labels(self) -> dict[str, str]:
        return {
            LABEL_POOL: "gpu",
            LABEL_GPU: self.gpu,
            LABEL_CAPACITY: self.capacity,
            LABEL_GPU_PRESENT: "true",
        }


@dataclass(frozen=True)
class StorageSpec:
    # Keep the store when the stack is destroyed (the resource option retainOnDelete, never
    # `protect`, which would make `pulumi destroy` delete nothing; README "Destroying").
    protect: bool = True
    tier: str | None = None
    size_gb: int | None = None
    # Take back what an earlier `pulumi destroy` of this stack kept (the import resource option).
    adopt: bool = False
    # Where a zonal store lives (GCP's Basic and Zonal Filestore tiers), said once and never derived
    # from torchfleet:zones' order (GCP review B1; gcp/filestore.py store_location). None: zones[0].
    zone: str | None = None


@dataclass(frozen=True)
class AccessSpec:
    """Who may administer the cluster besides the identity that runs `pulumi up` (on Azure, that identity
    too: admins is the only source of cluster admins there, spec/access.py requires it).

    admins: per cloud, AWS IAM role or user ARNs; GCP IAM members (user:, serviceAccount:);
    Azure "<User|Group|ServicePrincipal>:<object id>" (the type is ARM's principalType, which it
    checks against the directory: a wrong one fails the assignment).
    researchers: identities in the same forms that may only run jobs: the training namespace's
    torchfleet-researcher Role (k8s/base/jobs/role-researcher.yaml), nothing cluster-wide.
    deployer_type: the principalType of the identity running `pulumi up` on Azure.
    kube_login: kubelogin's login mode in the Azure kubeconfig (spec/access.py KUBE_LOGIN_MODES).
    """

    admins: tuple[str, ...] = ()
    researchers: tuple[str, ...] = ()
    deployer_type: str = "User"
    kube_login: str = "azurecli"


# The node healer (components/kube/node_healer.py) runs the training image's elastic_trainer.node_healer:
# the image the release publishes at this version (torchfleet/jobs/image_ref.py DEFAULT_IMAGE, pinned
# equal by tests/components/kube/test_node_healer.py; components import nothing from torchfleet).
NODE_HEALER_IMAGE = "ghcr.io/torchfleet/torchfleet-trainer:0.1.0"
# Seconds a GPU node stays not ready before the healer taints it out of service (node_healer.py
# DEFAULT_THRESHOLD_S says why 60); at most an hour, past which the Node's index has waited too long.
NODE_HEALER_THRESHOLD_S = 60
NODE_HEALER_MAX_THRESHOLD_S = 3600


@dataclass(frozen=True)
class NodeHealerSpec:
    enabled: bool = True
    image: str = NODE_HEALER_IMAGE
    not_ready_seconds: int = NODE_HEALER_THRESHOLD_S


# The training namespace's compute quota and container defaults (components/kube/compute_quota.py).
# A ceiling on what every job together may request, not a share per researcher (they share the
# namespace): defaults well above one team's pools, so that it only stops a runaway sweep, and the GPUs at
# guardrails.maxGpus (what the pools may hold at most).
QUOTA_CPUS = 1024
QUOTA_MEMORY_GIB = 8192
QUOTA_PODS = 1000
# What a container that asks for nothing is given (LimitRange defaultRequest): the reader's own request
# is 100m/256Mi (torchfleet/jobs/reader_pod.py), the CLI's other pods ask for theirs.
QUOTA_DEFAULT_CPU_MILLIS = 250
QUOTA_DEFAULT_MEMORY_MIB = 512
# The least a container may request (the LimitRange's min, components/kube/compute_quota.py): an explicit
# request of 0 would make a pod BestEffort and count nothing against the quota. Below the CLI's smallest
# container (the Lighthouse: 100m, 32Mi; torchfleet/jobs/inplace_job.py).
QUOTA_MIN_CPU_MILLIS = 10
QUOTA_MIN_MEMORY_MIB = 16
# How many objects of each kind the researcher Role may create can exist in the namespace (object-count quota,
# https://kubernetes.io/docs/concepts/policy/resource-quotas/#object-count-quota), whoever made them: without a
# count, suspended Jobs, 1 MiB ConfigMaps and Services cost no CPU or pod and fill etcd (shared by every
# namespace) or the cluster's Service range. Sized, as QUOTA_PODS, to stop a runaway only, from what one job
# makes; the platform's own in the namespace (the stacks' render) count too:
# - Jobs (and each operator's ElasticJobs, PyTorchJobs): one per job, and a running job has a pod at least, so
#   as many as QUOTA_PODS; a sweep is at most 256 jobs (torchfleet/jobs/flag_checks.py MAX_SWEEP_JOBS).
#   Finished jobs stay until `delete`.
QUOTA_JOBS = 1000
# - Services: an in-place job's Lighthouse (torchfleet/jobs/inplace_job.py), the ElasticJob controller's one per
#   pod (torchfleet/jobs/pod_template.py CONTAINER_PORT), the training operator's one per replica; the `job`
#   operator's Indexed Job none. So up to QUOTA_PODS, plus etcd's and the gate's 3. Far below the clusters'
#   Service ranges (4096 addresses at the gcp stack's default /20: components/clouds/gcp/network.py).
QUOTA_SERVICES = 1100
# - ConfigMaps: --workdir's parts, at most 16 MiB / 960 KiB = 18 per submit, shared by a sweep's jobs
#   (torchfleet/jobs/workdir.py PART_BYTES, workdir_pack.py MAX_BYTES), owned by the job; the reader and
#   TensorBoard make none; the platform's etcd-bootstrap, the API server's kube-root-ca.crt and, under the
#   torchelastic operator, its controller's leader-election lock (k8s/base/controller/role-leader-election.yaml).
#   Each holds up to 1 MiB, so 256 is at most 256 MiB of etcd (whose default space quota is 2 GiB:
#   https://etcd.io/docs/v3.5/op-guide/maintenance/#space-quota).
QUOTA_CONFIGMAPS = 256
# - Deployments: an in-place job's Lighthouse, so one per job; the platform's etcd-gate and, under the
#   torchelastic operator, its controller.
QUOTA_DEPLOYMENTS = 1000
# - NetworkPolicies: up to 3 per job (job-J, job-J-egress with --allow-egress, job-J-lighthouse:
#   torchfleet/jobs/manifests.py network_policies, inplace_job.py), the platform's 7-8.
QUOTA_NETWORK_POLICIES = 3100
# - Pods stored, finished ones included (count/pods): QUOTA_PODS counts only pods not yet Succeeded or Failed
#   (k8s.io/kubernetes v1.35.4 pkg/quota/v1/evaluator/core/pods.go QuotaV1Pod), and a finished pod stays until
#   its job is deleted (the Job controller keeps them) or the cluster-wide PodGC threshold removes the oldest
#   (kube-controller-manager --terminated-pod-gc-threshold, 12500 by default), anyone's. Without this count a pod
#   that exits at once, or a Job whose podFailurePolicy ignores every failure, stores pods without limit. Each
#   index of a job keeps its failed pods until `delete`: up to torchfleet/jobs/indexed_job.py
#   BACKOFF_LIMIT_PER_INDEX (3) counted failures, its last pod, and one per spot reclaim (ignored by the CLI's
#   podFailurePolicy); 5 for each of QUOTA_PODS. At least `pods` (sections.py).
QUOTA_STORED_PODS = 5000
# The least of each that still lets the platform's objects, one job and the reader exist: Services 3 + one
# (a Lighthouse, or a one-pod ElasticJob's); ConfigMaps 3 + 18; Deployments 2 + 1; NetworkPolicies 8 + 3.
QUOTA_MIN_JOBS = 1
QUOTA_MIN_SERVICES = 4
QUOTA_MIN_CONFIGMAPS = 21
QUOTA_MIN_DEPLOYMENTS = 3
QUOTA_MIN_NETWORK_POLICIES = 11
QUOTA_MIN_STORED_PODS = 2  # as pods: a training pod and the reader


@dataclass(frozen=True)
class QuotaSpec:
    enabled: bool = True
    cpus: int = QUOTA_CPUS
    memory_gib: int = QUOTA_MEMORY_GIB
    gpus: int | None = None  # None: guardrails.maxGpus
    pods: int = QUOTA_PODS
    default_cpu_millis: int = QUOTA_DEFAULT_CPU_MILLIS
    default_memory_mib: int = QUOTA_DEFAULT_MEMORY_MIB
    jobs: int = QUOTA_JOBS
    services: int = QUOTA_SERVICES
    config_maps: int = QUOTA_CONFIGMAPS
    deployments: int = QUOTA_DEPLOYMENTS
    network_policies: int = QUOTA_NETWORK_POLICIES
    stored_pods: int = QUOTA_STORED_PODS


@dataclass(frozen=True)
class TrainingSpec:
    operator: str = OPERATORS[0]
    namespace: str = DEFAULT_NAMESPACE
    etcd_replicas: int = 3
    claim_name: str = DEFAULT_CLAIM
    # Grace period jobs get on a spot notice (seconds): the cloud's notice window.
    termination_grace_s: int = 120
    node_healer: NodeHealerSpec = NodeHealerSpec()
    quota: QuotaSpec = QuotaSpec()


@dataclass(frozen=True)
class NetworkSpec:
    cidr: str = "10.0.0.0/16"
    # Private by default: no public API endpoint unless the stack lists who may reach it (issue 20).
    # On Azure the stack must say which: a list, or private_only (spec/sections.py, issue 29).
    public_access_cidrs: tuple[str, ...] = ()
    # No public API endpoint at all, on purpose: `pulumi up` runs from a bastion or a network peered
    # with the cluster's (docs/deploy-azure.md). On Azure the only way to an empty publicAccessCidrs.
    private_only: bool = False
    # AWS: the networks (VPN, peering, bastion) that reach the private endpoint on 443 through the
    # cluster security group (clouds/aws/cluster.py), which admits only the cluster itself by default.
    private_access_cidrs: tuple[str, ...] = ()
    # AWS: the zones whose subnets the control plane uses, fixed when the cluster is created (EKS
    # accepts no new zone later). Empty: the running cluster's zones, or every zone at the first `up`.
    cluster_zones: tuple[str, ...] = ()
    nat: str = "single"  # "single" | "perZone"
    # GKE's DNS-based control-plane endpoint, open to callers outside the VPC and gated by IAM
    # (container.clusters.connect), not by source address: how a laptop or CI reaches a private
    # cluster (GCP review F1; components/clouds/gcp/cluster.py). GKE only: spec.parse turns it on for
    # GCP unless the stack says false, and refuses the key on other clouds.
    dns_endpoint: bool = False


@dataclass(frozen=True)
class AutoscalerSpec:
    # The blog saw 10 minutes of idle GPUs before scale-down; idle GPUs cost money.
    scale_down_unneeded_time: str = "5m"
    scale_down_delay_after_add: str = "5m"


@dataclass(frozen=True)
class GuardrailSpec:
    max_gpus: int = 64
    allow_on_demand_gpus: bool = False
    # The public-endpoint rule (an API endpoint open to 0.0.0.0/0) is advisory unless this is true.
    restrict_public_endpoint: bool = False


@dataclass(frozen=True)
class PlatformSpec:
    stack: str
    cloud: str
    region: str | None
    zones: tuple[str, ...]
    kubernetes_version: str
    manager_pool: NodePoolSpec
    gpu_pools: tuple[GpuPoolSpec, ...]
    # torchfleet:cpuPool; None: no CPU pool, so `submit --cpu` and every CPU pod of the CLI is refused on it.
    cpu_pool: CpuPoolSpec | None = None
    storage: StorageSpec = field(default_factory=StorageSpec)
    training: TrainingSpec = field(default_factory=TrainingSpec)
    network: NetworkSpec = field(default_factory=NetworkSpec)
    autoscaler: AutoscalerSpec = field(default_factory=AutoscalerSpec)
    guardrails: GuardrailSpec = field(default_factory=GuardrailSpec)
    project: str | None = None  # GCP project
    access: AccessSpec = field(default_factory=AccessSpec)
    # The credentials the cloud provider uses (aws:profile, the role of aws:assumeRoles), so the
    # kubeconfig authenticates as the same identity.
    aws_profile: str | None = None
    aws_role_arn: str | None = None
    # Buckets jobs may mount read-only (torchfleet:datasets; spec/datasets.py).
    datasets: tuple[DatasetSpec, ...] = ()
    # EKS's upgrade policy (torchfleet:kubernetesSupport, AWS only): STANDARD lets EKS upgrade the
    # minor at the end of its standard support rather than bill extended support (clouds/aws/cluster.py).
    kubernetes_support: str = "STANDARD"

    @property
    def traits(self) -> CloudTraits:
        return CLOUD_TRAITS[self.cloud]

    @property
    def max_gpus(self) -> int:
        """The most GPUs the stack can reach with every pool at its maximum."""
        return sum(p.max_nodes * p.gpus_per_node for p in self.gpu_pools)
