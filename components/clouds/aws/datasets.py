"""AWS datasets: the Mountpoint for Amazon S3 CSI driver (EKS add-on), read-only access for the training pods.

Pod-level credentials (`authenticationSource: pod`): Mountpoint mounts each bucket with the
credentials of the pod that mounts it, through EKS Pod Identity, so the driver's own service
account gets no S3 permission at all and no other pod in the cluster can mount the buckets.
https://github.com/awslabs/mountpoint-s3-csi-driver/blob/main/docs/CONFIGURATION.md ("Pod-Level Credentials")
Driver v2 runs Mountpoint in its own pods (namespace mount-s3), outside the training namespace's
network policies, so no egress is opened for it there.
"""

from __future__ import annotations

import json
import re

import pulumi
import pulumi_aws as aws

from components.clouds.aws import iam
from components.clouds.aws.addons import addon_version
from components.clouds.aws.options import named_options
from components.clouds.dataset_access import TRAINING_SERVICE_ACCOUNT, DatasetAccess, DatasetVolume
from components.spec import LABEL_POOL, MANAGER_POOL_NAME, MANAGER_TAINTS, DatasetSpec, PlatformSpec

ADDON = "aws-mountpoint-s3-csi-driver"  # https://docs.aws.amazon.com/eks/latest/userguide/mountpoint-for-s3-add-on.html
DRIVER = "s3.csi.aws.com"
# Pod-level credentials through EKS Pod Identity are documented from driver v2.0.0 (v1's
# CONFIGURATION.md: "Only IRSA is supported with Pod-Level credentials"). The version itself is
# what EKS names as the default for the cluster's minor (addons.addon_version, as for every add-on
# here); below v2 it is refused at deploy time rather than mounting with nobody's credentials.
# Newest upstream release when checked: v2.7.0 (CHANGELOG.md, 2026-11-25).
# v2.3.0 too: the add-on's configuration schema takes controller.tolerations and controller.nodeSelector from
# v2.3.0-eksbuild.1 (aws/containers-roadmap#2785 lists both; #2676: v2.0.0-eksbuild.1 refused them), which the
# controller needs on a tainted manager pool (CONTROLLER_PLACEMENT).
MIN_MAJOR, MIN_MINOR = 2, 3
_VERSION = re.compile(r"^v(\d+)\.(\d+)\.(\d+)")
# The driver's controller (a Deployment since v2, which creates the Mountpoint pods) goes where the platform's
# controllers run: every pool is tainted (issue 30), and its chart sets no toleration of its own
# (awslabs/mountpoint-s3-csi-driver charts/aws-mountpoint-s3-csi-driver/templates/controller.yaml at 005c3786:
# `tolerations:` from controller.tolerations only), so without these it would stay Pending.
CONTROLLER_PLACEMENT = {
    "controller": {
        "nodeSelector": {LABEL_POOL: MANAGER_POOL_NAME},
        "tolerations": [{"key": MANAGER_TAINTS["aws"]["key"], "operator": "Exists",
                         "effect": MANAGER_TAINTS["aws"]["effect"]}],
    }
}


def check_driver_version(version: str) -> str:
    found = _VERSION.match(version or "")
    if found is None or (int(found.group(1)), int(found.group(2))) < (MIN_MAJOR, MIN_MINOR):
        raise ValueError(
            f"EKS names {ADDON} {version!r} for this Kubernetes minor; datasets need v{MIN_MAJOR}.{MIN_MINOR}.0 or "
            "later (pod-level credentials with EKS Pod Identity, the controller's placement); upgrade the cluster's "
            "minor or remove torchfleet:datasets"
        )
    return version


def bucket_arn(partition: str, bucket: str) -> str:
    return f"arn:{partition}:s3:::{bucket}"


