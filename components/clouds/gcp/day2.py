"""GCP's day-2 refusals (components/clouds/day2.py): changes GKE or Filestore refuse, or that would swap
the checkpoints for an empty store, each named with its key and the safe sequence.

Everything else a GCP stack's config can change goes through in one `pulumi up` (docs/day-2-gcp.md).
"""

from __future__ import annotations

from components.clouds.day2 import ConfigChange, Refusal
from components.clouds.gcp.filestore import MOVE_STEPS, MOVE_WHY, reserved_range, store_plan
from components.clouds.gcp.network import address_plan
from components.spec import PlatformSpec


def _identity(spec: PlatformSpec) -> dict[str, str | None]:
    storage = spec.storage
    store = address_plan(spec.network.cidr).store
    return {**store_plan(spec), "reserved_ip_range": reserved_range(store, storage.tier, storage.size_gb or 0)}


def store_moved(change: ConfigChange) -> list[Refusal]:
    """The Filestore instance's location, tier and reserved range are ForceNew
    (terraform-provider-google-beta services/filestore/resource_filestore_instance.go), and a name is
    unique per location only, so the provider would make a second, empty instance. gcp/filestore.py
    ignores these inputs and fails the preview; this says so before the `up` (GCP review B1)."""
    old, new = _identity(change.old), _identity(change.new)
    out = []
    if old["location"] != new["location"]:
        followed_the_first_zone = not change.new.storage.zone and change.old.zones[:1] != change.new.zones[:1]
        hint = (
            f"the stack's first zone moved ({change.old.zones[0]} -> {change.new.zones[0]}) and storage.zone is not "
            "set, so the store would follow it" if followed_the_first_zone
            else f"the store is in {old['location']}, the config asks for {new['location']}"
        )
        out.append(Refusal(
            "torchfleet:storage.zone",
            f"{hint}: {MOVE_WHY}",
            f"set torchfleet:storage.zone: {old['location']} (then zones may change freely); to move the data: "
            f"{MOVE_STEPS}",
        ))
    if old["tier"] != new["tier"]:
        out.append(Refusal(
            "torchfleet:storage.tier",
            f"{old['tier']} -> {new['tier']}: {MOVE_WHY}",
            f"keep storage.tier: {old['tier']}; to change tier: {MOVE_STEPS}",
        ))
    elif change.old.network.cidr != change.new.network.cidr and old["reserved_ip_range"] != new["reserved_ip_range"]:
        out.append(Refusal(
            "torchfleet:network.cidr",
            f"the store's reserved range is cut from network.cidr ({old['reserved_ip_range']} -> "
            f"{new['reserved_ip_range']}), and the instance's networks block is ForceNew: a new, empty instance",
            f"keep network.cidr: {change.old.network.cidr}; to renumber: {MOVE_STEPS}",
        ))
    elif old["reserved_ip_range"] != new["reserved_ip_range"] and old["location"] == new["location"]:
        out.append(Refusal(
            "torchfleet:storage.sizeGb",
            f"the store's reserved range would change ({old['reserved_ip_range']} -> {new['reserved_ip_range']}: a "
            "ZONAL store crossing the 10 TiB band needs a /24, gcp/filestore.py reserved_range), and the networks "
            "block is ForceNew: a new, empty instance",
            f"stay on the same side of 10 TiB (10240 GiB); to cross it: {MOVE_STEPS}",
        ))
    return out


def basic_store_shrunk(change: ConfigChange) -> list[Refusal]:
    """A Basic-tier instance only grows: "You can't decrease the capacity of Basic HDD or Basic SSD
    instances" (https://cloud.google.com/filestore/docs/editing-instances); the update would fail after
    the rest of the `up` was applied. fileShares.capacityGb is otherwise updated in place."""
    old, new = change.old.storage, change.new.storage
    if not (old.tier or "").startswith("BASIC_") or old.tier != new.tier:
        return []
    if (new.size_gb or 0) >= (old.size_gb or 0):
        return []
    return [Refusal(
        "torchfleet:storage.sizeGb",
        f"{old.size_gb} -> {new.size_gb} GiB: a {old.tier} Filestore instance cannot shrink",
        f"keep storage.sizeGb at {old.size_gb} or more; for a smaller store: {MOVE_STEPS}",
    )]


def _minor(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def kubernetes_minor_skipped(change: ConfigChange) -> list[Refusal]:
    """kubernetesVersion is min_master_version: raising it asks GKE to upgrade the control plane to it,
    and GKE upgrades a control plane one minor version at a time
    (https://cloud.google.com/kubernetes-engine/docs/how-to/upgrading-a-cluster#upgrading_the_cluster);
    the update fails after the rest of the `up` was applied. Lowering it changes nothing (a floor)."""
    old, new = _minor(change.old.kubernetes_version), _minor(change.new.kubernetes_version)
    if new[0] != old[0] or new[1] - old[1] <= 1:
        return []
    steps = [f"{old[0]}.{m}" for m in range(old[1] + 1, new[1] + 1)]
    return [Refusal(
        "torchfleet:kubernetesVersion",
        f"{change.old.kubernetes_version} -> {change.new.kubernetes_version} skips a minor; GKE upgrades the control "
        "plane one minor at a time (the node pools follow it on the release channel)",
        "one `pulumi up` per minor, " + ", then ".join(f"kubernetesVersion: \"{s}\"" for s in steps)
        + ", each after GKE has upgraded the node pools to the previous one (gcloud container node-pools list)",
    )]


RULES = [store_moved, basic_store_shrunk, kubernetes_minor_skipped]
