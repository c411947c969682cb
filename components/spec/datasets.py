"""`torchfleet:datasets`: buckets jobs mount read-only, checked against each cloud's own naming rules.

Each entry is {name, bucket, prefix?} (AWS: kmsKeyArn? when the bucket is encrypted with SSE-KMS;
Azure: bucket is "<storage account>/<container>" and resourceGroup names the account's group, which
the read-only role assignment is scoped under).
A bucket name the cloud would refuse, a key of another cloud, or a stack that cannot mount
buckets (local: no object-store CSI driver) is reported here, naming the key, before anything
is created. Pure Python: no pulumi import.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from components.spec.dataset_spec import DatasetSpec
from components.spec.fields import _k, _obj, _Problems, _r

KEY = "datasets"
# The pod volume is "dataset-<name>" and must be a DNS label (63 characters).
MAX_NAME = 40
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_COMMON_KEYS = {"name", "bucket", "prefix"}
# Keys only one cloud reads; on another cloud they are reported, not ignored.
_CLOUD_KEYS = {"azure": {"resourceGroup"}, "aws": {"kmsKeyArn"}}
# Clouds whose managed CSI driver mounts a bucket (components/clouds/<cloud>/datasets.py).
CLOUDS = ("aws", "gcp", "azure")
# What a stack that cannot mount buckets offers instead: one hint, which the stack's validation, `submit
# --dataset` and `upload dataset:NAME` all give and docs/data.md ("Datasets on the local stack") repeats
# (issue 32: the CLI said "add torchfleet:datasets to the stack file", which the local stack refuses).
# The local store is the kind node's folder (components/clouds/local.py, LOCAL_STORE_PATH); a job's pods mount
# only its folder JOB of it, at /mnt/shared/JOB (issue 30: torchfleet/jobs/pod_template.py shared_mount), so the
# data goes there, into a folder made as the kubelet would make it (the store root's 2775, group 10001: docker cp
# refuses a missing parent, and a parent it made would be root's 0755, which the job could not write).
# The job's folder is in its maker's (torchfleet/jobs/store_folder.py): on kind the CLI is kind's admin,
# kubernetes-admin, whose folder is @kubernetes-admin; made 2775 group 10001 as the kubelet would make it, so that
# its later jobs' folders, made by the kubelet inside it, take the group too.
LOCAL_DATA_HINT = (
    "the local stack mounts no buckets (no object-store CSI driver): put the data in the job's folder on its "
    "shared store, in its maker's folder (kind's admin: @kubernetes-admin), e.g. `docker exec "
    "torchfleet-control-plane install -d -o 10001 -g 10001 -m 2775 /var/lib/torchfleet/shared/@kubernetes-admin "
    "/var/lib/torchfleet/shared/@kubernetes-admin/JOB && docker cp ./imagenet "
    "torchfleet-control-plane:/var/lib/torchfleet/shared/@kubernetes-admin/JOB/`"
    ", and read it from /mnt/shared/JOB/imagenet in job JOB, which sees only its own folder "
    "(docs/data.md, \"Datasets on the local stack\")"
)

# S3 general purpose buckets: https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html
# (checked 2026-11-25): 3-63 of a-z 0-9 . -, a letter or digit at each end, no "..", not an IP
# address, and the reserved prefixes and suffixes below.
_S3 = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_S3_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_S3_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")
# Cloud Storage: https://cloud.google.com/storage/docs/buckets#naming (checked 2026-11-25):
# a-z 0-9 - _ ., a letter or digit at each end, 3-63 characters (up to 222 with dots, each
# dot-separated part at most 63), not an IP address, not starting with "goog", no "google".
_GCS = re.compile(r"^[a-z0-9][a-z0-9._-]*[a-z0-9]$")
# Azure storage account: 3-24 lowercase letters and digits
# (https://learn.microsoft.com/azure/storage/common/storage-account-overview#storage-account-name);
# container: 3-63 of a-z 0-9 -, starting with a letter or digit, each '-' between letters or digits
# (https://learn.microsoft.com/rest/api/storageservices/naming-and-referencing-containers--blobs--and-metadata).
_AZ_ACCOUNT = re.compile(r"^[a-z0-9]{3,24}$")
_AZ_CONTAINER = re.compile(r"^[a-z0-9](-?[a-z0-9])+$")
# Azure resource group: 1-90 of letters, digits, _ - . ( ), not ending with '.'
# (https://learn.microsoft.com/azure/azure-resource-manager/management/resource-name-rules#microsoftresources).
# A KMS key's ARN, not an alias's (an alias ARN names no key in IAM policies):
# https://docs.aws.amazon.com/kms/latest/developerguide/concepts.html#key-id-key-ARN
_KMS_KEY_ARN = re.compile(r"^arn:aws(-cn|-us-gov)?:kms:[a-z0-9-]+:\d{12}:key/[A-Za-z0-9-]+$")
_AZ_GROUP = re.compile(r"^[-\w.()]{0,89}[-\w()]$")
_PREFIX = re.compile(r"^[A-Za-z0-9!_.*'()/=+-]+$")


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def s3_bucket_problem(bucket: str) -> str | None:
    if not _S3.match(bucket):
        return "3-63 lowercase letters, digits, '.' and '-', starting and ending with a letter or digit"
    if ".." in bucket:
        return "no two adjacent periods"
    if _is_ip(bucket):
        return "not formatted as an IP address"
    for prefix in _S3_PREFIXES:
        if bucket.startswith(prefix):
            return f"S3 reserves the prefix {prefix!r}"
    for suffix in _S3_SUFFIXES:
        if bucket.endswith(suffix):
            return f"S3 reserves the suffix {suffix!r}"
    return None


def gcs_bucket_problem(bucket: str) -> str | None:
    if not _GCS.match(bucket) or len(bucket) < 3:
        return "lowercase letters, digits, '-', '_' and '.', starting and ending with a letter or digit"
    if "." in bucket:
        if len(bucket) > 222 or any(len(part) > 63 or not part for part in bucket.split(".")):
            return "at most 222 characters with dots, each dot-separated part 1-63"
    elif len(bucket) > 63:
        return "3-63 characters (222 only for names with dots)"
    if _is_ip(bucket):
        return "not formatted as an IP address"
    if bucket.startswith("goog") or "google" in bucket or "g00gle" in bucket:
        return "Cloud Storage refuses names starting with 'goog' or containing 'google' (or a close misspelling)"
    return None


def azure_bucket_problem(bucket: str) -> str | None:
    account, sep, container = bucket.partition("/")
    if not sep:
        return "give it as <storage account>/<container>, e.g. mydatasets/imagenet"
    if not _AZ_ACCOUNT.match(account):
        return f"storage account {account!r}: 3-24 lowercase letters and digits"
    if not (3 <= len(container) <= 63) or not _AZ_CONTAINER.match(container):
        return (
            f"container {container!r}: 3-63 lowercase letters, digits and '-', starting with a letter or digit, "
            "each '-' between letters or digits"
        )
    return None


BUCKET_RULES = {
    "aws": (s3_bucket_problem, "https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html"),
    "gcp": (gcs_bucket_problem, "https://cloud.google.com/storage/docs/buckets#naming"),
    "azure": (azure_bucket_problem, "https://learn.microsoft.com/azure/storage/common/storage-account-overview"),
}


def _prefix(p: _Problems, key: str, value: Any) -> str:
    if value is None or value == "":
        return ""
    if not isinstance(value, str) or not _PREFIX.match(value) or value.startswith("/") or "//" in value:
        p.add(key, f"expected a path inside the bucket like train/ or images/2024/ (no leading '/'), got {_r(value)}")
        return ""
    if any(part in (".", "..") for part in value.split("/")):
        p.add(key, f"'.' and '..' name no folder in a bucket, got {_r(value)}")
        return ""
    return value if value.endswith("/") else value + "/"


def parse_datasets(p: _Problems, value: Any, cloud: str) -> tuple[DatasetSpec, ...]:
    key = _k(KEY)
    if value is None:
        return ()
    if cloud not in CLOUDS:
        p.add(
            key,
            f"remove this key: {LOCAL_DATA_HINT}" if cloud == "local" else
            f"the {cloud} stack has no object-store driver to mount buckets with; remove this key",
        )
        return ()
    if not isinstance(value, list):
        p.add(key, f"expected a list of {{name, bucket, prefix}}, got {_r(value)}")
        return ()
    allowed = _COMMON_KEYS | _CLOUD_KEYS.get(cloud, set())
    check, source = BUCKET_RULES[cloud]
    out: list[DatasetSpec] = []
    seen: set[str] = set()
    for i, item in enumerate(value):
        at = f"{key}[{i}]"
        if not isinstance(item, dict):
            p.add(at, f"expected an object with keys {', '.join(sorted(allowed))}, got {_r(item)}")
            continue
        for other, keys in _CLOUD_KEYS.items():
            for k in sorted(keys & set(item)):
                if other != cloud:
                    p.add(f"{at}.{k}", f"only {other} datasets take this key, this stack is {cloud}; remove it")
        obj = _obj(p, at, {k: v for k, v in item.items() if k in allowed or k not in _all_cloud_keys()}, allowed)
        name, bucket = obj.get("name"), obj.get("bucket")
        if not isinstance(name, str) or not _NAME.match(name) or len(name) > MAX_NAME:
            p.add(
                f"{at}.name",
                f"a lowercase name of letters, digits and '-' (at most {MAX_NAME}), e.g. imagenet; got {_r(name)}",
            )
            name = None
        elif name in seen:
            p.add(f"{at}.name", f"{name!r} is declared twice; each dataset once")
        if not isinstance(bucket, str) or not bucket:
            p.add(f"{at}.bucket", f"the {cloud} bucket to mount, got {_r(bucket)}")
            bucket = None
        else:
            problem = check(bucket)
            if problem:
                p.add(f"{at}.bucket", f"{bucket!r} is not a name {cloud} accepts: {problem} ({source})")
                bucket = None
        prefix = _prefix(p, f"{at}.prefix", obj.get("prefix"))
        group = obj.get("resourceGroup")
        if cloud == "azure" and (not isinstance(group, str) or not _AZ_GROUP.match(group)):
            p.add(
                f"{at}.resourceGroup",
                f"the storage account's resource group (1-90 letters, digits, _ - . ( )), got {_r(group)}",
            )
            group = None
        kms = obj.get("kmsKeyArn")
        if kms is not None and (not isinstance(kms, str) or not _KMS_KEY_ARN.match(kms)):
            p.add(
                f"{at}.kmsKeyArn",
                "the ARN of the bucket's SSE-KMS key, arn:aws:kms:REGION:ACCOUNT:key/KEY-ID (not an alias), "
                f"got {_r(kms)}",
            )
            kms = None
        if name and bucket:
            seen.add(name)
            out.append(DatasetSpec(name=name, bucket=bucket, prefix=prefix, resource_group=group, kms_key_arn=kms))
    return tuple(out)


def _all_cloud_keys() -> set[str]:
    return {k for keys in _CLOUD_KEYS.values() for k in keys}
