"""GcpCluster: a private, VPC-native GKE cluster with spot GPU pools and a Filestore share.

    network (GcpNetwork), secrets key (GcpSecretsKey)
        -> GKE cluster -> node pools (GcpNodePools) -> Filestore (GcpFilestore)
                       -> kubeconfig (secret) -> Kubernetes provider -> handle

GKE runs the parts other clouds need charts for: the cluster autoscaler (configured here per
pool and by profile), the NVIDIA device plugin and driver installer, and the Filestore CSI
driver (a managed add-on). Settings are built by small functions the tests call directly.
"""

from __future__ import annotations

import re
from typing import Any

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from components.clouds import offline_preview
from components.clouds.base import ClusterHandle
from components.clouds.gcp.access import create_admins, create_researchers
from components.clouds.gcp.datasets import GcsDatasets
from components.clouds.gcp.filestore import GcpFilestore
from components.clouds.gcp.kms import GcpSecretsKey, database_encryption
from components.clouds.gcp.kubeconfig import kubeconfig
from components.clouds.gcp.network import MAX_PODS_PER_NODE, PODS_RANGE, SERVICES_RANGE, GcpNetwork
from components.clouds.gcp.pools import MANAGER_LABELS, OAUTH_SCOPES, GcpNodeIdentity, GcpNodePools
from components.spec import PlatformSpec

# kubernetesVersion is a floor (min_master_version): on a release channel GKE upgrades the
# control plane and nodes itself, and REGULAR gets a minor about 2-3 months after RAPID, once it
# is proven; STABLE lags further. https://cloud.google.com/kubernetes-engine/docs/concepts/release-channels
# A minor past standard support is offered only on the Extended channel, so spec.parse refuses it
# (traits.py standard_support_until).
RELEASE_CHANNEL = "REGULAR"
# The autoscaler that GKE runs for every pool with autoscaling set. OPTIMIZE_UTILIZATION scales
# down sooner and packs pods onto fewer nodes: idle spot GPUs cost money, and training pods
# are not latency sensitive. GKE does not expose scale-down-unneeded-time; the profile is the
# knob. https://cloud.google.com/kubernetes-engine/docs/concepts/cluster-autoscaler#autoscaling_profiles
AUTOSCALING_PROFILE = "OPTIMIZE_UTILIZATION"
# When GKE may upgrade the control plane and drain nodes (GPU jobs, etcd members): weekend nights
# UTC, 8 hours each. GKE wants at least 48 hours of windows in any 32 days, 4 or more at a time
# (https://cloud.google.com/kubernetes-engine/docs/concepts/maintenance-windows-and-exclusions).
# The worst 32 days hold four weekends and four weekdays: 4 x 2 x 8 = 64 hours, a third over the
# floor (6-hour windows gave exactly 48.0, and a window shortened by a minute would fail the update:
# GCP review m3; test_gcp.py computes the minimum over every 32-day window of a year).
# Without a window, upgrades come at any time (GCP review F14).
MAINTENANCE_WINDOW = {
    "start_time": "2026-01-03T02:00:00Z",
    "end_time": "2026-01-03T10:00:00Z",
    "recurrence": "FREQ=WEEKLY;BYDAY=SA,SU",
}
# The Kubeflow training-operator's admission webhook listens here (failurePolicy: Fail); GKE's own
# firewall rules for private nodes admit the control plane on 443 and 10250 only, so without a
# rule every PyTorchJob create times out (issue 19, item 9).
# https://cloud.google.com/kubernetes-engine/docs/how-to/private-clusters#add_firewall_rules
WEBHOOK_PORTS = ["9443"]


def resource_labels(spec: PlatformSpec) -> dict[str, str]:
    """GCP labels (lowercase letters, digits, '-', '_'; 63 characters) for cost reports."""
    return {"torchfleet-stack": re.sub(r"[^a-z0-9_-]", "-", spec.stack.lower())[:63]}


