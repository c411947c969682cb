"""GCP datasets under mocks: the Cloud Storage FUSE add-on, the training service account's read-only
grant per bucket (Workload Identity principal), the private DNS for Cloud Storage, the read-only
PV/PVC per dataset and the egress policy its in-pod sidecar needs."""

from __future__ import annotations

import pytest

from components.clouds.gcp.datasets import DRIVER, PRIVATE_GOOGLEAPIS, READ_ROLE
from tests.harness import synth_config, synth_stack
from torchfleet.preview.mock_gcp import MOCK_PROJECT_NUMBER

CONFIG = {
    "torchfleet:cloud": "gcp",
    "gcp:region": "us-central1",
    "gcp:project": "my-ml-project",
    "torchfleet:zones": ["us-central1-a"],
    "torchfleet:gpuPools": [{"gpu": "t4", "maxNodes": 2}],
    "torchfleet:datasets": [
        {"name": "imagenet", "bucket": "corp-imagenet", "prefix": "train/"},
        {"name": "c4", "bucket": "corp_c4"},
    ],
}
PRINCIPAL = (f"principal://iam.googleapis.com/projects/{MOCK_PROJECT_NUMBER}/locations/global/workloadIdentityPools/"
             "my-ml-project.svc.id.goog/subject/ns/elastic-job/sa/training-job")


@pytest.fixture(scope="module")
def gcp_datasets():
    return synth_config("gcp-data", CONFIG)


def test_the_fuse_addon_is_on_only_with_datasets(gcp_datasets):
    addons = gcp_datasets.one("gcp:container/cluster:Cluster").inputs["addonsConfig"]
    assert addons["gcsFuseCsiDriverConfig"] == {"enabled": True}
    plain = synth_stack("gcp-usc1").one("gcp:container/cluster:Cluster").inputs["addonsConfig"]
    assert "gcsFuseCsiDriverConfig" not in plain


def test_each_bucket_is_readable_by_the_training_service_account_only(gcp_datasets):
    grants = {g.inputs["bucket"]: g.inputs for g in gcp_datasets.of_type("gcp:storage/bucketIAMMember:BucketIAMMember")}
    assert set(grants) == {"corp-imagenet", "corp_c4"}
    for grant in grants.values():
        assert grant["role"] == READ_ROLE
        assert grant["member"] == PRINCIPAL
    assert "condition" not in grants["corp_c4"]
    assert grants["corp-imagenet"]["condition"]["expression"] == (
        'resource.name == "projects/_/buckets/corp-imagenet" || '
        'resource.name.startsWith("projects/_/buckets/corp-imagenet/objects/train/")'
    )


def test_cloud_storage_resolves_to_private_google_access_in_the_vpc(gcp_datasets):
    zone = gcp_datasets.one("gcp:dns/managedZone:ManagedZone")
    assert zone.inputs["dnsName"] == "storage.googleapis.com."
    assert zone.inputs["visibility"] == "private"
    record = gcp_datasets.one("gcp:dns/recordSet:RecordSet")
    assert record.inputs["rrdatas"] == ["199.36.153.8", "199.36.153.9", "199.36.153.10", "199.36.153.11"]


def test_read_only_volumes_and_the_sidecars_egress(gcp_datasets):
    objects = {(o["kind"], o["metadata"]["name"]): o for o in gcp_datasets.kubernetes_objects()}
    pv = objects[("PersistentVolume", "elastic-job-dataset-imagenet")]
    assert pv["spec"]["csi"] == {"driver": DRIVER, "volumeHandle": "corp-imagenet", "readOnly": True}
    assert pv["spec"]["mountOptions"] == ["implicit-dirs", "only-dir=train"]
    assert pv["spec"]["accessModes"] == ["ReadOnlyMany"]
    assert objects[("PersistentVolumeClaim", "dataset-c4")]["spec"]["volumeName"] == "elastic-job-dataset-c4"
    policy = objects[("NetworkPolicy", "training-to-datasets")]
    # Only pods of jobs submitted with --dataset (review of issue 21: the policy selected every training pod,
    # opening all Google APIs and the metadata server to jobs that mount nothing); the CLI side is in
    # tests/torchfleet/test_dataset_flag.py.
    assert policy["spec"]["podSelector"] == {
        "matchLabels": {"torchfleet.io/role": "training", "torchfleet.io/datasets": "true"}
    }
    # Cloud Storage through Private Google Access, and the sidecar's Workload Identity token (Dataplane V2's
    # address and port): nothing else, and no other port to either.
    assert policy["spec"]["egress"] == [
        {"to": [{"ipBlock": {"cidr": PRIVATE_GOOGLEAPIS}}], "ports": [{"protocol": "TCP", "port": 443}]},
        {"to": [{"ipBlock": {"cidr": "169.254.169.254/32"}}], "ports": [{"protocol": "TCP", "port": 80}]},
    ]


def test_torchfleet_check_lists_the_apis_datasets_use():
    from components.clouds.preflight import render
    from components.spec import parse

    with_datasets = render(parse({k: v for k, v in CONFIG.items()}, "gcp-data"))
    assert "API dns.googleapis.com" in with_datasets and "API storage.googleapis.com" in with_datasets
    without = render(parse({k: v for k, v in CONFIG.items() if k != "torchfleet:datasets"}, "gcp-data"))
    assert "dns.googleapis.com" not in without
