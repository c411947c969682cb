"""The EKS control plane: KMS-encrypted secrets, control-plane logs, private endpoint on, public
endpoint limited to configured CIDRs, and admin access for the identity that deploys it."""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws

from components.clouds.aws import iam
from components.clouds.aws.options import cluster_options
from components.spec import PlatformSpec

# All five control-plane log types: audit and authenticator logs are what an incident needs.
# https://docs.aws.amazon.com/eks/latest/userguide/control-plane-logs.html
CONTROL_PLANE_LOGS = ["api", "audit", "authenticator", "controllerManager", "scheduler"]
LOG_RETENTION_DAYS = 90
VPC_CNI_ADDON_VERSION = "v1.19.2-eksbuild.1"  # network policy enforcement needs >= 1.14


def kubeconfig(cluster_name: str, endpoint: str, ca_data: str, region: str) -> str:
    """A kubeconfig that authenticates with `aws eks get-token` (no static credentials in it)."""
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": cluster_name, "cluster": {"server": endpoint, "certificate-authority-data": ca_data}}
            ],
            "contexts": [{"name": cluster_name, "context": {"cluster": cluster_name, "user": cluster_name}}],
            "current-context": cluster_name,
            "users": [
                {
                    "name": cluster_name,
                    "user": {
                        "exec": {
                            "apiVersion": "client.authentication.k8s.io/v1beta1",
                            "command": "aws",
                            "args": ["eks", "get-token", "--cluster-name", cluster_name, "--region", region],
                            "interactiveMode": "Never",
                        }
                    },
                }
            ],
        }
    )


class EksControlPlane(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        spec: PlatformSpec,
        cluster_name: str,
        subnet_ids: list[pulumi.Input[str]],
        partition: str,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("torchfleet:clouds:EksControlPlane", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        key = aws.kms.Key(
            f"{name}-secrets-key",
            description=f"Envelope encryption of Kubernetes secrets in {cluster_name}",
            enable_key_rotation=True,
            deletion_window_in_days=30,
            opts=child,
        )
        # Created before the cluster so EKS writes into a group with a retention, not a forever one.
        logs = aws.cloudwatch.LogGroup(
            f"{name}-logs",
            name=f"/aws/eks/{cluster_name}/cluster",
            retention_in_days=LOG_RETENTION_DAYS,
            opts=child,
        )
        role = aws.iam.Role(f"{name}-role", assume_role_policy=iam.assume_role_policy("eks.amazonaws.com"), opts=child)
        attachments = [
            aws.iam.RolePolicyAttachment(
                f"{name}-role-{policy}",
                role=role.name,
                policy_arn=iam.managed_policy_arn(partition, policy),
                opts=child,
            )
            for policy in iam.CLUSTER_MANAGED_POLICIES
        ]
        self.cluster = aws.eks.Cluster(
            f"{name}-eks",
            name=cluster_name,
            version=spec.kubernetes_version,
            role_arn=role.arn,
            vpc_config={
                "subnet_ids": subnet_ids,
                "endpoint_private_access": True,
                "endpoint_public_access": bool(spec.network.public_access_cidrs),
                "public_access_cidrs": list(spec.network.public_access_cidrs) or None,
            },
            access_config={
                # Access entries only (no aws-auth ConfigMap); the deploying identity becomes admin.
                "authentication_mode": "API",
                "bootstrap_cluster_creator_admin_permissions": True,
            },
            encryption_config={"provider": {"key_arn": key.arn}, "resources": ["secrets"]},
            enabled_cluster_log_types=CONTROL_PLANE_LOGS,
            tags={"torchfleet.io/stack": spec.stack},
            opts=pulumi.ResourceOptions.merge(
                cluster_options(self, protect=False), pulumi.ResourceOptions(depends_on=[logs, *attachments])
            ),
        )
        # The VPC CNI enforces NetworkPolicy only when its add-on says so; without this the
        # training namespace's default-deny would be accepted and ignored.
        # https://docs.aws.amazon.com/eks/latest/userguide/cni-network-policy-configure.html
        self.vpc_cni = aws.eks.Addon(
            f"{name}-vpc-cni",
            cluster_name=self.cluster.name,
            addon_name="vpc-cni",
            addon_version=VPC_CNI_ADDON_VERSION,
            configuration_values=json.dumps({"enableNetworkPolicy": "true"}),
            # EKS installs a self-managed VPC CNI with the cluster; the add-on takes it over.
            resolve_conflicts_on_create="OVERWRITE",
            opts=child,
        )
        # Pods talk to AWS through EKS Pod Identity (the agent is an EKS add-on).
        self.pod_identity_agent = aws.eks.Addon(
            f"{name}-pod-identity-agent",
            cluster_name=self.cluster.name,
            addon_name="eks-pod-identity-agent",
            addon_version="v1.3.8-eksbuild.2",
            opts=child,
        )
        region = spec.region or ""
        self.kubeconfig = pulumi.Output.secret(
            pulumi.Output.all(self.cluster.name, self.cluster.endpoint, self.cluster.certificate_authority.data).apply(
                lambda a: kubeconfig(a[0], a[1], a[2], region)
            )
        )
        self.security_group_id = self.cluster.vpc_config.cluster_security_group_id
        self.register_outputs({"clusterName": self.cluster.name})