def autoscaling_config() -> dict[str, Any]:
    # Node auto-provisioning off: the autoscaler scales our pools only, never invents new ones
    # (with other machine types, labels or no GPU taint).
    return {"enabled": False, "autoscaling_profile": AUTOSCALING_PROFILE}


def authorized_networks(cidrs: tuple[str, ...]) -> dict[str, Any]:
    """Who may reach the public control-plane endpoint (network.publicAccessCidrs), and no one else:
    GKE can also let every Google Cloud public IP through (`gcp_public_cidrs_access_enabled`, gcloud's
    --enable-google-cloud-access), which would admit any GCE VM of any project. Said explicitly so
    the list is the whole truth whatever the API's default (GCP review F1)."""
    return {
        "cidr_blocks": [{"cidr_block": c, "display_name": f"torchfleet-{i}"} for i, c in enumerate(cidrs)],
        "gcp_public_cidrs_access_enabled": False,
    }


def private_cluster(public_access_cidrs: tuple[str, ...]) -> dict[str, Any]:
    """Private nodes always; the public endpoint only while someone may use it.

    Nodes get no public IPs. Since GKE 1.29 the control plane is reached over Private Service
    Connect, so no master CIDR block is needed:
    https://cloud.google.com/kubernetes-engine/docs/concepts/private-service-connect
    `publicAccessCidrs: []` turns the public endpoint off, as on the other clouds.
    """
    config: dict[str, Any] = {"enable_private_nodes": True, "enable_private_endpoint": not public_access_cidrs}
    if not public_access_cidrs:
        # Reachable from the whole VPC, not only its own region (a VPN or bastion elsewhere in it):
        # https://cloud.google.com/kubernetes-engine/docs/how-to/private-clusters#cp-global-access
        config["master_global_access_config"] = {"enabled": True}
    return config


def control_plane_endpoints(dns_endpoint: bool) -> dict[str, Any]:
    """GKE's DNS-based control-plane endpoint (network.dnsEndpoint, on by default): how a laptop or CI
    reaches a cluster whose IP endpoint is private, with no VPN and no IP allow-list.

    Every cluster has the endpoint; `allow_external_traffic` decides whether user traffic from outside
    Google's internal callers is accepted on it. A request there passes IAM (the caller needs
    container.clusters.connect) before it reaches the API server, which then applies RBAC, so it is
    gated by identity rather than by source address ("A new flexible DNS-based approach for accessing
    the GKE control plane", cloud.google.com/blog, 2024-11-11). It is said explicitly either way: the
    provider sends allowExternalTraffic false when the block is absent (terraform-provider-google
    resource_container_cluster.go expandControlPlaneEndpointsConfig, ForceSendFields). The IP endpoints
    stay on (a private one: private_cluster, the webhook firewall rule uses its address); the public IP
    endpoint is governed by network.publicAccessCidrs as before (GCP review F1).
    """
    return {"dns_endpoint_config": {"allow_external_traffic": dns_endpoint}}


def api_server(cluster: gcp.container.Cluster, dns_endpoint: bool) -> pulumi.Output[str]:
    """The address the kubeconfig (and so the Kubernetes provider) talks to: the DNS endpoint when it
    is on, else the IP endpoint (private when network.publicAccessCidrs is [])."""
    if dns_endpoint:
        return cluster.control_plane_endpoints_config.apply(lambda c: c.dns_endpoint_config.endpoint)
    return cluster.endpoint


def cluster_options(
    parent: pulumi.Resource, depends_on: list[pulumi.Resource] | None = None
) -> pulumi.ResourceOptions:
    """The default pool's settings (nodeConfig, initialNodeCount) only matter at creation.

    GKE creates the cluster with a default pool that remove_default_node_pool deletes; later
    reads of those fields must not force a replacement of the whole cluster. nodeLocations: stacks
    made before it was left unset still hold torchfleet:zones there (it is Optional+Computed in
    terraform-provider-google-beta resource_container_cluster.go, so unset keeps the state's value;
    ignoring it makes sure a zones change is never sent as desired_locations). `depends_on`: the
    secrets key's grant to the GKE service agent, without which creating the cluster fails.
    """
    return pulumi.ResourceOptions(
        parent=parent,
        depends_on=depends_on,
        ignore_changes=["nodeConfig", "initialNodeCount", "nodeLocations"],
        custom_timeouts=pulumi.CustomTimeouts(create="45m", update="60m", delete="45m"),
    )


