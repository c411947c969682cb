"""What `pulumi destroy` and a replacing `pulumi up` would do, read from the recorded resource options.

The engine decides both from the options each resource registers with, so they can be checked offline
(torchfleet/preview/monitor.py records them):

- destroy: a `protect`ed resource fails the whole destroy already in its preview, so nothing is deleted
  (Pulumi docs, resource option protect: "it will be an error to do a Pulumi deployment which tries to
  delete a protected resource"; pulumi/pulumi pkg/resource/deploy/step.go, DeleteStep: deleteProtectedError
  before the dry-run branch). `retainOnDelete` drops a resource from the state and leaves it in the cloud;
  everything else is deleted.
- replace: unless a resource is `deleteBeforeReplace`, the engine creates the replacement first and deletes
  the old one afterwards (https://www.pulumi.com/docs/iac/concepts/options/deletebeforereplace/). A resource
  whose cloud name is fixed then fails with "already exists"; one whose name has a random part (Pulumi's
  auto-naming, a provider's name prefix) does not.
- Kubernetes objects are left out of the replace check: pulumi-kubernetes replaces an object with a fixed
  metadata.name by deleting it first (its provider's Diff sets DeleteBeforeReplace when the name is not
  auto-generated). Helm releases are not objects and are checked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from components import limits
from components.clouds import lifecycle


@dataclass(frozen=True)
class DestroyPlan:
    blocked: list[str]  # protected: `pulumi destroy` fails on these and deletes nothing
    kept: list[str]  # retainOnDelete: left in the cloud, dropped from the state
    deleted: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"blocked": self.blocked, "kept": self.kept, "deleted": len(self.deleted)}


def _key(r: Any) -> str:
    return f"{r.type}::{r.name}"


def destroy_plan(resources: list[Any]) -> DestroyPlan:
    """Cloud and Kubernetes resources only: components and providers hold nothing of their own."""
    blocked, kept, deleted = [], [], []
    for r in resources:
        if not r.custom or r.type.startswith("pulumi:providers:"):
            continue
        if r.options.get("protect"):
            blocked.append(_key(r))
        elif r.options.get("retainOnDelete"):
            kept.append(_key(r))
        else:
            deleted.append(_key(r))
    return DestroyPlan(blocked, kept, deleted)


# Resources a cloud identifies by some of their inputs rather than by a name with a random part,
# where an input outside those can force a replacement: the replacement, created first, would be a
# duplicate of the old one (EC2 and EKS refuse it; an ASG tag or a role assignment written twice is
# then deleted with the old resource). They must be delete-before-replace.
UNIQUE_BY: dict[str, tuple[str, ...]] = {
    "aws:autoscaling/tag:Tag": ("autoscalingGroupName", "tag.key"),  # propagateAtLaunch forces one
    "aws:efs/mountTarget:MountTarget": ("fileSystemId", "subnetId"),  # one per zone; ipAddress forces one
    "aws:efs/fileSystem:FileSystem": ("creationToken",),
    "aws:eks/accessEntry:AccessEntry": ("clusterName", "principalArn"),  # type forces one
    "aws:eks/accessPolicyAssociation:AccessPolicyAssociation": ("clusterName", "principalArn", "policyArn"),
    # a route table holds one route per endpoint service, so a second endpoint on the same tables fails
    # (https://docs.aws.amazon.com/vpc/latest/privatelink/gateway-endpoints.html#gateway-endpoint-routing)
    "aws:ec2/vpcEndpoint:VpcEndpoint": ("vpcId", "serviceName"),
    # a VPC holds one subnet per range: a replacement created first fails InvalidSubnet.Conflict
    # (its cidrBlock and availabilityZone are ForceNew: force_new/aws.yaml)
    "aws:ec2/subnet:Subnet": ("vpcId", "cidrBlock"),
    "azure-native:authorization:RoleAssignment": ("principalId", "roleDefinitionId", "scope"),  # principalType
    "azure-native:containerservice:MaintenanceConfiguration": ("configName",),
    "azure-native:privatedns:PrivateZone": ("privateZoneName",),
    "azure-native:network:PrivateDnsZoneGroup": ("privateEndpointName",),  # one zone group per endpoint
    "azure-native:monitor:DiagnosticSetting": ("resourceUri", "name"),  # azure/audit.py
}
# Identified by inputs too, but every input that forces a replacement is one of them: a replacement
# is a different resource, never a duplicate.
KEY_ONLY = {
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment",
    "aws:ec2/routeTableAssociation:RouteTableAssociation",
    "aws:efs/backupPolicy:BackupPolicy",
    "aws:efs/fileSystemPolicy:FileSystemPolicy",
    "aws:eks/podIdentityAssociation:PodIdentityAssociation",
    "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember",
    "gcp:projects/iAMMember:IAMMember",
    "gcp:projects/serviceIdentity:ServiceIdentity",  # one per project and service; never deleted
}
# Named by Pulumi's auto-naming (a random suffix) or by the cloud (an id): never a collision.
RANDOM_NAMED = {
    "aws:ec2/eip:Eip",
    "aws:ec2/internetGateway:InternetGateway",
    "aws:ec2/launchTemplate:LaunchTemplate",
    "aws:ec2/natGateway:NatGateway",
    "aws:ec2/routeTable:RouteTable",
    "aws:ec2/vpc:Vpc",
    "aws:efs/accessPoint:AccessPoint",
    "aws:kms/key:Key",
    "gcp:compute/firewall:Firewall",
    "azure-native:privatedns:VirtualNetworkLink",
    "azure-native:network:NetworkSecurityGroup",  # the store endpoint subnet's (azure/network.py)
    "azure-native:operationalinsights:Workspace",  # the audit logs' (azure/audit.py)
    "pulumi-python:dynamic:Resource",  # propagation.py: no cloud object at all
}


# Names that hash every input forcing a replacement: a replacement always has a new name, so Pulumi's
# create-first order never meets the old one (azure manager_pool.py: the manager pool moves that way, and the
# CPU pool, cpu_pool.py).
def _azure_manager_pool_name(name: str | None) -> bool:
    # Imported here: manager_pool imports pulumi_azure_native, and the CLI's slim install (no `platform`
    # extra) reaches this module through the sweep's cost check (tests/torchfleet/test_slim_install.py).
    from components.clouds.azure import cpu_pool, manager_pool

    return manager_pool.is_hashed_name(name) or cpu_pool.is_hashed_name(name)


HASHED_NAMES = {"azure-native:containerservice:AgentPool": _azure_manager_pool_name}


def _path(inputs: dict[str, Any], dotted: str) -> Any:
    value: Any = inputs
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def fixed_name(r: Any) -> str | None:
    """What identifies a resource in its cloud when no part of it is random, or None."""
    if r.type.startswith("kubernetes:") and r.type != "kubernetes:helm.sh/v3:Release":
        return None
    if r.type in UNIQUE_BY:
        parts = [_path(r.inputs, k) for k in UNIQUE_BY[r.type]]
        return "/".join(str(p) for p in parts) if all(p is not None for p in parts) else None
    found = limits.NAME_INPUTS.get(r.type)
    if found is None:
        return None
    value = r.inputs.get(found[0])
    return value if isinstance(value, str) else None


def unclassified(resources: list[Any]) -> list[str]:
    """Cloud resource types this module cannot judge: a new type must be put in one of the tables."""
    known = set(limits.NAME_INPUTS) | set(UNIQUE_BY) | KEY_ONLY | RANDOM_NAMED
    return sorted(
        {
            r.type
            for r in resources
            if r.custom and not r.type.startswith(("kubernetes:", "pulumi:providers:")) and r.type not in known
        }
    )


def replace_collisions(resources: list[Any]) -> list[str]:
    """Resources a replacement would recreate under the same name while the old one still exists.

    The store and what holds it (components/clouds/lifecycle.py) are not in the list: their fixed
    names are the point. A change that would replace the store fails on the name rather than swap
    the checkpoints for an empty store (and a kept one is only dropped from the state on delete,
    so it would collide whatever the order).
    """
    data = {t for kept in lifecycle.KEPT_WITH_THE_DATA.values() for t in kept}
    return [
        f"{_key(r)} ({fixed_name(r)})"
        for r in resources
        if r.custom
        and r.type not in data
        and fixed_name(r) is not None
        and not r.options.get("deleteBeforeReplace")
        and not r.options.get("retainOnDelete")
        and not HASHED_NAMES.get(r.type, lambda _: False)(fixed_name(r))
    ]


def printable_options(r: Any, keys_by_urn: dict[str, str]) -> dict[str, Any]:
    """The options `torchfleet synth` prints: those that decide destroy, replace and order."""
    o = r.options
    out: dict[str, Any] = {}
    for name in ("protect", "retainOnDelete", "deleteBeforeReplace"):
        if o.get(name):
            out[name] = True
    if o.get("ignoreChanges"):
        out["ignoreChanges"] = o["ignoreChanges"]
    if o.get("import"):
        out["import"] = o["import"]
    deps = sorted(keys_by_urn.get(u, u) for u in o.get("dependencies") or [])
    if deps:
        out["dependsOn"] = deps
    return out
