from components.clouds import settle as settle_module
from components.clouds.aws.ebs import STORAGE_CLASS
from components.clouds.settle import CSI_VOLUME_SECONDS


def test_etcd_volumes_get_an_encrypted_gp3_class_from_the_ebs_driver(aws_example):
    """Regression (review): EKS has no default StorageClass and no EBS driver, so etcd stayed Pending."""
    # The driver and its identity: test_addons.py.
    addon = next(a for a in aws_example.of_type("aws:eks/addon:Addon") if a.inputs["addonName"] == "aws-ebs-csi-driver")
    sc = aws_example.one("kubernetes:storage.k8s.io/v1:StorageClass")
    assert sc.inputs["metadata"]["name"] == STORAGE_CLASS
    assert sc.inputs["provisioner"] == "ebs.csi.aws.com"
    assert sc.inputs["parameters"] == {"type": "gp3", "encrypted": "true"}
    assert sc.inputs["volumeBindingMode"] == "WaitForFirstConsumer"
    assert addon.key in aws_example.depends_on(sc)


def test_destroy_keeps_the_ebs_driver_until_the_volumes_it_deletes_are_gone(aws_example):
    """Regression (issue 20, AWS review m5): etcd's claims are deleted with its StatefulSet, and their
    volumes by the EBS CSI controller after Pulumi moved on; the add-on went seconds later and the
    volumes stayed. Destroy runs the dependencies backwards: everything that mounts an EBS volume
    (the etcd StatefulSet, the namespace holding its claims) waits for the settle, the settle for the
    add-on, so the settle's delete (a sleep) runs between theirs."""
    addon = next(a for a in aws_example.of_type("aws:eks/addon:Addon") if a.inputs["addonName"] == "aws-ebs-csi-driver")
    settle = next(r for r in aws_example.of_type("pulumi-python:dynamic:Resource") if r.name.endswith("-csi-settle"))
    assert settle.inputs["seconds"] == CSI_VOLUME_SECONDS >= 60
    assert addon.key in aws_example.depends_on(settle)
    users = [
        *aws_example.of_type("kubernetes:apps/v1:StatefulSet"),
        *aws_example.of_type("kubernetes:core/v1:Namespace"),
    ]
    assert users
    for r in users:
        assert settle.key in aws_example.depends_on(r), r.name


def test_settle_sleeps_only_on_delete(monkeypatch):
    slept: list[float] = []
    monkeypatch.setattr(settle_module.time, "sleep", slept.append)
    provider = settle_module._SettleProvider()
    created = provider.create({"seconds": 7})
    assert slept == []
    assert provider.update(created.id, created.outs, {"seconds": 9}).outs == {"seconds": 9}
    provider.delete(created.id, {"seconds": 9})
    assert slept == [9.0]
