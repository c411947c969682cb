"""DatasetSpec: one bucket a stack lets jobs mount read-only (parsed and checked in datasets.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    bucket: str  # Azure: "<account>/<container>"
    prefix: str = ""  # "" or "dir/sub/" (always ending with '/')
    resource_group: str | None = None  # Azure: the storage account's resource group
    kms_key_arn: str | None = None  # AWS: the bucket's SSE-KMS key, which the training pods may decrypt with

    @property
    def account(self) -> str:
        return self.bucket.split("/", 1)[0]

    @property
    def container(self) -> str:
        return self.bucket.split("/", 1)[-1]
