"""torchfleet:datasets: every bad entry refused naming its key, each cloud's bucket naming rules, good ones parsed."""

from __future__ import annotations

import pytest

from components.spec import DatasetSpec
from tests.components.spec.configs import config, ok, only, problems

KEY = "torchfleet:datasets"
AZ = {"resourceGroup": "data-rg"}


def test_no_datasets_by_default():
    assert ok(config("aws")).datasets == ()


@pytest.mark.parametrize(
    ("cloud", "entry", "want"),
    [
        ("aws", {"name": "imagenet", "bucket": "my-imagenet", "prefix": "train"},
         DatasetSpec("imagenet", "my-imagenet", "train/")),
        ("aws", {"name": "c4", "bucket": "corp.data.c4"}, DatasetSpec("c4", "corp.data.c4")),
        ("aws", {"name": "c4", "bucket": "corp-c4", "kmsKeyArn": "arn:aws:kms:us-west-2:111122223333:key/ab-12"},
         DatasetSpec("c4", "corp-c4", kms_key_arn="arn:aws:kms:us-west-2:111122223333:key/ab-12")),
        ("gcp", {"name": "imagenet", "bucket": "my_imagenet.v2", "prefix": "a/b/"},
         DatasetSpec("imagenet", "my_imagenet.v2", "a/b/")),
        ("azure", {"name": "imagenet", "bucket": "mydatasets/imagenet-1k", **AZ},
         DatasetSpec("imagenet", "mydatasets/imagenet-1k", "", "data-rg")),
    ],
)
def test_a_good_dataset_is_parsed(cloud, entry, want):
    assert ok(config(cloud, datasets=[entry])).datasets == (want,)


@pytest.mark.parametrize(
    ("bucket", "why"),
    [
        ("ab", "3-63"),
        ("My-Bucket", "3-63"),
        ("a" * 64, "3-63"),
        ("bucket-", "3-63"),
        ("my..bucket", "adjacent periods"),
        ("192.168.5.4", "IP address"),
        ("xn--bucket", "'xn--'"),
        ("sthree-data", "'sthree-'"),
        ("amzn-s3-demo-data", "'amzn-s3-demo-'"),
        ("data-s3alias", "'-s3alias'"),
        ("data--ol-s3", "'--ol-s3'"),
        ("data.mrap", "'.mrap'"),
        ("data--x-s3", "'--x-s3'"),
        ("data--table-s3", "'--table-s3'"),
        ("under_score", "3-63"),
    ],
)
def test_s3_refuses_what_s3_refuses(bucket, why):
    message = only(config("aws", datasets=[{"name": "d", "bucket": bucket}]), f"{KEY}[0].bucket")
    assert why in message and "bucketnamingrules" in message


@pytest.mark.parametrize(
    ("bucket", "why"),
    [
        ("ab", "starting and ending"),
        ("-data", "starting and ending"),
        ("a" * 64, "3-63"),
        ("a." + "b" * 64, "each dot-separated part"),
        ("10.0.0.1", "IP address"),
        ("goog-data", "'goog'"),
        ("my-google-data", "'google'"),
        ("Data", "starting and ending"),
    ],
)
def test_gcs_refuses_what_cloud_storage_refuses(bucket, why):
    message = only(config("gcp", datasets=[{"name": "d", "bucket": bucket}]), f"{KEY}[0].bucket")
    assert why in message and "storage/docs/buckets#naming" in message


@pytest.mark.parametrize(
    ("bucket", "why"),
    [
        ("imagenet", "<storage account>/<container>"),
        ("ab/imagenet", "storage account 'ab'"),
        ("My-Account/imagenet", "storage account"),
        ("a" * 25 + "/imagenet", "storage account"),
        ("account/ab", "container 'ab'"),
        ("account/image--net", "container"),
        ("account/-imagenet", "container"),
        ("account/imagenet-", "container"),
        ("account/ImageNet", "container"),
    ],
)
def test_azure_refuses_what_azure_storage_refuses(bucket, why):
    message = only(config("azure", datasets=[{"name": "d", "bucket": bucket, **AZ}]), f"{KEY}[0].bucket")
    assert why in message


def test_another_clouds_key_is_named():
    found = problems(config("aws", datasets=[{"name": "d", "bucket": "my-data", "resourceGroup": "rg"}]))
    assert list(found) == [f"{KEY}[0].resourceGroup"]
    assert "only azure" in found[f"{KEY}[0].resourceGroup"][0]


def test_azure_needs_the_resource_group():
    assert "resource group" in only(config("azure", datasets=[{"name": "d", "bucket": "acct1/data"}]),
                                    f"{KEY}[0].resourceGroup")


@pytest.mark.parametrize(
    ("entry", "key", "why"),
    [
        ({"name": "Imagenet", "bucket": "my-data"}, "name", "lowercase"),
        ({"name": "a" * 41, "bucket": "my-data"}, "name", "at most 40"),
        ({"bucket": "my-data"}, "name", "lowercase"),
        ({"name": "d"}, "bucket", "bucket to mount"),
        ({"name": "d", "bucket": "my-data", "prefix": "/abs"}, "prefix", "no leading"),
        ({"name": "d", "bucket": "my-data", "prefix": "a/../b"}, "prefix", "'..'"),
        ({"name": "d", "bucket": "my-data", "prefix": "a//b"}, "prefix", "no leading"),
        ({"name": "d", "bucket": "my-data", "buckett": "x"}, "buckett", "did you mean 'bucket'"),
    ],
)
def test_a_bad_field_is_named(entry, key, why):
    assert why in only(config("aws", datasets=[entry]), f"{KEY}[0].{key}")


def test_a_name_twice_is_refused():
    entries = [{"name": "d", "bucket": "my-data"}, {"name": "d", "bucket": "other-data"}]
    assert "twice" in only(config("aws", datasets=entries), f"{KEY}[1].name")


def test_not_a_list_is_refused():
    assert "expected a list" in only(config("aws", datasets={"name": "d"}), KEY)


def test_the_local_stack_cannot_mount_buckets():
    assert "no object-store CSI driver" in only(config("local", datasets=[{"name": "d", "bucket": "my-data"}]), KEY)


def test_every_problem_is_reported_at_once():
    entries = [{"name": "D", "bucket": "xn--x"}, {"name": "ok", "bucket": "fine-bucket", "prefix": "../x"}]
    found = problems(config("aws", datasets=entries))
    assert set(found) == {f"{KEY}[0].name", f"{KEY}[0].bucket", f"{KEY}[1].prefix"}


@pytest.mark.parametrize(
    ("cloud", "value", "why"),
    [
        ("aws", "arn:aws:kms:us-west-2:111122223333:alias/data", "not an alias"),
        ("aws", "1234abcd-12ab-34cd-56ef-1234567890ab", "arn:aws:kms:REGION:ACCOUNT:key/KEY-ID"),
        ("aws", 7, "arn:aws:kms:REGION:ACCOUNT:key/KEY-ID"),
        ("gcp", "arn:aws:kms:us-west-2:111122223333:key/ab-12", "only aws"),
    ],
)
def test_a_bad_kms_key_is_named(cloud, value, why):
    found = problems(config(cloud, datasets=[{"name": "d", "bucket": "my-data", "kmsKeyArn": value}]))
    assert list(found) == [f"{KEY}[0].kmsKeyArn"]
    assert why in found[f"{KEY}[0].kmsKeyArn"][0]
