"""Parsing who may administer the cluster (torchfleet:admins, torchfleet:deployerPrincipalType) and
the AWS provider credentials the kubeconfig must use (aws:profile, aws:assumeRoles)."""

from __future__ import annotations

import re
from typing import Any

from components.spec.fields import _k, _Problems, _r
from components.spec.model import AccessSpec

# Azure's principalType values for a role assignment (ARM refuses a type that does not match the
# object: "UnmatchedPrincipalType"). https://learn.microsoft.com/rest/api/authorization/role-assignments/create
AZURE_PRINCIPAL_TYPES = ("User", "Group", "ServicePrincipal")
_GUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
# What each cloud takes as an admin, with an example for the error message.
# AWS access entries take IAM roles and users (not assumed-role session ARNs):
# https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateAccessEntry.html
# GCP IAM members: https://cloud.google.com/iam/docs/principal-identifiers
ADMIN_FORMS: dict[str, tuple[str, str]] = {
    "aws": (r"arn:aws[a-z-]*:iam::\d{12}:(role|user)/[\w+=,.@/-]{1,512}", "arn:aws:iam::123456789012:role/platform"),
    # user: and serviceAccount: only: a Kubernetes RBAC binding to a Google Group needs Google
    # Groups for RBAC set up on the cluster first (clouds/gcp/access.py).
    "gcp": (r"(user|serviceAccount):[^@\s:]+@[^@\s]+\.[a-z]{2,}", "user:alice@example.com"),
    "azure": (rf"({'|'.join(AZURE_PRINCIPAL_TYPES)}):{_GUID}", "Group:00000000-0000-0000-0000-000000000000"),
}
# "Access entries per cluster: 3,000", not adjustable (quota L-C56B9FC3):
# https://docs.aws.amazon.com/eks/latest/userguide/service-quotas.html (read 2026-11-25). The cluster
# creator's entry (aws/cluster.py bootstrap_cluster_creator_admin_permissions) and the node role's,
# which EKS makes for managed node groups, take two (issue 23: list caps per cloud).
MAX_EKS_ADMINS = 3000 - 2
_ROLE_ARN = r"arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]{1,512}"


def parse_access(p: _Problems, raw: dict[str, Any], cloud: str) -> AccessSpec:
    key = _k("admins")
    value = raw.get(key)
    admins: list[str] = []
    if value is not None and cloud == "local":
        p.add(key, "the local stack uses your kubeconfig's own access; remove this key")
    elif value is not None and not isinstance(value, list):
        p.add(key, f"expected a list like [{ADMIN_FORMS['aws'][1]}], got {_r(value)}")
    elif value is not None:
        pattern, example = ADMIN_FORMS[cloud]
        for i, item in enumerate(value):
            if not isinstance(item, str) or not re.fullmatch(pattern, item):
                p.add(f"{key}[{i}]", f"expected an identity like {example} ({cloud}), got {_r(item)}")
            else:
                admins.append(item)
        if len(set(admins)) != len(admins):
            p.add(key, "each identity once")
        if cloud == "aws" and len(value) > MAX_EKS_ADMINS:
            p.add(key, f"at most {MAX_EKS_ADMINS} on aws, got {len(value)}: EKS takes 3,000 access entries per "
                       "cluster (not adjustable) and the deployer's and the nodes' role hold two; grant a role "
                       "that your admins assume instead")
    deployer_key = _k("deployerPrincipalType")
    deployer = raw.get(deployer_key, "User")
    if deployer_key in raw and cloud != "azure":
        p.add(deployer_key, "only Azure role assignments take a principal type; remove this key")
    elif deployer not in AZURE_PRINCIPAL_TYPES:
        p.add(
            deployer_key,
            f"must be one of {', '.join(AZURE_PRINCIPAL_TYPES)} (ServicePrincipal when `pulumi up` runs as a "
            f"service principal or managed identity, as in CI), got {_r(deployer)}",
        )
    return AccessSpec(admins=tuple(admins), deployer_type=deployer if deployer in AZURE_PRINCIPAL_TYPES else "User")


def aws_credentials(p: _Problems, raw: dict[str, Any]) -> tuple[str | None, str | None]:
    """(profile, role ARN) of the AWS provider config, for the kubeconfig's `aws eks get-token`."""
    profile = raw.get("aws:profile")
    if profile is not None and (not isinstance(profile, str) or not re.fullmatch(r"[\w.+@-]{1,128}", profile)):
        p.add("aws:profile", f"expected a profile name of ~/.aws/config, got {_r(profile)}")
        profile = None
    roles = raw.get("aws:assumeRoles", raw.get("aws:assumeRole"))
    if isinstance(roles, dict):
        roles = [roles]
    role_arn = None
    if roles is not None:
        first = roles[0] if isinstance(roles, list) and roles else None
        arn = first.get("roleArn") if isinstance(first, dict) else None
        if not isinstance(arn, str) or not re.fullmatch(_ROLE_ARN, arn):
            key = "aws:assumeRoles" if "aws:assumeRoles" in raw else "aws:assumeRole"
            p.add(key, f"expected [{{roleArn: arn:aws:iam::123456789012:role/deployer}}], got {_r(roles)}")
        else:
            role_arn = arn
    return profile if isinstance(profile, str) else None, role_arn
