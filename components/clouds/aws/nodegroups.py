"""Managed node groups: the on-demand manager pool and the GPU pools, one group per zone each.

GPU groups scale from zero. The cluster autoscaler cannot see a node that does not exist, so it
reads the would-be node's labels, taints and GPU count from tags on the Auto Scaling group;
managed node group tags do not reach the group, so they are written as aws.autoscaling.Tag
resources (https://github.com/kubernetes/autoscaler/blob/master/cluster-autoscaler/cloudprovider/aws/README.md#auto-discovery-setup).
"""

from __future__ import annotations

import re

import pulumi
import pulumi_aws as aws

from components.clouds.aws import iam
from components.clouds.aws.live import LiveCluster, desired_size, keeps_recorded_size
from components.clouds.aws.options import nodegroup_options
from components.spec import (
    CPU_POOL_NAME,
    CPU_TAINT,
    GPU_RESOURCE,
    GPU_TAINT,
    LABEL_POOL,
    MANAGER_POOL_NAME,
    MANAGER_TAINTS,
    CpuPoolSpec,
    GpuPoolSpec,
    PlatformSpec,
)

# https://docs.aws.amazon.com/eks/latest/APIReference/API_Nodegroup.html#AmazonEKS-Type-Nodegroup-amiType
# AL2 GPU AMIs are retired; the AL2023 NVIDIA AMI has the driver, not the device plugin.
GPU_AMI = "AL2023_x86_64_NVIDIA"
MANAGER_AMI = "AL2023_x86_64_STANDARD"
ASG_TAG_PREFIX = "k8s.io/cluster-autoscaler/node-template"
# The label the AWS cluster autoscaler reads to know a node has a GPU before the device plugin
# advertises it; without it the autoscaler counts a fresh GPU node as ready-but-useless and
# launches more (cluster-autoscaler/cloudprovider/aws/README.md "Special note on GPU instances";
# aws_cloud_provider.go GPULabel). Its value is free text: the GPU type.
ACCELERATOR_LABEL = "k8s.amazonaws.com/accelerator"
# EKS appends 26 characters to a node group name prefix (the provider's unique suffix).
NAME_PREFIX_SUFFIX = 26


def manager_zone_sizes(zones: tuple[str, ...], min_nodes: int, max_nodes: int) -> dict[str, tuple[int, int]]:
    """managerPool's minNodes and maxNodes split over one node group per zone, (min, max) each.

    One Auto Scaling group per zone, not one over every zone: etcd's members keep their data on
    zonal EBS volumes, and for a multi-zone group the autoscaler builds its template node from the
    first zone only and cannot choose the zone it grows into, so a member whose node is lost could
    stay Pending for good ("either use a single AZ ASG for this use case, or an ASG-per-AZ":
    cluster-autoscaler/cloudprovider/aws/README.md, "Common Notes and Gotchas"; AWS review M7).
    The totals stay the user's: the zones first in letter order take the remainder (never the list's
    order: reordering torchfleet:zones must not resize groups, issue 29), and a zone whose share of
    maxNodes is 0 gets no group (EKS needs maxSize >= 1), so no etcd volume can land there."""
    n = len(zones)
    sizes = {}
    for i, zone in enumerate(sorted(zones)):
        lo, hi = min_nodes // n + (i < min_nodes % n), max_nodes // n + (i < max_nodes % n)
        if hi:
            sizes[zone] = (lo, hi)
    return sizes


def manager_group_name(zone: str) -> str:
    return f"{MANAGER_POOL_NAME}-{zone}"


# CriticalAddonsOnly=true:NoSchedule (spec/model.py MANAGER_TAINTS says why this key on EKS).
MANAGER_TAINT = MANAGER_TAINTS["aws"]


def manager_template_tags() -> dict[str, str]:
    """A manager group may start at zero nodes in its zone; the control pods select the manager
    label and tolerate its taint, so the autoscaler's template node must carry both (same mechanism as
    the GPU pools): without the taint tag the template promises room to any pod, and the autoscaler
    would add a manager node for a pod that can never run there."""
    return {
        f"{ASG_TAG_PREFIX}/label/{LABEL_POOL}": MANAGER_POOL_NAME,
        f"{ASG_TAG_PREFIX}/taint/{MANAGER_TAINT['key']}": f"{MANAGER_TAINT['value']}:{MANAGER_TAINT['effect']}",
    }


