"""AWS datasets under mocks: the S3 CSI add-on, the training pods' read-only role and its Pod Identity
association, and each dataset's read-only PV/PVC in the training namespace."""

from __future__ import annotations

import json

import pytest

from components.clouds.aws.datasets import ADDON, DRIVER, check_driver_version
from tests.components.clouds.aws.conftest import THREE_ZONES
from tests.harness import synth_config

KMS_KEY = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
DATASETS = [
    {"name": "imagenet", "bucket": "corp-imagenet", "prefix": "train"},
    {"name": "c4", "bucket": "corp-c4", "kmsKeyArn": KMS_KEY},
]


@pytest.fixture(scope="module")
def aws_datasets():
    return synth_config("aws-data", {**THREE_ZONES, "torchfleet:datasets": DATASETS})


def test_the_s3_csi_addon_at_the_version_eks_names_for_the_minor(aws_datasets):
    addon = next(a for a in aws_datasets.of_type("aws:eks/addon:Addon") if a.inputs["addonName"] == ADDON)
    assert addon.inputs["addonVersion"] == "v2.35.0-eksbuild.mock"  # the mock's answer for 1.35, major 2
    # The driver's own service account gets no S3 permission: mounts use the pod's credentials.
    assert "podIdentityAssociations" not in addon.inputs
    assert addon.options["deleteBeforeReplace"] is True


def test_no_addon_and_no_role_without_datasets(aws_three_zones):
    assert ADDON not in [a.inputs["addonName"] for a in aws_three_zones.of_type("aws:eks/addon:Addon")]
    assert not [r for r in aws_three_zones.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
                if r.inputs["serviceAccount"] == "training-job"]


def test_only_the_training_service_account_gets_the_role(aws_datasets):
    found = [r for r in aws_datasets.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
             if r.inputs["namespace"] == "elastic-job"]
    assert len(found) == 1
    assert found[0].inputs["serviceAccount"] == "training-job"


def test_the_role_reads_only_the_datasets(aws_datasets):
    policy = json.loads(aws_datasets.one("aws:iam/rolePolicy:RolePolicy", "torchfleet-aws-datasets-training-read")
                        .inputs["policy"])
    actions = {a for s in policy["Statement"] for a in s["Action"]}
    assert actions == {"s3:ListBucket", "s3:GetObject", "kms:Decrypt"}
    by_sid = {s["Sid"]: s for s in policy["Statement"]}
    assert by_sid["ListImagenet"]["Resource"] == "arn:aws:s3:::corp-imagenet"
    assert by_sid["ListImagenet"]["Condition"] == {"StringLike": {"s3:prefix": ["train/*"]}}
    assert by_sid["ReadImagenet"]["Resource"] == "arn:aws:s3:::corp-imagenet/train/*"
    assert "Condition" not in by_sid["ListC4"] and by_sid["ReadC4"]["Resource"] == "arn:aws:s3:::corp-c4/*"
    # Review of issue 21: an SSE-KMS bucket could not be read (no kms:Decrypt); now its key, and only its key
    assert [s["Resource"] for s in policy["Statement"] if "kms:Decrypt" in s["Action"]] == [KMS_KEY]
    assert "DecryptImagenet" not in by_sid
    # and only through S3, for that dataset's objects (or its bucket, with an S3 Bucket Key)
    decrypt = next(s for s in policy["Statement"] if "kms:Decrypt" in s["Action"])
    assert decrypt["Condition"] == {"StringLike": {
        "kms:ViaService": "s3.*",
        "kms:EncryptionContext:aws:s3:arn": ["arn:aws:s3:::corp-c4", "arn:aws:s3:::corp-c4/*"],
    }}


def test_a_read_only_pv_and_claim_per_dataset(aws_datasets):
    objects = {(o["kind"], o["metadata"]["name"]): o for o in aws_datasets.kubernetes_objects()}
    pv = objects[("PersistentVolume", "elastic-job-dataset-imagenet")]
    assert pv["spec"]["accessModes"] == ["ReadOnlyMany"]
    assert pv["spec"]["storageClassName"] == ""
    assert pv["spec"]["claimRef"] == {"namespace": "elastic-job", "name": "dataset-imagenet"}
    assert pv["spec"]["csi"] == {
        "driver": DRIVER,
        "volumeHandle": "elastic-job-dataset-imagenet",
        "readOnly": True,
        "volumeAttributes": {"bucketName": "corp-imagenet", "authenticationSource": "pod", "stsRegion": "us-east-1"},
    }
    assert pv["spec"]["mountOptions"] == ["read-only", "allow-other", "region us-east-1", "prefix train/"]
    claim = objects[("PersistentVolumeClaim", "dataset-imagenet")]
    assert claim["metadata"]["namespace"] == "elastic-job"
    assert claim["spec"]["volumeName"] == "elastic-job-dataset-imagenet"
    assert aws_datasets.outputs["datasets"] == {"imagenet": "dataset-imagenet", "c4": "dataset-c4"}


def test_the_claim_waits_for_the_driver_and_the_binding(aws_datasets):
    claim = aws_datasets.one("kubernetes:core/v1:PersistentVolumeClaim", "torchfleet-datasets-imagenet-claim")
    waits = {key.split("::")[-1] for key in aws_datasets.depends_on(claim)}
    assert {"torchfleet-aws-datasets-s3-csi-driver", "torchfleet-aws-datasets-training-identity",
            "torchfleet-aws-datasets-training-read", "torchfleet-datasets-imagenet-volume"} <= waits


@pytest.mark.parametrize("version", ["v1.15.0-eksbuild.1", "", "latest", "v2.2.1-eksbuild.1"])
def test_a_driver_without_pod_level_pod_identity_or_controller_placement_is_refused(version):
    with pytest.raises(ValueError, match=r"v2\.3\.0 or later"):
        check_driver_version(version)


def test_the_drivers_controller_runs_on_the_tainted_manager_pool(aws_datasets):
    """Issue 30: every pool is tainted; the controller's chart tolerates nothing by default."""
    addon = next(a for a in aws_datasets.of_type("aws:eks/addon:Addon") if a.inputs["addonName"] == ADDON)
    assert json.loads(addon.inputs["configurationValues"]) == {"controller": {
        "nodeSelector": {"torchfleet.io/pool": "manager"},
        "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists", "effect": "NoSchedule"}]}}
    assert check_driver_version("v2.3.0-eksbuild.1") == "v2.3.0-eksbuild.1"


def test_parliament_reports_nothing_on_the_read_only_policy(aws_datasets):
    from tests.checks.test_iam_policies import _RUNNER
    from tests.checks.tools import TOOLS_BIN, run, tool

    tool("parliament")
    policy = aws_datasets.one("aws:iam/rolePolicy:RolePolicy", "torchfleet-aws-datasets-training-read").inputs["policy"]
    proc = run([str(TOOLS_BIN / "python"), "-c", _RUNNER], timeout=300, stdin=json.dumps({"read": policy}))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout) == {"read": []}
