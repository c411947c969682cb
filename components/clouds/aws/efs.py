"""EFS as the shared store: encrypted, elastic throughput, one mount target per zone, NFS open
only to the nodes, mounted through the EFS CSI driver (an EKS add-on with its own identity), and a
file system policy that admits only TLS clients through the training access point."""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws

from components.clouds.aws import iam
from components.clouds.aws.addons import create_addon_with_identity
from components.clouds.aws.options import kept_options
from components.clouds.base import SharedStore
from components.spec import TRAINING_UID, PlatformSpec

NFS_PORT = 2049
EFS_CSI_CONTROLLER_SA = "efs-csi-controller-sa"
# No mount options: the driver mounts through efs-utils with TLS by itself. A volume handle that
# names an access point gets `accesspoint=<id>` and `tls` from the driver, and `tls` under
# mountOptions is deprecated there ("tls is enabled by default") and refused outright when a
# volume sets encryptInTransit false (aws-efs-csi-driver pkg/driver/node.go, NodePublishVolume;
# AWS review m9). The file system policy below denies every client without TLS, so the handle's
# access point and the absence of encryptInTransit: "false" are tested together with it.
# https://docs.aws.amazon.com/efs/latest/ug/encryption-in-transit.html
EFS_MOUNT_OPTIONS: tuple[str, ...] = ()
# Options the driver adds itself for an access-point handle, or ignores: never ours to set.
DRIVER_OWNED_MOUNT_OPTIONS = ("tls", "accesspoint", "awscredsuri")
ACCESS_POINT_ROOT = "/torchfleet"
CLIENT_ACTIONS = ("elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite")


def creation_token(stack: str) -> str:
    """The file system's idempotency token, one per stack (EFS: at most 64 characters).

    CreateFileSystem refuses a second file system with the same token (FileSystemAlreadyExists), so
    a `pulumi up` after a destroy that kept the store fails naming it instead of creating an empty
    twin; storage.adopt finds the kept one by this token.
    https://docs.aws.amazon.com/efs/latest/ug/API_CreateFileSystem.html
    """
    return f"torchfleet-{stack}"[:64]


def adopted_file_system_id(stack: str) -> str:
    """The id of the file system an earlier destroy of this stack kept (storage.adopt)."""
    return aws.efs.get_file_system(creation_token=creation_token(stack)).file_system_id


def file_system_policy(file_system_arn: str, access_point_arn: str) -> str:
    """Who may use the file system over NFS: TLS clients, through the training access point only.

    A file system policy replaces EFS's default "any client with network access has full access":
    https://docs.aws.amazon.com/efs/latest/ug/iam-access-control-nfs-efs.html
    - Allow: mount and write (never ClientRootAccess: the access point runs every operation as the
      training uid) for clients that come through a mount target and the access point. The CSI
      driver mounts without IAM (anonymously), so the grant is to every principal, scoped by the
      conditions; the node security group already limits who reaches a mount target.
    - Deny any action without TLS (aws:SecureTransport), EFS's "Enforce in-transit encryption".
    - Deny mount and write outside the access point, also to principals an IAM identity policy
      would allow: the store's root and other paths stay out of reach, and every file keeps the
      training uid's ownership. https://docs.aws.amazon.com/efs/latest/ug/efs-access-points.html
    The access point ARN condition key is of type ARN, hence ArnEquals/ArnNotEquals.
    """
    everyone = {"AWS": "*"}
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "MountThroughTheTrainingAccessPoint",
                    "Effect": "Allow",
                    "Principal": everyone,
                    "Action": list(CLIENT_ACTIONS),
                    "Resource": file_system_arn,
                    "Condition": {
                        "ArnEquals": {"elasticfilesystem:AccessPointArn": access_point_arn},
                        "Bool": {"elasticfilesystem:AccessedViaMountTarget": "true"},
                    },
                },
                {
                    "Sid": "DenyWithoutTls",
                    "Effect": "Deny",
                    "Principal": everyone,
                    "Action": "*",
                    "Resource": file_system_arn,
                    "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                },
                {
                    "Sid": "DenyOutsideTheTrainingAccessPoint",
                    "Effect": "Deny",
                    "Principal": everyone,
                    "Action": list(CLIENT_ACTIONS),
                    "Resource": file_system_arn,
                    "Condition": {"ArnNotEquals": {"elasticfilesystem:AccessPointArn": access_point_arn}},
                },
            ],
        }
    )


