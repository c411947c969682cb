"""torchfleet:admins on GKE: each identity may fetch credentials (roles/container.clusterViewer on
the project, narrowed to this cluster by an IAM condition) and is cluster-admin in this cluster only
(a ClusterRoleBinding to its email).
torchfleet:researchers: the same credentials role, and the training namespace's torchfleet-researcher
Role through a RoleBinding to its email (components/kube/researchers.py).

GKE checks IAM first and Kubernetes RBAC second, and a binding to a user's or service account's
email grants RBAC to exactly that identity:
https://cloud.google.com/kubernetes-engine/docs/how-to/role-based-access-control#interaction_with_iam
Project-level roles/container.admin would make them admin of every cluster in the project.
"""

from __future__ import annotations

import hashlib

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from components.spec import PlatformSpec

# It also holds container.clusters.connect, which the DNS-based endpoint checks before the API
# server sees a request (network.dnsEndpoint): iann0036/iam-dataset gcp/roles/container.clusterViewer.json
# at 9cebc0b3 lists it; the copy at 1818bc70, before the DNS endpoint existed, does not.
CREDENTIALS_ROLE = "roles/container.clusterViewer"


def this_cluster_only(stack: str, cluster_name: pulumi.Input[str]) -> pulumi.Output[dict]:
    """The grant's IAM condition: the role's permissions on clusters (get, connect: credentials and the
    DNS endpoint) for this cluster only; its project-level ones (clusters.list) as before (GCP review m4).

    container.googleapis.com is among the services whose requests carry resource attributes
    (https://cloud.google.com/iam/docs/conditions-resource-attributes, "Resource service values");
    `resource.type != T || resource.name ...` keeps the role's other resource types (the project, for
    clusters.list) as they were. The name is matched on its end, "/clusters/<name>", which both the
    locations/ and zones/ forms of a cluster's name have (a same-named cluster in another location of
    the project would match too). Not yet confirmed live: one `get-credentials --dns-endpoint` and
    `kubectl get ns` as an admin settles it (docs/deploy-gcp.md). The condition also makes the binding our
    own: removing an admin deletes this conditional binding, never an unconditional grant of the same
    role that existed before (IAMMember deletes the member from the binding with its role *and*
    condition: terraform-provider-google-beta tpgiamresource/resource_iam_member.go, condition ForceNew).
    """
    return pulumi.Output.from_input(cluster_name).apply(
        lambda name: {
            "title": f"torchfleet {stack} cluster only"[:100],
            "description": "roles/container.clusterViewer on this Torchfleet cluster (components/clouds/gcp/access.py)",
            "expression": (
                'resource.type != "container.googleapis.com/Cluster" || '
                f'resource.name.endsWith("/clusters/{name}")'
            ),
        }
    )


def rbac_subject(member: str) -> dict[str, str]:
    """The Kubernetes subject for an IAM member (user:<email> or serviceAccount:<email>)."""
    _, email = member.split(":", 1)
    return {"kind": "User", "name": email, "apiGroup": "rbac.authorization.k8s.io"}


def create_admins(
    name: str, spec: PlatformSpec, provider: k8s.Provider, parent: pulumi.Resource, cluster_name: pulumi.Input[str]
) -> list[pulumi.Resource]:
    made: list[pulumi.Resource] = []
    for member in spec.access.admins:
        key = hashlib.sha256(member.encode()).hexdigest()[:10]  # by identity, not position
        made.append(
            gcp.projects.IAMMember(
                f"{name}-{key}",
                project=spec.project or "",
                role=CREDENTIALS_ROLE,
                member=member,
                condition=this_cluster_only(spec.stack, cluster_name),
                opts=pulumi.ResourceOptions(parent=parent),
            )
        )
        made.append(
            k8s.rbac.v1.ClusterRoleBinding(
                f"{name}-{key}-rbac",
                metadata={"name": f"torchfleet-admin-{key}"},
                role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
                subjects=[rbac_subject(member)],
                opts=pulumi.ResourceOptions(parent=parent, provider=provider),
            )
        )
    return made


def create_researchers(
    name: str, spec: PlatformSpec, parent: pulumi.Resource, cluster_name: pulumi.Input[str]
) -> list[gcp.projects.IAMMember]:
    """roles/container.clusterViewer for each identity of torchfleet:researchers: container.clusters.get,
    which `gcloud container clusters get-credentials` needs; GKE documents that this permission lets a
    user authenticate to the project's clusters without authorizing anything inside them
    (https://cloud.google.com/kubernetes-engine/docs/how-to/role-based-access-control#interaction_with_iam).
    What they may do inside is the RoleBinding the training layer makes."""
    return [
        gcp.projects.IAMMember(
            f"{name}-{hashlib.sha256(member.encode()).hexdigest()[:10]}",  # by identity, not position
            project=spec.project or "",
            role=CREDENTIALS_ROLE,
            member=member,
            condition=this_cluster_only(spec.stack, cluster_name),
            opts=pulumi.ResourceOptions(parent=parent),
        )
        for member in spec.access.researchers
    ]
