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
- `pulumi destroy` deletes the cluster first (it depends on the key), then schedules the key's
  versions for destruction (deletion_policy DELETE): the Secrets it encrypted went with the
  cluster. Nothing here is `protect`ed: a protected resource makes the whole destroy fail in its
  preview (issue 20). While the cluster lives, the key cannot be replaced (its inputs are fixed).
- Names are Pulumi's auto-names (a random suffix): KMS never deletes a key ring or a key, so a
  fixed name could not be created again after a destroy (the provider's delete of a key ring only
  forgets it).
- The cluster waits for the grant to take effect, not only to exist (propagation.py): creating
  it seconds after the grant could fail on the key.
"""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from components.clouds.propagation import GCP_IAM_SECONDS, PropagationWait
from components.spec import PlatformSpec

ROTATION_PERIOD = "7776000s"  # 90 days
ENCRYPTER_DECRYPTER = "roles/cloudkms.cryptoKeyEncrypterDecrypter"


def database_encryption(key_id: pulumi.Input[str]) -> dict:
    """The cluster's application-layer secrets encryption with our key."""
    return {"state": "ENCRYPTED", "key_name": key_id}


# Destroying the key's versions once the cluster is gone: nothing left to decrypt.
DELETION_POLICY = "DELETE"


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
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.key = gcp.kms.CryptoKey(
            f"{name}-key",
            key_ring=self.key_ring.id,
            purpose="ENCRYPT_DECRYPT",
            rotation_period=ROTATION_PERIOD,
            deletion_policy=DELETION_POLICY,
            labels=labels,
            opts=pulumi.ResourceOptions(parent=self),
        )
        # The Kubernetes Engine Service Agent, created if the project does not have it yet (a
        # fresh project gets it only with the first cluster, after the grant would be needed), as
        # Google's own module does before granting it the key (terraform-google-kubernetes-engine
        # examples/confidential_safer_cluster/kms.tf; GCP review F4).
        agent = gcp.projects.ServiceIdentity(
            f"{name}-gke-agent-identity",
            project=spec.project,
            service="container.googleapis.com",
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.grant = gcp.kms.CryptoKeyIAMMember(
            f"{name}-gke-agent",
            crypto_key_id=self.key.id,
            role=ENCRYPTER_DECRYPTER,
            member=agent.member,
            opts=pulumi.ResourceOptions(parent=self),
        )
        # What the cluster depends on: the grant, once IAM has had time to apply it.
        self.grant_effective = PropagationWait(
            f"{name}-grant-propagation", GCP_IAM_SECONDS, [self.grant], pulumi.ResourceOptions(parent=self)
        )
        self.register_outputs({"keyId": self.key.id})
