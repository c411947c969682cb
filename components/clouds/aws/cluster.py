"""The EKS control plane: KMS-encrypted secrets, control-plane logs, private endpoint on, public
endpoint limited to configured CIDRs, and admin access for every identity in torchfleet:admins (explicit
access entries; the one source of admins, the deployer listed like anyone: admins.py)."""

from __future__ import annotations

import hashlib
import json

import pulumi
import pulumi_aws as aws

from components.clouds.aws import iam
from components.clouds.aws.addons import create_addon
from components.clouds.aws.options import cluster_options, kept_options
from components.spec import PlatformSpec
from components.spec.access import RESEARCHERS_GROUP

# Audit and authenticator logs are what an incident needs (who did what, which IAM identity was
# which Kubernetes user). api (the API server's own log) is the largest stream on a busy cluster and
# controllerManager/scheduler are debugging aids: off, since CloudWatch bills every GB ingested
# (https://aws.amazon.com/cloudwatch/pricing/, "Vended Logs"); turn one on for an investigation with
# `aws eks update-cluster-config --logging`, and the next `pulumi up` turns it off again.
# https://docs.aws.amazon.com/eks/latest/userguide/control-plane-logs.html
CONTROL_PLANE_LOGS = ["audit", "authenticator"]
HTTPS = 443
LOG_RETENTION_DAYS = 90
# Cluster-wide admin for an access entry:
# https://docs.aws.amazon.com/eks/latest/userguide/access-policy-permissions.html
CLUSTER_ADMIN_POLICY = "arn:{partition}:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"


def token_args(cluster_name: str, region: str, profile: str | None = None, role_arn: str | None = None) -> list[str]:
    """`aws eks get-token` as the identity the Pulumi AWS provider uses.

    The exec plugin runs with the ambient credentials, not the provider's config: without
    --profile / --role-arn, a stack deployed with aws:profile or aws:assumeRoles would talk to the
    cluster as someone else (Unauthorized). pulumi-eks appends the same two flags
    (nodejs/eks/cluster/cluster.ts generateKubeconfig); --profile rather than AWS_PROFILE, which
    ambient credentials override.
    """
    args = ["eks", "get-token", "--cluster-name", cluster_name, "--region", region]
    if role_arn:
        args += ["--role-arn", role_arn]
    if profile:
        args += ["--profile", profile]
    return args


def kubeconfig(
    cluster_name: str, endpoint: str, ca_data: str, region: str, profile: str | None = None, role_arn: str | None = None
) -> str:
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
                            "args": token_args(cluster_name, region, profile, role_arn),
                            "interactiveMode": "Never",
                        }
                    },
                }
            ],
        }
    )


