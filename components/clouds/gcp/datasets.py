"""GCP datasets: Cloud Storage FUSE CSI (a GKE add-on), read-only access for the training pods' Kubernetes
service account through Workload Identity Federation, and the narrow egress its sidecar needs.

- The driver is GKE's own add-on (addons_config.gcs_fuse_csi_driver_config, cluster.py): GKE ships
  and upgrades it with the cluster version, so there is no version of ours to pin.
  https://cloud.google.com/kubernetes-engine/docs/how-to/cloud-storage-fuse-csi-driver-setup
- Access: roles/storage.objectViewer (objects get + list, nothing else) on each bucket, granted to
  the principal of the training namespace's `training-job` service account only; a prefix narrows
  reads to objects under it with an IAM condition (listing names stays bucket-wide: list is checked
  on the bucket). https://cloud.google.com/kubernetes-engine/docs/how-to/workload-identity#kubernetes-resources-iam-policies
- Egress: gcsfuse runs as a sidecar inside each pod that mounts a bucket, so the namespace's
  default-deny applies to it. Opened for training pods only: TCP 443 to private.googleapis.com
  (199.36.153.8/30), with a private DNS zone that resolves storage.googleapis.com there for this VPC
  (Private Google Access, already on for the subnet: network.py;
  https://cloud.google.com/vpc/docs/configure-private-google-access#config-domain), and TCP 80 to the
  metadata address 169.254.169.254, where the sidecar gets its token: gcsfuse in a pod off the host
  network uses the default credentials (gcs-fuse-csi-driver pkg/sidecar_mounter/sidecar_mounter_config.go
  sets a token socket only for host-network pods). Under Dataplane V2 (cluster.py) the policy sees
  that address and port, before the redirect to the GKE metadata server's own 169.254.169.252:988
  (which is what a Calico cluster would need); not yet checked on a GKE cluster. On these nodes
  (GKE_METADATA) the address answers with the pod's Workload Identity only, never the node's
  credentials, so training pods can get the same read-only token the mount uses, and nothing more.
"""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from components.clouds.dataset_access import TRAINING_SERVICE_ACCOUNT, DatasetAccess, DatasetVolume
from components.kube import datasets as kube_datasets
from components.spec import DatasetSpec, PlatformSpec

DRIVER = "gcsfuse.csi.storage.gke.io"
READ_ROLE = "roles/storage.objectViewer"
# Private Google Access's private.googleapis.com range (the doc above, "Domain options").
PRIVATE_GOOGLEAPIS = "199.36.153.8/30"
PRIVATE_GOOGLEAPIS_IPS = ("199.36.153.8", "199.36.153.9", "199.36.153.10", "199.36.153.11")
HTTPS_PORT = 443
# The GKE metadata server as a pod addresses it under Dataplane V2 (see the module's docstring).
WORKLOAD_IDENTITY_METADATA = ("169.254.169.254/32", 80)
STORAGE_DOMAIN = "storage.googleapis.com."


def training_principal(project_number: str, project: str, namespace: str) -> str:
    """The Workload Identity Federation principal of the training pods' service account."""
    return (
        f"principal://iam.googleapis.com/projects/{project_number}/locations/global/workloadIdentityPools/"
        f"{project}.svc.id.goog/subject/ns/{namespace}/sa/{TRAINING_SERVICE_ACCOUNT}"
    )


def read_condition(d: DatasetSpec) -> dict | None:
    """Reads limited to the prefix; the bucket itself stays listable (objects.list is checked on it).
    Cloud Storage takes IAM conditions only on buckets with uniform bucket-level access:
    https://cloud.google.com/storage/docs/access-control/iam#conditions"""
    if not d.prefix:
        return None
    bucket = f"projects/_/buckets/{d.bucket}"
    return {
        "title": f"torchfleet-{d.name}-prefix",
        "description": f"Read only objects under {d.prefix}",
        "expression": f'resource.name == "{bucket}" || resource.name.startsWith("{bucket}/objects/{d.prefix}")',
    }


def csi_source(d: DatasetSpec) -> dict:
    # The volume handle is the bucket's name (the driver's static-provisioning spec).
    return {"driver": DRIVER, "volumeHandle": d.bucket, "readOnly": True}


def mount_options(d: DatasetSpec) -> tuple[str, ...]:
    """implicit-dirs: folders that exist only as object prefixes are listed; only-dir: the prefix
    alone is mounted (gcsfuse flags; https://cloud.google.com/storage/docs/cloud-storage-fuse/cli-options)."""
    options = ["implicit-dirs"]
    if d.prefix:
        options.append(f"only-dir={d.prefix.rstrip('/')}")
    return tuple(options)


class GcsDatasets(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        spec: PlatformSpec,
        network: pulumi.Input[str],
        opts: pulumi.ResourceOptions | None = None,
    ):
        """`network`: the VPC's id, for the private DNS zone."""
        super().__init__("torchfleet:clouds:GcsDatasets", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        project = spec.project or ""
        number = gcp.organizations.get_project_output(
            project_id=project, opts=pulumi.InvokeOutputOptions(parent=self)
        ).number
        principal = number.apply(lambda n: training_principal(n, project, spec.training.namespace))
        self.grants = [
            gcp.storage.BucketIAMMember(
                f"{name}-{d.name}-read",
                bucket=d.bucket,
                role=READ_ROLE,
                member=principal,
                condition=read_condition(d),
                opts=child,
            )
            for d in spec.datasets
        ]
        self.zone = gcp.dns.ManagedZone(
            f"{name}-storage-dns",
            dns_name=STORAGE_DOMAIN,
            description="Cloud Storage through Private Google Access (torchfleet datasets)",
            visibility="private",
            private_visibility_config={"networks": [{"network_url": network}]},
            opts=child,
        )
        self.record = gcp.dns.RecordSet(
            f"{name}-storage-a",
            managed_zone=self.zone.name,
            name=STORAGE_DOMAIN,
            type="A",
            ttl=300,
            rrdatas=list(PRIVATE_GOOGLEAPIS_IPS),
            opts=child,
        )
        self.access = DatasetAccess(
            volumes=tuple(DatasetVolume(d.name, csi_source(d), mount_options(d)) for d in spec.datasets),
            ready=[*self.grants, self.record],
            egress=((PRIVATE_GOOGLEAPIS, HTTPS_PORT), WORKLOAD_IDENTITY_METADATA),
            pod_annotations=dict(kube_datasets.POD_ANNOTATIONS["gcp"]),
        )
        self.register_outputs({})
