"""Parsing who may administer the cluster (torchfleet:admins, torchfleet:deployerPrincipalType), who may
run jobs in it (torchfleet:researchers), how the Azure kubeconfig logs in (torchfleet:kubeLogin) and the
AWS provider credentials the kubeconfig must use (aws:profile, aws:assumeRoles)."""

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
# kubelogin's login modes that authenticate as the identity Pulumi's azure-native provider uses, and
# whether that identity is a service principal (or managed identity). kubelogin reads (Azure/kubelogin
# pkg/internal/token/options.go UpdateFromEnv, docs/book/src/concepts/login-modes/*.md, 2026-08-14):
# azurecli: the `az` session (the provider's credential when it uses the CLI);
# spn with --use-azurerm-env-vars: ARM_CLIENT_ID, ARM_CLIENT_SECRET (or ARM_CLIENT_CERTIFICATE_PATH),
#   ARM_TENANT_ID, the variables the provider reads for a service principal;
# workloadidentity: AZURE_CLIENT_ID, AZURE_TENANT_ID, AZURE_FEDERATED_TOKEN_FILE (a federated token).
KUBE_LOGIN_MODES = {"azurecli": False, "spn": True, "workloadidentity": True}
# The Kubernetes group torchfleet:researchers' EKS access entries carry, bound to the training
# namespace's torchfleet-researcher Role by k8s/base/jobs/rolebinding-researchers.yaml.
RESEARCHERS_GROUP = "torchfleet:researchers"
_ROLE_ARN = r"arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]{1,512}"


def _identities(p: _Problems, raw: dict[str, Any], cloud: str, name: str) -> tuple[str, ...]:
    """torchfleet:admins or torchfleet:researchers: a list of this cloud's identities, each once."""
    key = _k(name)
    value = raw.get(key)
    found: list[str] = []
    if value is not None and cloud == "local":
        p.add(key, "the local stack uses your kubeconfig's own access; remove this key")
    elif value is not None and not isinstance(value, list):
        p.add(key, f"expected a list like [{ADMIN_FORMS.get(cloud, ADMIN_FORMS['aws'])[1]}], got {_r(value)}")
    elif value is not None:
        pattern, example = ADMIN_FORMS[cloud]
        for i, item in enumerate(value):
            if not isinstance(item, str) or not re.fullmatch(pattern, item):
                p.add(f"{key}[{i}]", f"expected an identity like {example} ({cloud}), got {_r(item)}")
            else:
                found.append(item)
        if len(set(found)) != len(found):
            p.add(key, "each identity once")
    return tuple(found)


def parse_access(p: _Problems, raw: dict[str, Any], cloud: str) -> AccessSpec:
    admins = _identities(p, raw, cloud, "admins")
    researchers = _identities(p, raw, cloud, "researchers")
    if cloud == "azure":
        # Kubernetes RBAC on AKS names an Entra group by its object id, a user by a sign-in name
        # the stack does not know (components/kube/researchers.py): groups only.
        for i, item in enumerate(raw.get(_k("researchers")) or []):
            if isinstance(item, str) and item in researchers and not item.startswith("Group:"):
                p.add(f"{_k('researchers')}[{i}]", f"on azure a Group:<object id> (put the researchers in a "
                                                   f"Microsoft Entra group), got {_r(item)}")
        researchers = tuple(r for r in researchers if r.startswith("Group:"))
    if cloud == "azure" and not raw.get(_k("admins")):
        # No implicit grant follows whoever runs `pulumi up` (it moved to the last one to run it and
        # collided with a listed admin: issue 29); the list is the one source of cluster admins, and
        # the training layer is created through it, so the deployer lists itself.
        p.add(_k("admins"), "required on azure: list every cluster admin, yourself (who runs `pulumi up`) and CI "
                            "included, as User|Group|ServicePrincipal:<object id>; yours: `az ad signed-in-user "
                            "show --query id -o tsv` (a service principal: `az ad sp show --id $ARM_CLIENT_ID "
                            "--query id -o tsv`)")
    both = sorted(set(admins) & set(researchers))
    if both:
        # On EKS one principal has one access entry (a second one fails the deployment), and an
        # administrator can do all a researcher can.
        p.add(_k("researchers"), f"{', '.join(both)} already in {_k('admins')}, which can do everything a "
                                 "researcher can; list each identity in one of the two")
    total = sum(len(v) for v in (raw.get(_k("admins")), raw.get(_k("researchers"))) if isinstance(v, list))
    if cloud == "aws" and total > MAX_EKS_ADMINS:
        key = _k("admins") if _k("researchers") not in raw else f"{_k('admins')} + {_k('researchers')}"
        p.add(key, f"at most {MAX_EKS_ADMINS} on aws, got {total}: EKS takes 3,000 access entries per "
                   "cluster (not adjustable) and the deployer's and the nodes' role hold two; grant a role "
                   "that your admins (or researchers) assume instead")
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
    deployer = deployer if deployer in AZURE_PRINCIPAL_TYPES else "User"
    login_key = _k("kubeLogin")
    login = raw.get(login_key, "azurecli")
    if login_key in raw and cloud != "azure":
        p.add(login_key, "only the Azure kubeconfig uses kubelogin; remove this key")
        login = "azurecli"
    elif not isinstance(login, str) or login not in KUBE_LOGIN_MODES:
        p.add(login_key, f"must be one of {', '.join(KUBE_LOGIN_MODES)} (spn: the provider's ARM_CLIENT_ID/"
                         f"ARM_CLIENT_SECRET/ARM_TENANT_ID), got {_r(login)}")
        login = "azurecli"
    elif (KUBE_LOGIN_MODES[login] and deployer != "ServicePrincipal"
          and not any(item.startswith(f"{deployer_key}:") for item in p.items)):
        # kubelogin must log in as the provider's identity, whose cluster admin comes from its own
        # torchfleet:admins entry (no implicit grant since issue 29): a service principal's login with a
        # User deployer type says the config describes someone else.
        p.add(deployer_key, f"{login_key} {login} logs in as a service principal: set "
                            f"{deployer_key}: ServicePrincipal, got {_r(deployer)}")
    return AccessSpec(admins=admins, researchers=researchers, deployer_type=deployer, kube_login=login)


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