class EfsStore(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        spec: PlatformSpec,
        cluster: aws.eks.Cluster,
        vpc: aws.ec2.Vpc,
        subnets: dict[str, aws.ec2.Subnet],
        node_security_group_id: pulumi.Input[str],
        partition: str,
        nodes: list[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("torchfleet:clouds:EfsStore", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        keep = spec.storage.protect
        adopted = adopted_file_system_id(spec.stack) if keep and spec.storage.adopt else None
        self.file_system = aws.efs.FileSystem(
            f"{name}-fs",
            creation_token=creation_token(spec.stack),
            encrypted=True,
            # Elastic: throughput follows the load (many readers at job start), no burst credits.
            # https://docs.aws.amazon.com/efs/latest/ug/performance.html#throughput-modes
            throughput_mode="elastic",
            performance_mode="generalPurpose",
            lifecycle_policies=[{"transition_to_ia": "AFTER_30_DAYS"}],
            tags={"Name": f"{name}-shared", "torchfleet.io/stack": spec.stack},
            # Kept by `pulumi destroy` while storage.protect is true (mount targets, security group
            # and access point go: nothing of the old VPC holds it); adopted back by storage.adopt.
            opts=kept_options(self, keep, adopted),
        )
        # Kept with the store: the provider's delete of a backup policy is PutBackupPolicy DISABLED
        # (terraform-provider-aws internal/service/efs/backup_policy.go, resourceBackupPolicyDelete),
        # so a destroy that keeps the store would stop its daily backups. The recovery points AWS
        # Backup already made (vault aws/efs/automatic-backup-vault) outlive the destroy either way
        # and keep billing until they expire (35 days): docs/day-2-aws.md.
        # https://docs.aws.amazon.com/efs/latest/ug/awsbackup.html#automatic-backups
        # Both import by the file system's id (the provider's importers), so storage.adopt takes them back.
        with_the_store = kept_options(self, keep, adopted)
        self.backup_policy = aws.efs.BackupPolicy(
            f"{name}-backup", file_system_id=self.file_system.id, backup_policy={"status": "ENABLED"},
            opts=with_the_store,
        )
        sg = aws.ec2.SecurityGroup(
            f"{name}-nfs-sg",
            vpc_id=vpc.id,
            description="NFS from the cluster nodes only",  # EC2 refuses an apostrophe here (limits.py)
            ingress=[
                {
                    "protocol": "tcp",
                    "from_port": NFS_PORT,
                    "to_port": NFS_PORT,
                    "security_groups": [node_security_group_id],
                    "description": "NFS from EKS nodes",
                }
            ],
            opts=child,
        )
        # One mount target per zone (EFS allows exactly one per zone, not one per subnet).
        self.mount_targets = [
            aws.efs.MountTarget(
                f"{name}-mt-{zone}",
                file_system_id=self.file_system.id,
                subnet_id=subnet.id,
                security_groups=[sg.id],
                # One per zone: EFS refuses a second one while the old one exists.
                opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True),
            )
            for zone, subnet in subnets.items()
        ]
        self.csi_addon = create_addon_with_identity(
            f"{name}-csi",
            parent=self,
            cluster=cluster,
            addon="aws-efs-csi-driver",
            kubernetes_version=spec.kubernetes_version,
            service_account=EFS_CSI_CONTROLLER_SA,
            managed_policy=iam.EFS_CSI_MANAGED_POLICY,
            partition=partition,
            depends_on=nodes,
        )
        # Every NFS operation through this access point runs as the training image's user, and
        # its root directory is created owned by that user: a fresh EFS root is root-owned 0755,
        # which the non-root training pods could not write to.
        # https://docs.aws.amazon.com/efs/latest/ug/efs-access-points.html
        self.access_point = aws.efs.AccessPoint(
            f"{name}-ap",
            file_system_id=self.file_system.id,
            # Every NFS call as 10001, the kubelet's too: a job's folder it makes for the job's subPath mount
            # (torchfleet/jobs/pod_template.py shared_mount) is 10001's, with the root's 2775.
            posix_user={"uid": TRAINING_UID, "gid": TRAINING_UID},
            root_directory={
                "path": ACCESS_POINT_ROOT,
                "creation_info": {"owner_uid": TRAINING_UID, "owner_gid": TRAINING_UID, "permissions": "2775"},
            },
            tags={"Name": f"{name}-training"},
            opts=child,
        )
        self.policy = aws.efs.FileSystemPolicy(
            f"{name}-policy",
            file_system_id=self.file_system.id,
            policy=pulumi.Output.all(self.file_system.arn, self.access_point.arn).apply(
                lambda arns: file_system_policy(*arns)
            ),
            # Kept with the store too: deleting it (DeleteFileSystemPolicy) restores EFS's default,
            # "any client that can reach a mount target has full access". Kept, it still names the
            # destroyed access point, so nothing mounts the store until storage.adopt writes it again
            # (PutFileSystemPolicy replaces a policy: a create over a kept one succeeds).
            # https://docs.aws.amazon.com/efs/latest/ug/iam-access-control-nfs-efs.html#default-filesystempolicy
            opts=with_the_store,
        )
        self.store = SharedStore(
            kind="efs",
            # "<fs>::<access point>": the EFS CSI driver mounts through the access point.
            # https://github.com/kubernetes-sigs/aws-efs-csi-driver/tree/master/examples/kubernetes/access_points
            volume_source={
                "csi": {
                    "driver": "efs.csi.aws.com",
                    "volumeHandle": pulumi.Output.concat(self.file_system.id, "::", self.access_point.id),
                }
            },
            owner_enforced=True,
            mount_options=EFS_MOUNT_OPTIONS,
            capacity="1Ti",  # EFS has no size; Kubernetes needs a number
            nfs_cidrs=(spec.network.cidr,),
            id=self.file_system.id,
        )
        self.register_outputs({"fileSystemId": self.file_system.id})
