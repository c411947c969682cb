"""GcpSecretsKey: the Cloud KMS key GKE encrypts Kubernetes Secrets with (application-layer encryption).

GKE encrypts etcd at rest with Google's keys anyway; application-layer secrets encryption adds an
envelope key the project holds, so Secrets (the kubeconfig-free tokens, registry credentials a
user adds) stay unreadable to anyone with access to etcd's storage alone:
https://cloud.google.com/kubernetes-engine/docs/how-to/encrypting-secrets

- The key ring is in the cluster's region: GKE needs the key in the cluster's location.
- The GKE service agent (service-<project number>@container-engine-robot.iam.gserviceaccount.com)
  gets `roles/cloudkms.cryptoKeyEncrypterDecrypter` on this key only, before the cluster exists:
  creating a cluster whose agent cannot use the key fails.
- The key rotates every 90 days; GKE keeps decrypting with older versions.
- Losing the key loses every Secret the cluster holds: it is protected (and retained on delete)
  like the shared store, and its provider-side `deletion_policy` is PREVENT, while
  `storage.protect` is true. Deleting the Pulumi key would schedule its versions for destruction.
- Names are Pulumi's auto-names (a random suffix): KMS never deletes a key ring or a key, so a
  fixed name could not be created again after a destroy.
"""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from components.spec import PlatformSpec

ROTATION_PERIOD = "7776000s"  # 90 days
ENCRYPTER_DECRYPTER = "roles/cloudkms.cryptoKeyEncrypterDecrypter"


def gke_service_agent(project_number: str) -> str:
    """The IAM member GKE's control plane acts as (the Kubernetes Engine Service Agent)."""
    return f"serviceAccount:service-{project_number}@container-engine-robot.iam.gserviceaccount.com"


def database_encryption(key_id: pulumi.Input[str]) -> dict:
    """The cluster's application-layer secrets encryption with our key."""
    return {"state": "ENCRYPTED", "key_name": key_id}


def key_options(parent: pulumi.Resource, protect: bool) -> pulumi.ResourceOptions:
    """`storage.protect` guards the key as it guards the store: `pulumi destroy` refuses to touch it."""
    return pulumi.ResourceOptions(parent=parent, protect=protect, retain_on_delete=protect)


def deletion_policy(protect: bool) -> str:
    # Set either way, so turning protect off and running `pulumi up` lifts the provider's guard.
    return "PREVENT" if protect else "DELETE"


class GcpSecretsKey(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        spec: PlatformSpec,
        labels: dict[str, str],
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("torchfleet:clouds:GcpSecretsKey", name, None, opts)
        self.key_ring = gcp.kms.KeyRing(
            f"{name}-ring",
            location=spec.region,
            project=spec.project,
            opts=key_options(self, spec.storage.protect),
        )
        self.key = gcp.kms.CryptoKey(
            f"{name}-key",
            key_ring=self.key_ring.id,
            purpose="ENCRYPT_DECRYPT",
            rotation_period=ROTATION_PERIOD,
            deletion_policy=deletion_policy(spec.storage.protect),
            labels=labels,
            opts=key_options(self, spec.storage.protect),
        )
        project = gcp.organizations.get_project_output(project_id=spec.project)
        self.grant = gcp.kms.CryptoKeyIAMMember(
            f"{name}-gke-agent",
            crypto_key_id=self.key.id,
            role=ENCRYPTER_DECRYPTER,
            member=project.number.apply(gke_service_agent),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"keyId": self.key.id})