def cpu_group_name(zone: str) -> str:
    return f"{CPU_POOL_NAME}-{zone}"


def cpu_template_tags(pool: CpuPoolSpec) -> dict[str, str]:
    """The CPU pool scales from zero: its template node carries the label the CLI's CPU pods select, the taint
    they tolerate, and the ephemeral storage (as the GPU pools': scale_from_zero_tags says why)."""
    tags = {f"{ASG_TAG_PREFIX}/label/{k}": v for k, v in pool.labels.items()}
    tags[f"{ASG_TAG_PREFIX}/taint/{CPU_TAINT['key']}"] = f"{CPU_TAINT['value']}:{CPU_TAINT['effect']}"
    tags[f"{ASG_TAG_PREFIX}/resources/ephemeral-storage"] = template_ephemeral_storage(pool.disk_size_gb)
    return tags


def gpu_labels(pool: GpuPoolSpec) -> dict[str, str]:
    """The contract labels plus the autoscaler's accelerator label (kubelet may set it: its domain
    is not kubernetes.io or k8s.io, so NodeRestriction allows it)."""
    return {**pool.labels, ACCELERATOR_LABEL: f"nvidia-{pool.gpu}"}


def tag_resource_suffix(key: str) -> str:
    """A tag resource's name from its key, never its position: a label added or removed must not
    shift every later tag to another resource (AWS review m3: two parallel updates could delete the
    key the other had just written)."""
    return re.sub(r"[^a-z0-9]+", "-", key.removeprefix(ASG_TAG_PREFIX + "/").lower()).strip("-")


def taint_for_eks(taint: dict[str, str]) -> dict[str, str]:
    return {"key": taint["key"], "value": taint["value"], "effect": "NO_SCHEDULE"}


# The share of the node's root file system the kubelet leaves allocatable to pods: its default
# hard eviction threshold is nodefs.available<10%
# (https://kubernetes.io/docs/concepts/scheduling-eviction/node-pressure-eviction/#hard-eviction-thresholds).
EPHEMERAL_ALLOCATABLE_SHARE = 0.9


def template_ephemeral_storage(disk_size_gb: int) -> str:
    """The ephemeral storage a template node offers, never more than a real node will: the root
    volume less the kubelet's eviction reserve, rounded down to whole GiB."""
    return f"{int(disk_size_gb * EPHEMERAL_ALLOCATABLE_SHARE)}Gi"


def scale_from_zero_tags(pool: GpuPoolSpec) -> dict[str, str]:
    """The Auto Scaling group tags that let the cluster autoscaler build a template node.

    The autoscaler takes cpu, memory and pods from the instance type and every other resource
    only from a resources/ tag (aws_manager.go buildNodeFromTemplate, extractAllocatableResourcesFromAsg):
    without the ephemeral-storage tag a template node has none, and a pod that requests any never
    scales a pool up from zero (AWS review m8)."""
    tags = {f"{ASG_TAG_PREFIX}/label/{k}": v for k, v in gpu_labels(pool).items()}
    tags[f"{ASG_TAG_PREFIX}/taint/{GPU_TAINT['key']}"] = f"{GPU_TAINT['value']}:{GPU_TAINT['effect']}"
    tags[f"{ASG_TAG_PREFIX}/resources/{GPU_RESOURCE}"] = str(pool.gpus_per_node)
    tags[f"{ASG_TAG_PREFIX}/resources/ephemeral-storage"] = template_ephemeral_storage(pool.disk_size_gb)
    return tags


