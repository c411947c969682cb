import pytest

from components.clouds.aws.efs import DRIVER_OWNED_MOUNT_OPTIONS, NFS_PORT
from components.clouds.aws.options import kept_options


def test_file_system_is_encrypted_and_elastic(aws_example):
    fs = aws_example.one("aws:efs/fileSystem:FileSystem")
    assert fs.inputs["encrypted"] is True
    assert fs.inputs["throughputMode"] == "elastic"
    assert fs.inputs["creationToken"] == "torchfleet-aws-usw2"


@pytest.mark.parametrize(("fixture", "kept"), [("aws_example", True), ("aws_three_zones", False)])
def test_file_system_kept_on_destroy_as_configured_never_protected(request, fixture, kept):
    """Regression (issue 20): `protect` made `pulumi destroy` fail in its preview and delete nothing."""
    fs = request.getfixturevalue(fixture).one("aws:efs/fileSystem:FileSystem")
    assert fs.options["protect"] is False
    assert fs.options["retainOnDelete"] is kept
    opts = kept_options(None, kept, None)
    assert not opts.protect and opts.retain_on_delete is kept


@pytest.mark.parametrize(("fixture", "zones"), [("aws_example", 2), ("aws_three_zones", 3)])
def test_one_mount_target_per_zone(request, fixture, zones):
    result = request.getfixturevalue(fixture)
    targets = result.of_type("aws:efs/mountTarget:MountTarget")
    assert len(targets) == zones
    assert len({t.inputs["subnetId"] for t in targets}) == zones


def test_nfs_only_from_the_nodes(aws_example):
    sg = aws_example.one("aws:ec2/securityGroup:SecurityGroup")
    cluster = aws_example.one("aws:eks/cluster:Cluster")
    assert sg.inputs["ingress"] == [
        {
            "protocol": "tcp",
            "fromPort": NFS_PORT,
            "toPort": NFS_PORT,
            "securityGroups": [f"sg-{cluster.name}-cluster"],
            "description": "NFS from EKS nodes",
        }
    ]
    for target in aws_example.of_type("aws:efs/mountTarget:MountTarget"):
        assert target.inputs["securityGroups"] == [f"{sg.name}-id"]


def test_training_user_owns_the_store_through_an_access_point(aws_example):
    """Regression (review): a fresh EFS root is root-owned 0755; uid 10001 jobs could not write."""
    from components.spec import TRAINING_UID

    ap = aws_example.one("aws:efs/accessPoint:AccessPoint")
    fs = aws_example.one("aws:efs/fileSystem:FileSystem")
    assert ap.inputs["fileSystemId"] == f"{fs.name}-id"
    assert ap.inputs["posixUser"] == {"uid": TRAINING_UID, "gid": TRAINING_UID}
    assert ap.inputs["rootDirectory"]["creationInfo"] == {
        "ownerUid": TRAINING_UID,
        "ownerGid": TRAINING_UID,
        "permissions": "2775",
    }
    pv = aws_example.one("kubernetes:core/v1:PersistentVolume")
    assert pv.inputs["spec"]["csi"]["volumeHandle"] == f"{fs.name}-id::{ap.name}-id"
    assert "mountOptions" not in pv.inputs["spec"]  # the driver adds tls and accesspoint itself


def _statements(aws_example) -> dict[str, dict]:
    import json

    policy = aws_example.one("aws:efs/fileSystemPolicy:FileSystemPolicy")
    fs = aws_example.one("aws:efs/fileSystem:FileSystem")
    assert policy.inputs["fileSystemId"] == f"{fs.name}-id"
    return {s["Sid"]: s for s in json.loads(policy.inputs["policy"])["Statement"]}


def test_file_system_policy_denies_clients_without_tls(aws_example):
    fs = aws_example.one("aws:efs/fileSystem:FileSystem")
    fs_arn = f"arn:aws:elasticfilesystem:us-west-2:123456789012:file-system/fs-{fs.name}"
    deny = _statements(aws_example)["DenyWithoutTls"]
    assert deny == {
        "Sid": "DenyWithoutTls",
        "Effect": "Deny",
        "Principal": {"AWS": "*"},
        "Action": "*",
        "Resource": fs_arn,
        "Condition": {"Bool": {"aws:SecureTransport": "false"}},
    }


def test_file_system_policy_admits_mounts_only_through_the_training_access_point(aws_example):
    ap = aws_example.one("aws:efs/accessPoint:AccessPoint")
    ap_arn = f"arn:aws:elasticfilesystem:us-west-2:123456789012:access-point/fsap-{ap.name}"
    statements = _statements(aws_example)
    allow, deny = statements["MountThroughTheTrainingAccessPoint"], statements["DenyOutsideTheTrainingAccessPoint"]
    client = ["elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite"]
    assert (allow["Effect"], allow["Action"]) == ("Allow", client)  # never ClientRootAccess
    assert allow["Condition"] == {
        "ArnEquals": {"elasticfilesystem:AccessPointArn": ap_arn},
        "Bool": {"elasticfilesystem:AccessedViaMountTarget": "true"},
    }
    assert (deny["Effect"], deny["Action"]) == ("Deny", client)
    assert deny["Condition"] == {"ArnNotEquals": {"elasticfilesystem:AccessPointArn": ap_arn}}
    assert set(statements) == {
        "MountThroughTheTrainingAccessPoint",
        "DenyWithoutTls",
        "DenyOutsideTheTrainingAccessPoint",
    }


def test_volume_mounts_with_tls_and_through_the_access_point_as_the_policy_demands(aws_example):
    """The TLS and access-point denies would break every mount of a PV without both. The driver
    mounts an access-point handle with `accesspoint=` and `tls` itself (node.go, NodePublishVolume),
    unless the volume turns encryptInTransit off, which no PV here may do."""
    ap = aws_example.one("aws:efs/accessPoint:AccessPoint")
    pv = aws_example.one("kubernetes:core/v1:PersistentVolume")
    assert pv.inputs["spec"]["csi"]["volumeHandle"].endswith(f"::{ap.name}-id")
    assert "encryptInTransit" not in (pv.inputs["spec"]["csi"].get("volumeAttributes") or {})
    # No StorageClass provisions EFS volumes beside it (dynamic ones would bypass the access point).
    classes = [
        o
        for o in aws_example.of_type("kubernetes:storage.k8s.io/v1:StorageClass")
        if o.inputs.get("provisioner") == "efs.csi.aws.com"
    ]
    assert classes == []


@pytest.mark.parametrize("fixture", ["aws_example", "aws_three_zones"])
def test_no_efs_volume_sets_a_mount_option_the_driver_owns(request, fixture):
    """Regression (issue 20, AWS review m9): `tls` under mountOptions is deprecated by the EFS CSI
    driver and refused when a volume sets encryptInTransit false; `accesspoint=` there is deprecated
    too. Every EFS PersistentVolume the stack renders (training and store owner) is checked."""
    result = request.getfixturevalue(fixture)
    pvs = [
        o
        for o in result.of_type("kubernetes:core/v1:PersistentVolume")
        if (o.inputs["spec"].get("csi") or {}).get("driver") == "efs.csi.aws.com"
    ]
    assert pvs
    for pv in pvs:
        options = pv.inputs["spec"].get("mountOptions") or []
        assert not [o for o in options if o.split("=")[0].lower() in DRIVER_OWNED_MOUNT_OPTIONS], pv.name