def vpc_config(spec: PlatformSpec, subnet_ids: list) -> dict:
    """The endpoints: the private one always on (nodes reach the API inside the VPC); the public one
    open to network.publicAccessCidrs, or off when the stack says network.privateOnly (spec/sections.py
    refuses an AWS stack that says neither: an endpoint unreachable from the `pulumi up` creating it).
    https://docs.aws.amazon.com/eks/latest/APIReference/API_VpcConfigRequest.html"""
    public = not spec.network.private_only
    return {
        "subnet_ids": subnet_ids,
        "endpoint_private_access": True,
        "endpoint_public_access": public,
        "public_access_cidrs": list(spec.network.public_access_cidrs) if public else None,
    }


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
        # Kept on destroy: EKS's service-linked role writes into it while the cluster is torn down
        # and recreates it if it is gone (terraform-aws-modules/terraform-aws-eks#920, #2486), so a
        # deleted group would make the next `pulumi up` of the stack fail "already exists"; kept,
        # storage.adopt imports it back (its audit logs expire after the retention either way).
        log_group = f"/aws/eks/{cluster_name}/cluster"
        logs = aws.cloudwatch.LogGroup(
            f"{name}-logs",
            name=log_group,
            retention_in_days=LOG_RETENTION_DAYS,
            opts=kept_options(self, True, log_group if spec.storage.adopt else None),
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
            vpc_config=vpc_config(spec, subnet_ids),
            access_config={
                # Access entries only (no aws-auth ConfigMap), every admin of torchfleet:admins an explicit
                # entry below, the deployer too when listed (terraform-aws-eks v20+: bootstrap false; its
                # caller helper, enable_cluster_creator_admin_permissions, is not followed: admins.py). With
                # EKS's own creator entry, an admin list naming the deployer failed with 409
                # ResourceInUseException, and the creator could never be removed. Create-only
                # (options.CLUSTER_CREATE_ONLY keeps an older cluster's true).
                "authentication_mode": "API",
                "bootstrap_cluster_creator_admin_permissions": False,
            },
            # STANDARD: at the end of the minor's standard support EKS upgrades the cluster instead
            # of billing extended support (EXTENDED is the API's default).
            # https://docs.aws.amazon.com/eks/latest/APIReference/API_UpgradePolicyRequest.html
            upgrade_policy={"support_type": spec.kubernetes_support},
            encryption_config={"provider": {"key_arn": key.arn}, "resources": ["secrets"]},
            enabled_cluster_log_types=CONTROL_PLANE_LOGS,
            tags={"torchfleet.io/stack": spec.stack},
            # Not protected, and the KMS key above neither: `pulumi destroy` must remove the cluster
            # (a protected resource fails the whole destroy). The key is scheduled for deletion
            # with a 30-day window (deletion_window_in_days), the safety net against a mistake
            # (`aws kms cancel-key-deletion`); KMS bills nothing while it is pending
            # (https://aws.amazon.com/kms/pricing/). It encrypts only this cluster's Secrets,
            # which go with the cluster; what destroy keeps uses no key of ours: EFS the AWS managed
            # aws/elasticfilesystem (efs.py sets no kms_key_id), the log group CloudWatch's own
            # encryption (AWS review m10; tests/components/clouds/aws/test_cluster.py).
            opts=cluster_options(self, depends_on=[logs, *attachments]),
        )
        # The VPC CNI enforces NetworkPolicy only when its add-on says so; without this the
        # training namespace's default-deny would be accepted and ignored.
        # https://docs.aws.amazon.com/eks/latest/userguide/cni-network-policy-configure.html
        # Network policy enforcement needs vpc-cni >= 1.14; every minor's default is newer.
        self.vpc_cni = create_addon(
            f"{name}-vpc-cni",
            parent=self,
            cluster=self.cluster,
            addon="vpc-cni",
            kubernetes_version=spec.kubernetes_version,
            configuration_values=json.dumps({"enableNetworkPolicy": "true"}),
            # EKS installs a self-managed VPC CNI with the cluster; the add-on takes it over.
            resolve_conflicts_on_create="OVERWRITE",
        )
        self.security_group_id = self.cluster.vpc_config.cluster_security_group_id
        # network.privateAccessCidrs: the VPN, peered or bastion networks `pulumi up` runs from when the
        # endpoint is private. EKS's cluster security group admits only itself by default, so the
        # private endpoint answers nothing outside the cluster without these rules.
        # https://docs.aws.amazon.com/eks/latest/userguide/cluster-endpoint.html (accessing a private-only endpoint)
        self.private_access = [
            aws.vpc.SecurityGroupIngressRule(
                f"{name}-api-from-{cidr.replace('/', '-').replace('.', '-')}",
                security_group_id=self.security_group_id,
                cidr_ipv4=cidr,
                ip_protocol="tcp",
                from_port=HTTPS,
                to_port=HTTPS,
                description="Kubernetes API from the deployer network",
                opts=child,
            )
            for cidr in spec.network.private_access_cidrs
        ]
        self.admins = [*self._create_admins(name, spec.access.admins, partition), *self.private_access]
        self.researchers = self._create_researchers(name, spec.access.researchers)
        region = spec.region or ""
        profile, role_arn = spec.aws_profile, spec.aws_role_arn
        self.kubeconfig = pulumi.Output.secret(
            pulumi.Output.all(self.cluster.name, self.cluster.endpoint, self.cluster.certificate_authority.data).apply(
                lambda a: kubeconfig(a[0], a[1], a[2], region, profile, role_arn)
            )
        )
        self.register_outputs({"clusterName": self.cluster.name})

    def create_node_addons(self, name: str, spec: PlatformSpec, node_groups: list[pulumi.Resource]) -> None:
        """kube-proxy and the Pod Identity agent, after the node groups.

        kube-proxy comes with the cluster as a self-managed copy that nothing upgrades with the control
        plane; as an add-on EKS keeps it at its version for the minor (AWS review m7). On a minor
        upgrade EKS's order is the control plane, then the nodes, then the add-ons
        (https://docs.aws.amazon.com/eks/latest/userguide/update-cluster.html; kube-proxy may not be
        newer than the nodes' kubelet: https://docs.aws.amazon.com/eks/latest/userguide/managing-kube-proxy.html),
        which Pulumi follows when they depend on the node groups; terraform-aws-eks orders its add-ons
        the same way (main.tf aws_eks_addon depends_on the node groups; only before_compute ones, the
        VPC CNI here, go first). Created by the control plane component (their parent), as before.
        """
        self.kube_proxy = create_addon(
            f"{name}-kube-proxy",
            parent=self,
            cluster=self.cluster,
            addon="kube-proxy",
            kubernetes_version=spec.kubernetes_version,
            depends_on=node_groups,
            resolve_conflicts_on_create="OVERWRITE",
        )
        # Pods talk to AWS through EKS Pod Identity (the agent is an EKS add-on).
        self.pod_identity_agent = create_addon(
            f"{name}-pod-identity-agent",
            parent=self,
            cluster=self.cluster,
            addon="eks-pod-identity-agent",
            kubernetes_version=spec.kubernetes_version,
            depends_on=node_groups,
        )

    def _create_admins(self, name: str, admins: tuple[str, ...], partition: str) -> list[pulumi.Resource]:
        """An access entry and the cluster-admin policy for each identity of torchfleet:admins.

        Explicit resources, as terraform-aws-eks makes them: a teammate's or CI's role can run the
        next `pulumi up` (its Kubernetes provider would otherwise get Unauthorized).
        https://docs.aws.amazon.com/eks/latest/userguide/creating-access-entries.html
        """
        made: list[pulumi.Resource] = []
        for arn in admins:
            # Named by the identity, not by position: removing one admin must not rename the others.
            i = hashlib.sha256(arn.encode()).hexdigest()[:10]
            entry = aws.eks.AccessEntry(
                f"{name}-admin-{i}",
                cluster_name=self.cluster.name,
                principal_arn=arn,
                type="STANDARD",
                # One entry per principal and cluster: delete before replace.
                opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True),
            )
            made.append(
                aws.eks.AccessPolicyAssociation(
                    f"{name}-admin-{i}-policy",
                    cluster_name=self.cluster.name,
                    principal_arn=entry.principal_arn,
                    policy_arn=CLUSTER_ADMIN_POLICY.format(partition=partition),
                    access_scope={"type": "cluster"},
                    opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True),
                )
            )
        return made

    def _create_researchers(self, name: str, researchers: tuple[str, ...]) -> list[aws.eks.AccessEntry]:
        """An access entry in the Kubernetes group torchfleet:researchers for each identity of
        torchfleet:researchers, and no access policy: EKS then leaves authorization to Kubernetes RBAC,
        where k8s/base/jobs/rolebinding-researchers.yaml binds that group to the training namespace's
        torchfleet-researcher Role. (AmazonEKSViewPolicy, even scoped to the namespace, would add reading
        everything there; the Role is all a researcher needs.)
        https://docs.aws.amazon.com/eks/latest/userguide/create-k8s-group-access-entry.html
        https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateAccessEntry.html (kubernetesGroups)
        """
        return [
            aws.eks.AccessEntry(
                # By identity, not position; "researcher" so that it never meets an admin's name.
                f"{name}-researcher-{hashlib.sha256(arn.encode()).hexdigest()[:10]}",
                cluster_name=self.cluster.name,
                principal_arn=arn,
                type="STANDARD",
                kubernetes_groups=[RESEARCHERS_GROUP],
                opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True),
            )
            for arn in researchers
        ]
