"""The cluster autoscaler (pinned chart, image matching the cluster minor) with its own
least-privilege identity through EKS Pod Identity, and the NVIDIA device plugin."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
import yaml

from components.clouds.aws import iam
from components.clouds.aws.options import named_options
from components.spec import (
    GPU_TAINT,
    LABEL_GPU_PRESENT,
    LABEL_POOL,
    MANAGER_POOL_NAME,
    MANAGER_TAINTS,
    GpuPoolSpec,
    PlatformSpec,
)

# 9.54.0 or later: the autoscaler locks DRA on from 1.35 and watches resource.k8s.io
# (resourceslices, deviceclasses, resourceclaims), which the chart's ClusterRole grants from 9.54.0
# on (kubernetes/autoscaler#8827, commit d4a3ca1d). 9.59.0 is the newest chart tagged
# (cluster-autoscaler-chart-9.59.0, 2026-07-21); since 9.46.6 its AWS Deployment gained no flag the
# older images lack (only RBAC rules), so one chart serves every minor below.
AUTOSCALER_CHART = {
    "chart": "cluster-autoscaler",
    "version": "9.59.0",
    "repo": "https://kubernetes.github.io/autoscaler",
}
# The autoscaler must match the cluster's minor version:
# https://github.com/kubernetes/autoscaler/tree/master/cluster-autoscaler#releases
# Each minor's newest patch tagged in kubernetes/autoscaler (tags cluster-autoscaler-1.31.5 ...
# cluster-autoscaler-1.36.1, read 2026-11-23; 1.33.6-1.36.1 released 2026-07-22/23), published as
# registry.k8s.io/autoscaling/cluster-autoscaler images of the same tag. Patches carry the
# minor's security and bug fixes, so the newest is the one to run.
AUTOSCALER_IMAGE_TAGS = {
    "1.31": "v1.31.5",
    "1.32": "v1.32.7",
    "1.33": "v1.33.6",
    "1.34": "v1.34.5",
    "1.35": "v1.35.2",
    "1.36": "v1.36.1",
}
AUTOSCALER_SA = "cluster-autoscaler"
# NVIDIA/k8s-device-plugin v0.20.0, tagged 2026-08-19 (460230bc), the newest release when read on
# 2026-11-26; chart 0.20.0 is in the chart repository's index (gh-pages bf584288, 2026-08-20). Its
# values keep the keys set here and the default affinity on nvidia.com/gpu.present (git diff
# v0.17.1 v0.20.0 -- deployments/helm/nvidia-device-plugin). The same pin as Azure's (device_plugin.py).
DEVICE_PLUGIN_CHART = {
    "chart": "nvidia-device-plugin",
    "version": "0.20.0",
    "repo": "https://nvidia.github.io/k8s-device-plugin",
}

# Priority expander: higher wins. Spot pools first; on-demand GPU pools only when no spot
# pool can fit the pending pods (e.g. spot capacity is out in every zone).
SPOT_PRIORITY, ON_DEMAND_PRIORITY, FALLBACK_PRIORITY = 50, 10, 1


def expander_priorities(pools: tuple[GpuPoolSpec, ...]) -> dict[int, list[str]]:
    """Regexes over Auto Scaling group names (EKS names them eks-<nodegroup>-<uuid>)."""
    # Sorted: reordering torchfleet:zones must not rewrite the ConfigMap (issue 29).
    spot = sorted(f".*-{p.name}-.*" for p in pools if p.spot)
    on_demand = sorted(f".*-{p.name}-.*" for p in pools if not p.spot)
    priorities: dict[int, list[str]] = {FALLBACK_PRIORITY: [".*"]}
    if spot:
        priorities[SPOT_PRIORITY] = spot
    if on_demand:
        priorities[ON_DEMAND_PRIORITY] = on_demand
    return priorities


def autoscaler_values(spec: PlatformSpec, cluster_name: str) -> dict:
    return {
        "cloudProvider": "aws",
        "awsRegion": spec.region,
        "autoDiscovery": {"clusterName": cluster_name},
        "image": {"tag": AUTOSCALER_IMAGE_TAGS[spec.kubernetes_version]},
        "rbac": {"serviceAccount": {"create": True, "name": AUTOSCALER_SA}},
        "nodeSelector": {LABEL_POOL: MANAGER_POOL_NAME},
        # The manager groups' taint (nodegroups.py MANAGER_TAINT): the chart's tolerations value, empty by default.
        "tolerations": [{"key": MANAGER_TAINTS["aws"]["key"], "operator": "Equal",
                         "value": MANAGER_TAINTS["aws"]["value"], "effect": MANAGER_TAINTS["aws"]["effect"]}],
        # As YAML text: the ConfigMap's keys are integers, which a values map cannot carry
        # (https://github.com/kubernetes/autoscaler/blob/master/cluster-autoscaler/expander/priority/readme.md).
        "expanderPriorities": yaml.safe_dump(expander_priorities(spec.gpu_pools), sort_keys=True),
        "extraArgs": {
            "expander": "priority",
            # No balancing across the zonal pools of one GPU: a job keeps all its pods in one zone,
            # so a scale-up split over zones (what balancing does: cluster-autoscaler FAQ, "balance
            # similar node groups") adds nodes the job cannot use. It never worked here anyway: each
            # pool has its own launch template, and EKS labels nodes with its id and version, which
            # the AWS comparator does not ignore (processors/nodegroupset/aws_nodegroups.go; AWS review m2).
            "balance-similar-node-groups": False,
            "skip-nodes-with-local-storage": False,
            "scale-down-unneeded-time": spec.autoscaler.scale_down_unneeded_time,
            "scale-down-delay-after-add": spec.autoscaler.scale_down_delay_after_add,
        },
        "podDisruptionBudget": {"maxUnavailable": 1},
        "priorityClassName": "system-cluster-critical",
    }


def device_plugin_values() -> dict:
    """The plugin must run on the tainted GPU nodes, and only there."""
    return {
        "nodeSelector": {LABEL_GPU_PRESENT: "true"},
        "tolerations": [
            {"key": GPU_TAINT["key"], "operator": "Exists", "effect": "NoSchedule"},
            {"key": "CriticalAddonsOnly", "operator": "Exists"},
        ],
        "priorityClassName": "system-node-critical",
    }


class EksAutoscaling(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        spec: PlatformSpec,
        cluster: aws.eks.Cluster,
        cluster_name: str,
        asg_names: list[pulumi.Output[str]],
        account: pulumi.Input[str],
        partition: str,
        wait_for: list[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ):
        """`wait_for`: the node groups and the Pod Identity agent. Passed to the releases
        themselves: a component's depends_on does not reach its children (AWS review m1)."""
        super().__init__("torchfleet:clouds:EksAutoscaling", name, None, opts)
        self._prefix = name
        child = pulumi.ResourceOptions(parent=self)
        region = spec.region or ""
        role = aws.iam.Role(f"{name}-autoscaler-role", assume_role_policy=iam.pod_identity_trust_policy(), opts=child)
        self.policy = aws.iam.RolePolicy(
            f"{name}-autoscaler-policy",
            role=role.id,
            policy=pulumi.Output.all(account, cluster.name, *asg_names).apply(
                # Sorted: the zones' order in the stack config must not rewrite the policy (issue 29).
                lambda a: iam.cluster_autoscaler_policy(partition, region, a[0], a[1], sorted(a[2:]))
            ),
            opts=child,
        )
        identity = aws.eks.PodIdentityAssociation(
            f"{name}-autoscaler-identity",
            cluster_name=cluster.name,
            namespace="kube-system",
            service_account=AUTOSCALER_SA,
            role_arn=role.arn,
            opts=child,
        )
        self.autoscaler = self._create_release(
            "cluster-autoscaler",
            AUTOSCALER_CHART,
            autoscaler_values(spec, cluster_name),
            named_options(self, [identity, self.policy, *wait_for]),
        )
        self.device_plugin = self._create_release(
            "nvidia-device-plugin", DEVICE_PLUGIN_CHART, device_plugin_values(), named_options(self, wait_for)
        )
        self.register_outputs({})

    def _create_release(self, release: str, chart: dict, values: dict, opts: pulumi.ResourceOptions):
        """A pinned chart in kube-system (helm.v3.Release: its chart, version and values show under mocks)."""
        return k8s.helm.v3.Release(
            f"{self._prefix}-{release}",
            name=release,
            namespace="kube-system",
            chart=chart["chart"],
            version=chart["version"],
            repository_opts={"repo": chart["repo"]},
            values=values,
            opts=opts,
        )
