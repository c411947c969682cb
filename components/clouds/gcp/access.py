"""torchfleet:admins on GKE: each identity may fetch credentials (roles/container.clusterViewer on
the project) and is cluster-admin in this cluster only (a ClusterRoleBinding to its email).
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


def rbac_subject(member: str) -> dict[str, str]:
    """The Kubernetes subject for an IAM member (user:<email> or serviceAccount:<email>)."""
    _, email = member.split(":", 1)
    return {"kind": "User", "name": email, "apiGroup": "rbac.authorization.k8s.io"}


def create_admins(
    name: str, spec: PlatformSpec, provider: k8s.Provider, parent: pulumi.Resource
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


def create_researchers(name: str, spec: PlatformSpec, parent: pulumi.Resource) -> list[gcp.projects.IAMMember]:
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
            opts=pulumi.ResourceOptions(parent=parent),
        )
        for member in spec.access.researchers
    ]
