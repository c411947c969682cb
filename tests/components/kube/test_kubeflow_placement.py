"""The training-operator's Deployment goes to the manager pool and tolerates its taint (issue 30).

The kustomize overlay sets neither, and on a cloud stack every pool is tainted (the GPU pools, the manager pool, the
CPU pool), so the operator would stay Pending. The transform is called here as the Pulumi engine calls it for each
child the kustomize.v2.Directory registers; under the mocks the Directory registers no children."""

from __future__ import annotations

import pulumi
import pytest

from components.kube import kubeflow
from components.spec import MANAGER_TOLERATIONS

MANAGER = {"torchfleet.io/pool": "manager"}
OPERATOR_POD = {"containers": [{"name": "training-operator"}], "tolerations": [{"key": "x", "operator": "Exists"}]}


def transformed(type_: str, props: dict, selector: dict) -> pulumi.ResourceTransformResult | None:
    args = pulumi.ResourceTransformArgs(custom=True, type_=type_, name="kf-training-operator", props=props,
                                        opts=pulumi.ResourceOptions())  # fmt: skip
    return kubeflow.manager_placement(selector)(args)


@pytest.mark.parametrize("selector", [MANAGER, {}])
def test_the_operators_deployment_lands_on_the_manager_pool(selector):
    props = {"metadata": {"name": "training-operator"}, "spec": {"template": {"spec": OPERATOR_POD}}}
    result = transformed(kubeflow.DEPLOYMENT_TYPE, props, selector)
    pod = result.props["spec"]["template"]["spec"]
    assert pod["tolerations"] == [{"key": "x", "operator": "Exists"}, *MANAGER_TOLERATIONS]
    assert pod.get("nodeSelector", {}) == selector
    assert pod["containers"] == OPERATOR_POD["containers"]
    assert OPERATOR_POD["tolerations"] == [{"key": "x", "operator": "Exists"}]  # the input is left as it was


@pytest.mark.parametrize("type_", ["kubernetes:core/v1:Service", "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole"])
def test_other_kinds_are_left_alone(type_):
    assert transformed(type_, {"spec": {}}, MANAGER) is None
