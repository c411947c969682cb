"""What `pulumi destroy` keeps on each cloud, and why: the one table README "Destroying" describes.

Destroy removes everything else (the cluster, every node pool, NAT gateways, load balancer
addresses, the store's network endpoints) with no extra flags: nothing is `protect`ed, because a
protected resource makes the whole destroy fail in its preview and the GPUs keep billing.
What is kept is `retainOnDelete`: dropped from the stack's state, left in the cloud. The next
`pulumi up` of the same stack either takes it back (torchfleet:storage.adopt: true imports each kept
resource by its fixed name) or fails on that name, never silently creating an empty twin.
`storage.protect: false` keeps no data (AWS still keeps its log group, see below).
"""

from __future__ import annotations

# cloud -> {resource type: why it is kept}; "data" entries only while storage.protect is true.
KEPT_WITH_THE_DATA: dict[str, dict[str, str]] = {
    "aws": {
        "aws:efs/fileSystem:FileSystem": "the checkpoints (creation token torchfleet-<stack>)",
        "aws:efs/backupPolicy:BackupPolicy": (
            "deleting it turns the kept store's automatic backups off (the provider's delete is "
            "PutBackupPolicy DISABLED)"
        ),
        "aws:efs/fileSystemPolicy:FileSystemPolicy": (
            "deleting it reopens the kept store to any client that reaches a mount target (EFS's default policy)"
        ),
    },
    "gcp": {
        "gcp:filestore/instance:Instance": "the checkpoints",
        "gcp:compute/network:Network": (
            "the instance is peered to it: GCP refuses to delete a network with a peering, and the "
            "data is reachable again only from this network"
        ),
    },
    "azure": {
        "azure-native:resources:ResourceGroup": "holds the account (its own group, fixed name)",
        "azure-native:storage:StorageAccount": "the checkpoints",
        "azure-native:storage:FileShare": "the checkpoints",
    },
    "local": {},
}
KEPT_ALWAYS: dict[str, dict[str, str]] = {
    "aws": {
        "aws:cloudwatch/logGroup:LogGroup": (
            "EKS recreates /aws/eks/<cluster>/cluster while the cluster is deleted, so deleting it would "
            "make the next `pulumi up` fail; its audit logs expire after the retention"
        ),
    },
    "gcp": {},
    "azure": {},
    "local": {},
}


def kept_types(cloud: str, keep_data: bool) -> set[str]:
    return set(KEPT_ALWAYS[cloud]) | (set(KEPT_WITH_THE_DATA[cloud]) if keep_data else set())

# The Kubernetes provider's clusterIdentifier: each cloud's provider is given the cluster's own id. Without
# it pulumi-kubernetes decides by heuristics whether a changed kubeconfig means another cluster,
# and a new API server address (GKE's network.dnsEndpoint turned on or off, publicAccessCidrs
# emptied) or another auth mode (Azure's kubeLogin) would replace the provider and with it every
# Kubernetes resource it manages: fixed-name objects failing "already exists", or the training
# namespace deleted with its running jobs. With it, only a new cluster replaces them ("the provider
# will only be replaced when clusterIdentifier changes": pulumi_kubernetes Provider, cluster_identifier).
