"""The TrainingLayer's helpers: resource options and settings (invisible or indirect under mocks)."""

from __future__ import annotations

import pulumi
import pytest

from components.clouds.base import SharedStore
from components.kube import training, transforms
from components.spec import parse

SETTINGS = transforms.LayerSettings(
    namespace="ml", claim_name="shared-data", store_capacity="1Ti", etcd_replicas=1
)


class FakeResource(pulumi.Resource):
    """A resource that registers nothing: the helpers only pass it along."""

    def __init__(self) -> None:  # no super().__init__: nothing to register
        pass


def test_static_transformation_parametrizes_and_sets_depends_on():
    waited = [FakeResource(), FakeResource()]
    (transform,) = training.static_transformations(SETTINGS, waited)
    obj = {"kind": "Service", "metadata": {"name": "etcd", "namespace": "elastic-job"}}
    opts = pulumi.ResourceOptions()
    transform(obj, opts)
    assert obj["metadata"]["namespace"] == "ml"
    assert opts.depends_on == waited


def test_static_transformation_leaves_depends_on_alone_when_nothing_to_wait_for():
    (transform,) = training.static_transformations(SETTINGS, [])
    opts = pulumi.ResourceOptions()
    transform({"kind": "Namespace", "metadata": {"name": "x"}}, opts)
    assert opts.depends_on is None


def test_child_options_parent_and_depends_on():
    parent, dep = FakeResource(), FakeResource()
    opts = training.child_options(parent, [dep])
    assert opts.parent is parent
    assert opts.depends_on == [dep]


@pytest.mark.parametrize(
    ("relative", "name"),
    [("namespace.yaml", "namespace"), ("etcd/statefulset.yaml", "etcd-statefulset"),
     ("controller/networkpolicy-apiserver.yaml", "controller-networkpolicy-apiserver")],
)
def test_config_file_names(relative, name):
    assert training.config_file_name(relative) == name


@pytest.mark.parametrize(
    ("config", "zoned", "members"),
    [
        ({"torchfleet:cloud": "local"}, False, 1),
        ({"torchfleet:cloud": "aws", "aws:region": "us-west-2", "torchfleet:zones": ["us-west-2a", "us-west-2b"],
          "torchfleet:network": {"publicAccessCidrs": ["203.0.113.0/24"]},
          "torchfleet:gpuPools": [{"gpu": "t4", "maxNodes": 2}]}, True, 3),
    ],
)
def test_layer_settings_from_spec(config, zoned, members):
    spec = parse(config)
    store = SharedStore(kind="efs", volume_source={"nfs": {"server": "x", "path": "/"}}, capacity="5Ti")
    cluster = type("Handle", (), {"store": store, "manager_selector": {"pool": "manager"},
                                  "storage_class": "gp3-encrypted"})()
    settings = training.layer_settings(spec, cluster)
    assert (settings.zoned, settings.etcd_replicas) == (zoned, members)
    assert settings.storage_class == "gp3-encrypted"
    assert settings.store_capacity == "5Ti"
    assert settings.manager_selector == {"pool": "manager"}
    assert settings.pv_name == "elastic-job-shared-data"


def test_a_wrong_store_is_refused_before_anything_is_made():
    store = SharedStore(kind="hostpath", volume_source={"hostPath": {"path": "/x"}}, mount_options=("nfsvers=4.1",))
    with pytest.raises(ValueError, match="hostPath volume takes no mountOptions"):
        training.check_store(SETTINGS, store)
