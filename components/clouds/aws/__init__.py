"""AWS: EKS with an on-demand manager group per zone, spot GPU pools per (GPU, zone), EFS, the autoscaler."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.clouds import offline_preview
from components.clouds.aws import admins as aws_admins
from components.clouds.aws import live
from components.clouds.aws.addons import create_addon
from components.clouds.aws.autoscaling import EksAutoscaling
from components.clouds.aws.cluster import EksControlPlane
from components.clouds.aws.datasets import S3Datasets
from components.clouds.aws.ebs import STORAGE_CLASS, EbsVolumes
from components.clouds.aws.efs import EfsStore
from components.clouds.aws.network import AwsNetwork
from components.clouds.aws.nodegroups import EksNodeGroups
from components.clouds.base import ClusterHandle
from components.spec import LABEL_POOL, MANAGER_POOL_NAME, ConfigError, PlatformSpec


def deployer_arn() -> str:
    """The IAM identity running `pulumi up`, as an access entry names it (checked against torchfleet:admins,
    admins.py; never granted anything by itself): the role, not the assumed-role session (terraform-aws-eks
    main.tf reads aws_iam_session_context's issuer_arn the same way; hashicorp/terraform-provider-aws#28381)."""
    return aws.iam.get_session_context(arn=aws.get_caller_identity().arn).issuer_arn


def cluster_name_for(stack: str) -> str:
    # Deterministic: the subnet and Auto Scaling group tags must name the cluster before it exists.
    return f"torchfleet-{stack}"


class AwsCluster(pulumi.ComponentResource):
    def __init__(self, name: str, spec: PlatformSpec, opts: pulumi.ResourceOptions | None = None):
        super().__init__("torchfleet:clouds:AwsCluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        cluster_name = cluster_name_for(spec.stack)
        identity = aws.get_caller_identity_output()
        partition = aws.get_partition().partition
        # The running cluster, if any (live.py): what EKS would refuse is refused here, in the preview.
        running = live.read(cluster_name)
        # torchfleet:admins is the one source of cluster admins (admins.py): a real `up` by an identity it
        # does not list is refused before anything is created; a preview (the CI role's) never asks.
        caller = aws_admins.caller_problem(deployer_arn(), spec.access.admins) if aws_admins.running_up() else None
        problems = [
            f"{key}: {why}"
            for key, why in (
                ("torchfleet:kubernetesVersion", live.version_problem(running, spec.kubernetes_version)),
                ("torchfleet:zones", live.zone_problem(running, spec.zones, spec.network.cluster_zones)),
                (aws_admins.KEY, caller),
            )
            if why
        ]
        if problems:
            raise ConfigError(problems)
        cluster_zones = live.cluster_zones(running, spec.zones, spec.network.cluster_zones)

        network = AwsNetwork(f"{name}-network", spec, cluster_name, cluster_zones, child)
        subnets = network.private_subnets
        control = EksControlPlane(
            f"{name}-control",
            spec,
            cluster_name,
            [subnets[z].id for z in sorted(cluster_zones)],  # a set to EKS: sorted, so a reorder is no diff
            partition,
            child,
        )
        # Nodes join once the CNI enforces network policies, and once they can reach the internet
        # through the NAT (on destroy, the NAT goes only after them).
        nodes = EksNodeGroups(
            f"{name}-nodes", spec, control.cluster, subnets, partition, [control.vpc_cni, *network.egress], running,
            child,
        )
        node_groups = [*nodes.managers.values(), *nodes.cpu_groups.values(), *nodes.gpu_groups.values()]
        control.create_node_addons(f"{name}-control", spec, node_groups)
        # A Deployment: ACTIVE only once nodes run it (cluster.py has kube-proxy and the CNI).
        coredns = create_addon(
            f"{name}-coredns",
            parent=self,
            cluster=control.cluster,
            addon="coredns",
            kubernetes_version=spec.kubernetes_version,
            depends_on=node_groups,
            resolve_conflicts_on_create="OVERWRITE",
        )
        efs = EfsStore(
            f"{name}-efs",
            spec,
            control.cluster,
            network.vpc,
            subnets,
            control.security_group_id,
            partition,
            node_groups,
            pulumi.ResourceOptions(parent=self, depends_on=[nodes]),
        )
        # The Kubernetes provider waits for the admins' access entries too: one of them may be
        # the identity running this `pulumi up`.
        provider = k8s.Provider(
            f"{name}-k8s",
            # A loopback kubeconfig only in a preview asked to run without the cluster (offline_preview.py).
            kubeconfig=offline_preview.provider_kubeconfig(control.kubeconfig),
            cluster_identifier=control.cluster.arn,  # components/clouds/lifecycle.py, "clusterIdentifier"
            opts=pulumi.ResourceOptions(parent=self, depends_on=[nodes, *control.admins]),
        )
        autoscaling = EksAutoscaling(
            f"{name}-autoscaling",
            spec,
            control.cluster,
            cluster_name,
            [*nodes.asg_names, *nodes.manager_asg_names],
            identity.account_id,
            partition,
            [*node_groups, control.pod_identity_agent],
            pulumi.ResourceOptions(parent=self, providers=[provider]),
        )
        ebs = EbsVolumes(
            f"{name}-ebs",
            control.cluster,
            spec.kubernetes_version,
            partition,
            provider,
            control.kubeconfig,
            node_groups,
            # On destroy the EBS controller still deletes volumes while the settle step waits: it
            # resolves the EC2 endpoint through CoreDNS and gets its credentials from the Pod Identity
            # agent, so both go only after the wait (issue 29). The wait itself reads the API server as
            # the deployer: its access entries, their cluster-admin policies and the private path's 443
            # rules (control.admins) go only after it too, or the last Kubernetes object's delete frees
            # them while the wait still polls, and every poll is refused (401/403) until it times out.
            [coredns, control.pod_identity_agent, *control.admins],
            pulumi.ResourceOptions(parent=self),
        )
        # Buckets jobs mount read-only (torchfleet:datasets): the S3 CSI add-on runs on the nodes,
        # and the training pods' credentials come through the Pod Identity agent.
        datasets = (
            S3Datasets(f"{name}-datasets", spec, control.cluster, partition,
                       [*node_groups, control.pod_identity_agent], child)
            if spec.datasets else None
        )
        self.handle = ClusterHandle(
            name=control.cluster.name,
            kubeconfig=control.kubeconfig,
            provider=provider,
            zones=spec.zones,
            gpu_pools=spec.gpu_pools,
            store=efs.store,
            manager_selector={LABEL_POOL: MANAGER_POOL_NAME},
            storage_class=STORAGE_CLASS,
            # The autoscaler too: the control pods (etcd's three members) may need a second manager
            # node, which only it adds (AWS review M7).
            ready=[
                nodes, coredns, efs.csi_addon, *efs.mount_targets, autoscaling.autoscaler, autoscaling.device_plugin,
                ebs.storage_class,
            ],
            outputs={"region": spec.region, "fileSystemId": efs.file_system.id},
            datasets=datasets.access if datasets else None,
        )
        self.register_outputs({"clusterName": control.cluster.name, "fileSystemId": efs.file_system.id})
