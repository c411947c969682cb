"""torchfleet:researchers in the training namespace: who gets the torchfleet-researcher Role
(k8s/base/jobs/role-researcher.yaml) besides the group torchfleet:researchers (pure manifest dicts).

How each cloud names an identity to Kubernetes RBAC:
- AWS: nothing here. Each identity's EKS access entry carries the Kubernetes group
  torchfleet:researchers, which k8s/base/jobs/rolebinding-researchers.yaml binds
  (components/clouds/aws/cluster.py; https://docs.aws.amazon.com/eks/latest/userguide/create-k8s-group-access-entry.html).
- GCP: a user or service account is the User named by its email
  (https://cloud.google.com/kubernetes-engine/docs/how-to/role-based-access-control#interaction_with_iam),
  as torchfleet:admins' ClusterRoleBindings (components/clouds/gcp/access.py).
- Azure: a Microsoft Entra group is the Group named by its object id
  (https://learn.microsoft.com/azure/aks/azure-ad-rbac); spec/access.py takes only groups here,
  because AKS names a user in Kubernetes RBAC by a name the stack does not know (its sign-in name,
  not the object id the stack lists).
"""

from __future__ import annotations

from typing import Any

from components.kube.manifests import PART_OF

ROLE = "torchfleet-researcher"  # k8s/base/jobs/role-researcher.yaml
BINDING = "torchfleet-researcher-identities"
RBAC = "rbac.authorization.k8s.io"


def subject(cloud: str, identity: str) -> dict[str, str] | None:
    """The RBAC subject of one torchfleet:researchers entry, or None where the cloud binds a group instead."""
    kind, _, name = identity.partition(":")
    if cloud == "gcp":  # user:<email> or serviceAccount:<email>
        return {"apiGroup": RBAC, "kind": "User", "name": name}
    if cloud == "azure":
        if kind != "Group":
            raise ValueError(f"torchfleet:researchers on azure takes Group:<object id>, got {identity!r}")
        return {"apiGroup": RBAC, "kind": "Group", "name": name}
    return None


def role_binding(namespace: str, cloud: str, researchers: tuple[str, ...]) -> dict[str, Any] | None:
    """One RoleBinding of every researcher this cloud names one by one; None when there is none."""
    subjects = [s for s in (subject(cloud, r) for r in researchers) if s is not None]
    if not subjects:
        return None
    return {
        "apiVersion": f"{RBAC}/v1",
        "kind": "RoleBinding",
        "metadata": {"name": BINDING, "namespace": namespace, "labels": dict(PART_OF)},
        "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": ROLE},
        "subjects": subjects,
    }