def read_only_policy(partition: str, datasets: tuple[DatasetSpec, ...]) -> str:
    """List and get, on each dataset's bucket and prefix only: what a read-only Mountpoint mount
    needs (Mountpoint's IAM permissions, minus the writes: mountpoint-s3 doc/CONFIGURATION.md#iam-permissions).
    A prefix limits listing with the s3:prefix condition key, and reading to objects under it."""
    statements = []
    for d in datasets:
        listing: dict = {
            "Sid": f"List{_sid(d.name)}",
            "Effect": "Allow",
            "Action": ["s3:ListBucket"],
            "Resource": bucket_arn(partition, d.bucket),
        }
        if d.prefix:
            listing["Condition"] = {"StringLike": {"s3:prefix": [f"{d.prefix}*"]}}
        statements.append(listing)
        statements.append(
            {
                "Sid": f"Read{_sid(d.name)}",
                "Effect": "Allow",
                "Action": ["s3:GetObject"],
                "Resource": f"{bucket_arn(partition, d.bucket)}/{d.prefix}*",
            }
        )
        if d.kms_key_arn:
            # SSE-KMS objects also need kms:Decrypt on their key (mountpoint-s3 doc/CONFIGURATION.md#iam-permissions);
            # this key only, and only through S3 for this dataset's objects: kms:ViaService names the calling
            # service (AWS KMS developer guide, "kms:ViaService"); S3 passes the object's ARN as the encryption
            # context, or the bucket's with an S3 Bucket Key (Amazon S3 user guide, "Encryption context"), so
            # a pod cannot use the grant to decrypt other data under the same key.
            arn = bucket_arn(partition, d.bucket)
            statements.append(
                {
                    "Sid": f"Decrypt{_sid(d.name)}",
                    "Effect": "Allow",
                    "Action": ["kms:Decrypt"],
                    "Resource": d.kms_key_arn,
                    "Condition": {
                        "StringLike": {
                            "kms:ViaService": "s3.*",
                            "kms:EncryptionContext:aws:s3:arn": [arn, f"{arn}/{d.prefix}*"],
                        }
                    },
                }
            )
    return json.dumps({"Version": iam.VERSION, "Statement": statements})


def _sid(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("-"))


def volume_handle(namespace: str, name: str) -> str:
    # Kubernetes processes a volume once per handle: unique per dataset and install.
    return f"{namespace}-dataset-{name}"


def csi_source(d: DatasetSpec, namespace: str, region: str) -> dict:
    return {
        "driver": DRIVER,
        "volumeHandle": volume_handle(namespace, d.name),
        "readOnly": True,
        # stsRegion: where pod-level credentials are requested (CONFIGURATION.md, "Configuring the STS region").
        "volumeAttributes": {"bucketName": d.bucket, "authenticationSource": "pod", "stsRegion": region},
    }


def mount_options(d: DatasetSpec, region: str) -> tuple[str, ...]:
    """read-only: Mountpoint refuses writes itself; allow-other: the training user (not root) reads it."""
    options = ["read-only", "allow-other", f"region {region}"]
    if d.prefix:
        options.append(f"prefix {d.prefix}")  # Mountpoint wants it ending in '/' (spec/datasets.py ensures it)
    return tuple(options)


class S3Datasets(pulumi.ComponentResource):
    """The add-on, one role for the training service account (read-only on the datasets), its association."""

    def __init__(
        self,
        name: str,
        spec: PlatformSpec,
        cluster: aws.eks.Cluster,
        partition: str,
        wait_for: list[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ):
        """`wait_for`: the node groups and the Pod Identity agent (a component's depends_on does not
        reach its children)."""
        super().__init__("torchfleet:clouds:S3Datasets", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        region = spec.region or ""
        namespace = spec.training.namespace
        self.addon = aws.eks.Addon(
            f"{name}-s3-csi-driver",
            cluster_name=cluster.name,
            addon_name=ADDON,
            addon_version=addon_version(ADDON, spec.kubernetes_version, self).apply(check_driver_version),
            configuration_values=json.dumps(CONTROLLER_PLACEMENT, sort_keys=True),
            resolve_conflicts_on_update="OVERWRITE",
            opts=named_options(self, wait_for),
        )
        self.role = aws.iam.Role(
            f"{name}-training-role", assume_role_policy=iam.pod_identity_trust_policy(), opts=child
        )
        self.policy = aws.iam.RolePolicy(
            f"{name}-training-read", role=self.role.id, policy=read_only_policy(partition, spec.datasets), opts=child
        )
        self.association = aws.eks.PodIdentityAssociation(
            f"{name}-training-identity",
            cluster_name=cluster.name,
            namespace=namespace,
            service_account=TRAINING_SERVICE_ACCOUNT,
            role_arn=self.role.arn,
            opts=child,
        )
        self.access = DatasetAccess(
            volumes=tuple(
                DatasetVolume(d.name, csi_source(d, namespace, region), mount_options(d, region))
                for d in spec.datasets
            ),
            ready=[self.addon, self.policy, self.association],
        )
        self.register_outputs({})