def launch_template_args(disk_size_gb: int) -> dict:
    """IMDSv2 only, hop limit 1, encrypted gp3 root volume.

    Hop limit 1 keeps pods (one network hop further away) off the node role's credentials;
    our add-ons get their own through EKS Pod Identity, and node agents use the host network.
    https://docs.aws.amazon.com/eks/latest/best-practices/identity-and-access-management.html#_restrict_access_to_the_instance_profile_assigned_to_the_worker_node
    """
    return {
        "metadata_options": {
            "http_endpoint": "enabled",
            "http_tokens": "required",
            "http_put_response_hop_limit": 1,
        },
        "block_device_mappings": [
            {
                "device_name": "/dev/xvda",
                "ebs": {
                    "volume_size": disk_size_gb,
                    "volume_type": "gp3",
                    "encrypted": "true",
                    "delete_on_termination": "true",
                },
            }
        ],
        # No network_interfaces: nodes get no public IP (private subnets, map_public_ip_on_launch off).
        "update_default_version": True,
    }


class EksNodeGroups(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        spec: PlatformSpec,
        cluster: aws.eks.Cluster,
        subnets: dict[str, aws.ec2.Subnet],
        partition: str,
        wait_for: list[pulumi.Resource],
        running: LiveCluster | None,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("torchfleet:clouds:EksNodeGroups", name, None, opts)
        self._running, self._version = running, spec.kubernetes_version
        child = pulumi.ResourceOptions(parent=self)
        role = aws.iam.Role(
            f"{name}-node-role", assume_role_policy=iam.assume_role_policy("ec2.amazonaws.com"), opts=child
        )
        attachments = [
            aws.iam.RolePolicyAttachment(
                f"{name}-node-role-{p}", role=role.name, policy_arn=iam.managed_policy_arn(partition, p), opts=child
            )
            for p in iam.NODE_MANAGED_POLICIES
        ]
        self._prefix, self._cluster, self._role, self._deps = name, cluster, role, [*attachments, *wait_for]
        manager = spec.manager_pool
        self.managers: dict[str, aws.eks.NodeGroup] = {}
        self.manager_asg_names: list[pulumi.Output[str]] = []
        for zone, (lo, hi) in manager_zone_sizes(spec.zones, manager.min_nodes, manager.max_nodes).items():
            group_name = manager_group_name(zone)
            group = self._create_group(
                group_name,
                subnet_ids=[subnets[zone].id],
                instance_types=[manager.machine_type],
                capacity_type="ON_DEMAND",
                ami_type=MANAGER_AMI,
                min_nodes=lo,
                max_nodes=hi,
                disk_size_gb=manager.disk_size_gb,
                labels={LABEL_POOL: MANAGER_POOL_NAME},
                # In place on an existing group: EKS's UpdateNodegroupConfig takes taints (below).
                taints=[taint_for_eks(MANAGER_TAINT)],
            )
            self.managers[zone] = group
            self.manager_asg_names.append(self._tag_asg(group_name, group, manager_template_tags()))
        self.gpu_groups: dict[str, aws.eks.NodeGroup] = {}
        self.asg_names: list[pulumi.Output[str]] = []
        # torchfleet:cpuPool, one group per zone as the manager pool's (a pod of one zone needs a group the
        # autoscaler can grow there), the totals split the same way; names cpu-<zone>, as fixed as the pools'.
        self.cpu_groups: dict[str, aws.eks.NodeGroup] = {}
        cpu = spec.cpu_pool
        for zone, (lo, hi) in (manager_zone_sizes(cpu.zones, cpu.min_nodes, cpu.max_nodes) if cpu else {}).items():
            group_name = cpu_group_name(zone)
            group = self._create_group(
                group_name,
                subnet_ids=[subnets[zone].id],
                instance_types=[cpu.machine_type],
                capacity_type="SPOT" if cpu.spot else "ON_DEMAND",
                ami_type=MANAGER_AMI,
                min_nodes=lo,
                max_nodes=hi,
                disk_size_gb=cpu.disk_size_gb,
                labels=cpu.labels,
                taints=[taint_for_eks(CPU_TAINT)],
            )
            self.cpu_groups[zone] = group
            self.asg_names.append(self._tag_asg(group_name, group, cpu_template_tags(cpu)))
        for pool in spec.gpu_pools:
            group = self._create_group(
                pool.name,
                subnet_ids=[subnets[pool.zone].id],  # one zone per pool: jobs stay in one zone
                instance_types=pool.machine_types,
                capacity_type="SPOT" if pool.spot else "ON_DEMAND",
                ami_type=GPU_AMI,
                min_nodes=pool.min_nodes,
                max_nodes=pool.max_nodes,
                disk_size_gb=pool.disk_size_gb,
                labels=gpu_labels(pool),
                taints=[taint_for_eks(GPU_TAINT)],
            )
            self.gpu_groups[pool.name] = group
            self.asg_names.append(self._tag_asg(pool.name, group, scale_from_zero_tags(pool)))
        self.register_outputs({"gpuPools": list(self.gpu_groups), "managerZones": list(self.managers),
                               "cpuZones": list(self.cpu_groups)})

    def _tag_asg(self, pool_name: str, group: aws.eks.NodeGroup, tags: dict[str, str]) -> pulumi.Output[str]:
        """Writes the autoscaler's template tags on the group's Auto Scaling group; returns its name."""
        asg_name = group.resources.apply(lambda r: r[0].autoscaling_groups[0].name)
        for key, value in sorted(tags.items()):
            aws.autoscaling.Tag(
                f"{self._prefix}-{pool_name}-{tag_resource_suffix(key)}",
                autoscaling_group_name=asg_name,
                tag={"key": key, "value": value, "propagate_at_launch": False},
                # One tag per key on the group: a replacement written first would be deleted
                # with the old resource (torchfleet/preview/plans.py UNIQUE_BY).
                opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True),
            )
        return asg_name

    def _create_group(
        self,
        pool_name: str,
        *,
        subnet_ids: list,
        instance_types: list[str],
        capacity_type: str,
        ami_type: str,
        min_nodes: int,
        max_nodes: int,
        disk_size_gb: int,
        labels: dict[str, str],
        taints: list[dict],
    ) -> aws.eks.NodeGroup:
        name = self._prefix
        template = aws.ec2.LaunchTemplate(
            f"{name}-{pool_name}-lt",
            **launch_template_args(disk_size_gb),
            tag_specifications=[{"resource_type": "instance", "tags": {"torchfleet.io/pool": pool_name}}],
            opts=pulumi.ResourceOptions(parent=self),
        )
        return aws.eks.NodeGroup(
            f"{name}-{pool_name}",
            cluster_name=self._cluster.name,
            # A prefix, not a fixed name: a change EKS cannot make in place (instance types,
            # capacity type, AMI type, subnets; UpdateNodegroupConfig changes only labels, taints,
            # scaling and update config) replaces the group, and Pulumi creates the new one before
            # deleting the old: a fixed name would fail "already exists". terraform-aws-eks does the
            # same (node_group_name_prefix). The autoscaler's regexes .*-<pool>-.* still match the
            # Auto Scaling group eks-<pool>-<suffix>-<uuid>.
            node_group_name_prefix=f"{pool_name}-",
            node_role_arn=self._role.arn,
            subnet_ids=subnet_ids,
            instance_types=instance_types,
            capacity_type=capacity_type,
            ami_type=ami_type,
            scaling_config={
                "min_size": min_nodes,
                "max_size": max_nodes,
                "desired_size": desired_size(self._running, pool_name, min_nodes, max_nodes),
            },
            # The cluster's minor, so a Kubernetes upgrade moves the nodes right after the control
            # plane (UpdateNodegroupVersion; EKS refuses the next cluster upgrade while a group lags:
            # https://docs.aws.amazon.com/eks/latest/userguide/update-managed-node-group.html). Left
            # unset, the provider never sends it (node_group.go Update: only on a change of a set
            # value). No release_version: EKS takes the newest AMI of the minor when the group is
            # created or upgraded, and a newer AMI within the minor is a deliberate
            # `aws eks update-nodegroup-version` (docs/day-2-aws.md), never a surprise of `pulumi up`.
            version=self._version,
            update_config={"max_unavailable": 1},
            labels=labels,
            taints=taints,
            launch_template={"id": template.id, "version": template.latest_version.apply(str)},
            opts=nodegroup_options(
                self, self._deps, keeps_recorded_size(self._running, pool_name, min_nodes, max_nodes)),
        )
