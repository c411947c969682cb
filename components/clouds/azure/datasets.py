"""Azure datasets: Blob CSI with blobfuse2 (AKS storageProfile.blobCsiDriver), read-only access for the
training pods through workload identity.

- The driver is AKS's managed one (cluster.py turns it on where a stack declares datasets); AKS ships
  and upgrades it with the cluster version, so there is no version of ours to pin. Mounting with the
  pod's workload identity token alone (`mountWithWorkloadIdentityToken`) needs driver v1.27.0 or
  later: https://github.com/kubernetes-sigs/blob-csi-driver/blob/master/docs/workload-identity-static-pv-mount.md
  (checked 2026-11-25). Without it the driver would fetch the account key, which needs a role that can
  list keys (Storage Account Contributor): far more than reading.
- Access: one user-assigned identity federated with the training namespace's `training-job`
  service account only, granted Storage Blob Data Reader on each dataset's container (not the
  account). Data Reader cannot write, so the mount stays read-only even past `--read-only`.
  https://learn.microsoft.com/azure/role-based-access-control/built-in-roles/storage#storage-blob-data-reader
- blobfuse2 runs on the node (the driver's blobfuse-proxy), outside the pods' network policies, so
  no egress is opened in the training namespace for it.
"""

from __future__ import annotations

import pulumi
from pulumi_azure_native import authorization, managedidentity

from components.clouds.azure import naming
from components.clouds.dataset_access import TRAINING_SERVICE_ACCOUNT, DatasetAccess, DatasetVolume
from components.spec import DatasetSpec, PlatformSpec

DRIVER = "blob.csi.azure.com"
# https://learn.microsoft.com/azure/role-based-access-control/built-in-roles (the same id in every tenant)
STORAGE_BLOB_DATA_READER = "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1"
# What a Kubernetes service account token is exchanged for (Microsoft Entra Workload ID).
# https://learn.microsoft.com/azure/aks/workload-identity-deploy-cluster#create-the-federated-identity-credential
FEDERATION_AUDIENCE = "api://AzureADTokenExchange"


def container_scope(subscription: str, d: DatasetSpec) -> str:
    return (
        f"/subscriptions/{subscription}/resourceGroups/{d.resource_group}/providers/Microsoft.Storage/"
        f"storageAccounts/{d.account}/blobServices/default/containers/{d.container}"
    )


def service_account_subject(namespace: str) -> str:
    return f"system:serviceaccount:{namespace}:{TRAINING_SERVICE_ACCOUNT}"


def csi_source(d: DatasetSpec, namespace: str, client_id: str) -> dict:
    """The PV's csi block as the driver's workload-identity static-provisioning doc writes it."""
    return {
        "driver": DRIVER,
        # Unique per dataset and install; '#' is the driver's own separator and '/' is refused.
        "volumeHandle": f"{namespace}-dataset-{d.name}",
        "readOnly": True,
        "volumeAttributes": {
            "protocol": "fuse2",
            "storageaccount": d.account,
            "containerName": d.container,
            "resourcegroup": d.resource_group,
            "clientID": client_id,
            "mountWithWorkloadIdentityToken": "true",
        },
    }


def mount_options(d: DatasetSpec) -> tuple[str, ...]:
    """blobfuse2 flags (https://github.com/Azure/azure-storage-fuse#config-file-options, CLI section):
    the training user (not root) reads; read-only; only the prefix is mounted."""
    options = ["-o allow_other", "--read-only=true"]
    if d.prefix:
        options.append(f"--subdirectory={d.prefix}")
    return tuple(options)


class BlobDatasets(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        spec: PlatformSpec,
        resource_group: pulumi.Input[str],
        oidc_issuer: pulumi.Input[str],
        client: pulumi.Output,
        opts: pulumi.ResourceOptions | None = None,
    ):
        """`oidc_issuer`: the cluster's service account issuer; `client`: who runs `pulumi up` (the subscription)."""
        super().__init__("torchfleet:clouds:BlobDatasets", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        namespace = spec.training.namespace
        self.identity = managedidentity.UserAssignedIdentity(
            f"{name}-training-identity",
            resource_group_name=resource_group,
            location=spec.region,
            tags=naming.tags(spec.stack),
            opts=child,
        )
        self.federation = managedidentity.FederatedIdentityCredential(
            f"{name}-training-federation",
            resource_group_name=resource_group,
            resource_name_=self.identity.name,
            issuer=oidc_issuer,
            subject=service_account_subject(namespace),
            audiences=[FEDERATION_AUDIENCE],
            opts=child,
        )
        self.grants = [
            authorization.RoleAssignment(
                f"{name}-{d.name}-read",
                principal_id=self.identity.principal_id,
                principal_type="ServicePrincipal",
                role_definition_id=client.subscription_id.apply(
                    lambda s: f"/subscriptions/{s}/providers/Microsoft.Authorization/roleDefinitions/"
                    f"{STORAGE_BLOB_DATA_READER}"
                ),
                scope=client.subscription_id.apply(lambda s, d=d: container_scope(s, d)),
                # ARM refuses a second assignment of one role to one principal at one scope.
                opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True),
            )
            for d in spec.datasets
        ]
        self.access = DatasetAccess(
            volumes=tuple(
                DatasetVolume(
                    d.name,
                    self.identity.client_id.apply(lambda c, d=d: csi_source(d, namespace, c)),
                    mount_options(d),
                )
                for d in spec.datasets
            ),
            ready=[self.federation, *self.grants],
        )
        self.register_outputs({"trainingIdentityClientId": self.identity.client_id})
