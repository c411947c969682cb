from components.clouds import settle as settle_module
from components.clouds.aws.ebs import EBS_CSI_DRIVER, STORAGE_CLASS
from components.clouds.settle import RELEASE_TIMEOUT_S


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
    add-on, so the settle's delete (a wait for the driver's volumes to be gone) runs between theirs."""
    addon = next(a for a in aws_example.of_type("aws:eks/addon:Addon") if a.inputs["addonName"] == "aws-ebs-csi-driver")
    settle = next(r for r in aws_example.of_type("pulumi-python:dynamic:Resource") if r.name.endswith("-csi-settle"))
    assert (settle.inputs["driver"], settle.inputs["timeout_s"]) == (EBS_CSI_DRIVER, RELEASE_TIMEOUT_S)
    assert settle.inputs["kubeconfig"]  # the cluster's own, for the wait on destroy
    assert addon.key in aws_example.depends_on(settle)
    users = [
        *aws_example.of_type("kubernetes:apps/v1:StatefulSet"),
        *aws_example.of_type("kubernetes:core/v1:Namespace"),
    ]
    assert users
    for r in users:
        assert settle.key in aws_example.depends_on(r), r.name


def test_the_release_wait_reads_the_cluster_only_on_delete(monkeypatch):
    """Create and update touch nothing; delete waits on the kubeconfig and driver of the state."""
    calls: list[tuple] = []
    monkeypatch.setattr(settle_module, "core_api", lambda kubeconfig: calls.append(("api", kubeconfig)) or "API")
    monkeypatch.setattr(settle_module, "wait_for_release", lambda *a: calls.append(("wait", *a)))
    provider = settle_module._ReleaseProvider()
    props = {"driver": EBS_CSI_DRIVER, "timeout_s": 600, "kubeconfig": "apiVersion: v1"}
    created = provider.create(props)
    assert provider.update(created.id, created.outs, {**props, "timeout_s": 60}).outs["timeout_s"] == 60
    assert calls == []
    provider.delete(created.id, {**props, "timeout_s": 60})
    assert calls == [("api", "apiVersion: v1"), ("wait", "API", EBS_CSI_DRIVER, 60.0)]


def test_the_settle_wait_outlives_coredns_and_the_pod_identity_agent(aws_example):
    """Issue 29: on destroy the EBS controller still deletes volumes while the settle step waits; it
    resolves the EC2 endpoint through CoreDNS (a pod-network Deployment, ClusterFirst DNS) and gets its
    credentials through the Pod Identity agent. Both were deleted in parallel with the wait; now the
    settle depends on them, so Pulumi deletes them only after it."""
    settle = next(r for r in aws_example.of_type("pulumi-python:dynamic:Resource") if r.name.endswith("-csi-settle"))
    addons = {r.inputs["addonName"]: r for r in aws_example.of_type("aws:eks/addon:Addon")}
    waits_for = aws_example.depends_on(settle)
    assert addons["coredns"].key in waits_for
    assert addons["eks-pod-identity-agent"].key in waits_for


def test_the_settle_wait_keeps_the_deployers_access_until_it_ends():
    """Destroy runs dependencies backwards: the wait polls the API server as the deployer, so the admins'
    access entries, their cluster-admin policies and the private path's 443 rules must be deleted after it.
    Before, only the Kubernetes provider depended on them: once the last Kubernetes object was gone they
    were deleted while the wait still polled, each poll got 401/403, and destroy failed after 10 minutes."""
    from tests.harness import synth_config

    admin = "arn:aws:iam::123456789012:role/platform"
    result = synth_config("ebs-admins", {
        "aws:region": "us-west-2", "torchfleet:cloud": "aws", "torchfleet:zones": ["us-west-2a", "us-west-2b"],
        "torchfleet:gpuPools": [{"gpu": "t4", "maxNodes": 2}],
        "torchfleet:admins": [admin, "arn:aws:iam::123456789012:user/deployer"],
        "torchfleet:network": {"privateOnly": True, "privateAccessCidrs": ["10.8.0.0/16"]},
    })
    settle = next(r for r in result.of_type("pulumi-python:dynamic:Resource") if r.name.endswith("-csi-settle"))
    waits_for = result.depends_on(settle)
    access = [*result.of_type("aws:eks/accessPolicyAssociation:AccessPolicyAssociation"),
              *result.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")]
    assert len(access) == 3
    for r in access:
        assert r.key in waits_for, r.name
