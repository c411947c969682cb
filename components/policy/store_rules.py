"""The shared store rules: encrypted at rest and kept by `pulumi destroy`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from components.policy.inputs import _truthy
from components.policy.model import UNKNOWN, Limits, Resource, Violation, _v

# Stores and how to tell they are encrypted at rest. Filestore and Azure Storage encrypt every
# byte at rest and cannot be turned off:
#   https://cloud.google.com/docs/security/encryption/default-encryption
#   https://learn.microsoft.com/azure/storage/common/storage-service-encryption
# EFS encrypts only when asked at creation: https://docs.aws.amazon.com/efs/latest/ug/encryption-at-rest.html
STORES: dict[str, Callable[[dict], Any] | None] = {
    "aws:efs/fileSystem:FileSystem": lambda inputs: inputs.get("encrypted"),
    "gcp:filestore/instance:Instance": None,
    "azure-native:storage:StorageAccount": None,
    "azure-native:storage:FileShare": None,
}


def store_encrypted(resources: list[Resource], limits: Limits) -> Iterator[Violation]:
    for r in resources:
        encrypted = STORES.get(r["type"])
        if encrypted is None:
            continue
        value = encrypted(r["inputs"])
        if value is not UNKNOWN and not _truthy(value):
            yield _v("store-encrypted", r, "shared store is not encrypted at rest; set encrypted: true")


def store_protected(resources: list[Resource], limits: Limits) -> Iterator[Violation]:
    """Checkpoints and data live on the store: `pulumi destroy` must keep it.

    Kept means the resource option retainOnDelete, not `protect`: a protected resource makes the
    whole `pulumi destroy` fail in its preview, so the cluster and its GPUs would keep running
    (issue 20). CrossGuard does not pass retainOnDelete to policies (PolicyResourceOptions has no
    such field), so there the rule cannot tell and stays silent.
    """
    for r in resources:
        options = r.get("options") or {}
        if r["type"] in STORES and "retainOnDelete" in options and not options["retainOnDelete"]:
            yield _v("store-protected", r, "shared store is not kept on destroy (resource option retainOnDelete)")
