"""Block volumes for etcd: the EBS CSI driver (an EKS add-on with its own identity) and an
encrypted gp3 StorageClass. EKS 1.30+ clusters ship no default StorageClass, and nothing can
provision an EBS volume without this driver, so etcd's claims would stay Pending.
https://docs.aws.amazon.com/eks/latest/userguide/ebs-csi.html
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.clouds.aws import iam
from components.clouds.aws.addons import create_addon_with_identity
from components.clouds.settle import VolumesReleased

EBS_CSI_CONTROLLER_SA = "ebs-csi-controller-sa"
EBS_CSI_DRIVER = "ebs.csi.aws.com"
STORAGE_CLASS = "torchfleet-gp3"


def storage_class_manifest() -> dict:
    return {
        "metadata": {"name": STORAGE_CLASS},
        "provisioner": EBS_CSI_DRIVER,
        "parameters": {"type": "gp3", "encrypted": "true"},
        # Bind where the pod lands: an EBS volume lives in one zone, etcd members spread over zones.
        "volume_binding_mode": "WaitForFirstConsumer",
        "allow_volume_expansion": True,
        "reclaim_policy": "Delete",
    }


class EbsVolumes(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        cluster: aws.eks.Cluster,
        kubernetes_version: str,
        partition: str,
        provider: k8s.Provider,
        kubeconfig: pulumi.Input[str],
        nodes: list[pulumi.Resource],
        outlived_by: list[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("torchfleet:clouds:EbsVolumes", name, None, opts)
        self.csi_addon = create_addon_with_identity(
            f"{name}-csi",
            parent=self,
            cluster=cluster,
            addon="aws-ebs-csi-driver",
            kubernetes_version=kubernetes_version,
            service_account=EBS_CSI_CONTROLLER_SA,
            managed_policy=iam.EBS_CSI_MANAGED_POLICY,
            partition=partition,
            depends_on=nodes,
        )
        # On destroy, the driver outlives the volumes it deletes: everything using the class is
        # deleted first, then this waits until the cluster lists none of the driver's volumes, then
        # the add-on goes (settle.py; AWS review m5).
        self.settle = VolumesReleased(
            f"{name}-csi-settle", EBS_CSI_DRIVER, kubeconfig, [self.csi_addon, *outlived_by],
            pulumi.ResourceOptions(parent=self)
        )
        self.storage_class = k8s.storage.v1.StorageClass(
            f"{name}-gp3",
            **storage_class_manifest(),
            opts=pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[self.settle]),
        )
        self.register_outputs({"storageClass": STORAGE_CLASS})
