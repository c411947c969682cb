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


def fixed_name(r: Any) -> str | None:
    """The cloud name a resource asks for itself, or None when it has a random part or none."""
    if r.type.startswith("kubernetes:") and r.type != "kubernetes:helm.sh/v3:Release":
        return None
    found = limits.NAME_INPUTS.get(r.type)
    if found is None:
        return None
    value = r.inputs.get(found[0])
    return value if isinstance(value, str) else None


def replace_collisions(resources: list[Any]) -> list[str]:
    """Resources a replacement would recreate under the same name while the old one still exists.

    Retained resources are not in the list: deleting one only drops it from the state, so its
    replacement collides with it whatever the order; that is the point for the kept data (a change
    that would replace the store fails on the name rather than swap the data for an empty store).
    """
    return [
        f"{_key(r)} ({fixed_name(r)})"
        for r in resources
        if r.custom
        and fixed_name(r) is not None
        and not r.options.get("deleteBeforeReplace")
        and not r.options.get("retainOnDelete")
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
    deps = [keys_by_urn.get(u, u) for u in o.get("dependencies") or []]
    if deps:
        out["dependsOn"] = deps
    return out