class GcpCluster(pulumi.ComponentResource):
    def __init__(self, name: str, spec: PlatformSpec, opts: pulumi.ResourceOptions | None = None):
        super().__init__("torchfleet:clouds:GcpCluster", name, None, opts)
        labels = resource_labels(spec)
        self.network = GcpNetwork(f"{name}-network", spec, pulumi.ResourceOptions(parent=self))
        self.secrets_key = GcpSecretsKey(f"{name}-secrets", spec, labels, pulumi.ResourceOptions(parent=self))
        self.identity = GcpNodeIdentity(
            f"{name}-nodes", spec.project or "", spec.stack, pulumi.ResourceOptions(parent=self)
        )
        self.cluster = self._create_cluster(name, spec, labels)
        self.webhook_firewall = self._create_webhook_firewall(name)
        self.pools = GcpNodePools(
            f"{name}-pools",
            cluster=self.cluster,
            identity=self.identity,
            manager=spec.manager_pool,
            gpu_pools=spec.gpu_pools,
            zones=spec.zones,
            resource_labels=labels,
            cpu_pool=spec.cpu_pool,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.filestore = GcpFilestore(
            f"{name}-filestore",
            spec,
            network=self.network.vpc.name,
            node_range=self.network.plan.nodes,
            store_block=self.network.plan.store,
            labels=labels,
            node_service_account=self.identity.email,
            opts=pulumi.ResourceOptions(parent=self),
        )
        dns = spec.network.dns_endpoint
        config = pulumi.Output.secret(
            pulumi.Output.all(
                self.cluster.name, api_server(self.cluster, dns), self.cluster.master_auth.cluster_ca_certificate
            ).apply(lambda args: kubeconfig(*args, dns_endpoint=dns))
        )
        # cluster_identifier: see components/clouds/lifecycle.py, "clusterIdentifier" (flipping network.dnsEndpoint
        # moves the kubeconfig's server, which would otherwise replace every Kubernetes resource)
        provider = k8s.Provider(
            f"{name}-k8s",
            # A loopback kubeconfig only in a preview asked to run without the cluster (offline_preview.py).
            kubeconfig=offline_preview.provider_kubeconfig(config),
            cluster_identifier=self.cluster.id,
            opts=pulumi.ResourceOptions(parent=self),
        )
        datasets = (
            GcsDatasets(f"{name}-datasets", spec, self.network.vpc.id, pulumi.ResourceOptions(parent=self))
            if spec.datasets else None
        )
        self.admins = create_admins(f"{name}-admin", spec, provider, self, self.cluster.name)
        self.researchers = create_researchers(f"{name}-researcher", spec, self, self.cluster.name)
        self.handle = ClusterHandle(
            name=self.cluster.name,
            kubeconfig=config,
            provider=provider,
            zones=spec.zones,
            gpu_pools=spec.gpu_pools,
            store=self.filestore.store,
            manager_selector=dict(MANAGER_LABELS),
            # The CSI add-on is part of the cluster; control pods need the manager pool and, to pull
            # their images, Cloud NAT (GCP review F13); the PV needs the instance's address; the
            # training operator's webhook needs its firewall rule.
            ready=[self.cluster, self.pools.manager, self.filestore.instance, self.network.nat, self.webhook_firewall],
            outputs={
                "region": spec.region,
                "project": spec.project,
                "filestoreInstance": self.filestore.instance.id,
            },
            datasets=datasets.access if datasets else None,
        )
        self.register_outputs({"clusterName": self.cluster.name, **self.handle.outputs})

    def _create_cluster(self, name: str, spec: PlatformSpec, labels: dict[str, str]) -> gcp.container.Cluster:
        return gcp.container.Cluster(
            f"{name}-gke",
            # Regional: the control plane is replicated over the region's zones. No node_locations:
            # every pool says its own zones (pools.py), and the cluster's list is sent as
            # desired_locations, which moves every pool: "changing cluster locations will update the
            # locations of all node pools" (googleapis google/container/v1/cluster_service.proto,
            # ClusterUpdate.desired_locations), spreading a one-zone GPU pool over every zone (GCP
            # review M1). Left unset, GKE puts the short-lived default pool in its default zones.
            location=spec.region,
            network=self.network.vpc.id,
            subnetwork=self.network.subnet.id,
            networking_mode="VPC_NATIVE",
            ip_allocation_policy={
                "cluster_secondary_range_name": PODS_RANGE,
                "services_secondary_range_name": SERVICES_RANGE,
            },
            default_max_pods_per_node=MAX_PODS_PER_NODE,
            private_cluster_config=private_cluster(spec.network.public_access_cidrs),
            master_authorized_networks_config=authorized_networks(spec.network.public_access_cidrs),
            control_plane_endpoints_config=control_plane_endpoints(spec.network.dns_endpoint),
            master_auth={"client_certificate_config": {"issue_client_certificate": False}},
            # Application-layer secrets encryption with our Cloud KMS key (kms.py).
            database_encryption=database_encryption(self.secrets_key.key.id),
            # Our pools are separate resources (updated without touching the cluster); GKE needs
            # a default pool to create a cluster, which is removed at once.
            remove_default_node_pool=True,
            initial_node_count=1,
            # The short-lived default pool still should not run as the Editor default account.
            node_config={
                "service_account": self.identity.email,
                "oauth_scopes": list(OAUTH_SCOPES),
                "shielded_instance_config": {"enable_secure_boot": True, "enable_integrity_monitoring": True},
                "workload_metadata_config": {"mode": "GKE_METADATA"},
            },
            release_channel={"channel": RELEASE_CHANNEL},
            min_master_version=spec.kubernetes_version,
            workload_identity_config={"workload_pool": f"{spec.project}.svc.id.goog"},
            enable_shielded_nodes=True,
            # Dataplane V2 enforces the training namespace's NetworkPolicies (egress to NFS only
            # where allowed); without it GKE accepts NetworkPolicies and enforces none.
            datapath_provider="ADVANCED_DATAPATH",
            addons_config={
                "gcp_filestore_csi_driver_config": {"enabled": True},
                "gce_persistent_disk_csi_driver_config": {"enabled": True},
                # Cloud Storage FUSE for torchfleet:datasets (datasets.py), only where a stack declares some.
                **({"gcs_fuse_csi_driver_config": {"enabled": True}} if spec.datasets else {}),
            },
            cluster_autoscaling=autoscaling_config(),
            maintenance_policy={"recurring_window": MAINTENANCE_WINDOW},
            # Off: `pulumi destroy` must remove the cluster (the provider's default, true, fails the
            # destroy; issue 20). The data is kept by the Filestore instance's own options.
            deletion_protection=False,
            resource_labels=labels,
            # The key grant once it took effect (IAM propagation: GCP review F3), and the node
            # account's roles, which the short-lived default pool uses too (F13).
            opts=cluster_options(self, depends_on=[self.secrets_key.grant_effective, *self.identity.roles]),
        )

    def _create_webhook_firewall(self, name: str) -> gcp.compute.Firewall:
        """Control plane -> nodes on the webhook ports, from the control plane's private endpoint."""
        return gcp.compute.Firewall(
            f"{name}-webhooks",
            network=self.network.vpc.id,
            direction="INGRESS",
            description="GKE control plane to admission webhooks on the nodes",
            source_ranges=[self.cluster.private_cluster_config.apply(lambda c: f"{c.private_endpoint}/32")],
            target_service_accounts=[self.identity.email],
            allows=[{"protocol": "tcp", "ports": WEBHOOK_PORTS}],
            opts=pulumi.ResourceOptions(parent=self),
        )
