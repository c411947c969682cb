from components.clouds.aws.ebs import EBS_CSI_ADDON_VERSION, STORAGE_CLASS


def test_etcd_volumes_get_an_encrypted_gp3_class_from_the_ebs_driver(aws_example):
    """Regression (review): EKS has no default StorageClass and no EBS driver, so etcd stayed Pending."""
    addon = next(a for a in aws_example.of_type("aws:eks/addon:Addon") if a.inputs["addonName"] == "aws-ebs-csi-driver")
    assert addon.inputs["addonVersion"] == EBS_CSI_ADDON_VERSION
    [association] = addon.inputs["podIdentityAssociations"]
    assert association["serviceAccount"] == "ebs-csi-controller-sa"
    role = next(r for r in aws_example.of_type("aws:iam/role:Role") if association["roleArn"].endswith(f"/{r.name}"))
    attached = [
        a.inputs["policyArn"]
        for a in aws_example.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if a.inputs["role"] == role.name
    ]
    assert attached == ["arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"]

    sc = aws_example.one("kubernetes:storage.k8s.io/v1:StorageClass")
    assert sc.inputs["metadata"]["name"] == STORAGE_CLASS
    assert sc.inputs["provisioner"] == "ebs.csi.aws.com"
    assert sc.inputs["parameters"] == {"type": "gp3", "encrypted": "true"}
    assert sc.inputs["volumeBindingMode"] == "WaitForFirstConsumer"
    assert any(dep.endswith(f"::{addon.name}") for dep in sc.options["dependencies"])
