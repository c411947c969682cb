from components.clouds.aws.ebs import STORAGE_CLASS


def test_etcd_volumes_get_an_encrypted_gp3_class_from_the_ebs_driver(aws_example):
    """Regression (review): EKS has no default StorageClass and no EBS driver, so etcd stayed Pending."""
    # The driver and its identity: test_addons.py.
    addon = next(a for a in aws_example.of_type("aws:eks/addon:Addon") if a.inputs["addonName"] == "aws-ebs-csi-driver")
    sc = aws_example.one("kubernetes:storage.k8s.io/v1:StorageClass")
    assert sc.inputs["metadata"]["name"] == STORAGE_CLASS
    assert sc.inputs["provisioner"] == "ebs.csi.aws.com"
    assert sc.inputs["parameters"] == {"type": "gp3", "encrypted": "true"}
    assert sc.inputs["volumeBindingMode"] == "WaitForFirstConsumer"
    assert any(dep.endswith(f"::{addon.name}") for dep in sc.options["dependencies"])
