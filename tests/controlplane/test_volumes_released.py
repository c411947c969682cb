"""The destroy-time wait for a CSI driver's volumes (components/clouds/settle.py) against the real API
server: it returns once the driver's PersistentVolumes are gone, and fails naming them if they stay.
Regression (issue 20, AWS review m5): the EBS add-on was deleted before its controller had deleted
etcd's volumes, which then outlived the stack; the first fix slept a fixed 120 s instead of looking."""

from __future__ import annotations

import threading

import pytest
from kubernetes import client

from components.clouds import settle

DRIVER = "ebs.csi.aws.com"


def _pv(name: str, driver: str) -> client.V1PersistentVolume:
    return client.V1PersistentVolume(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1PersistentVolumeSpec(
            capacity={"storage": "1Gi"},
            access_modes=["ReadWriteOnce"],
            persistent_volume_reclaim_policy="Retain",
            csi=client.V1CSIPersistentVolumeSource(driver=driver, volume_handle=f"vol-{name}"),
        ),
    )


@pytest.fixture
def core(control_plane):
    api = settle.core_api(control_plane.kubeconfig.read_text())  # the kubeconfig path the provider gets as text
    yield api
    for pv in api.list_persistent_volume().items:
        if pv.metadata.name.startswith("released-"):
            api.delete_persistent_volume(pv.metadata.name)


def test_the_wait_ends_when_the_driver_has_deleted_its_volumes(core, monkeypatch):
    core.create_persistent_volume(_pv("released-etcd-0", DRIVER))
    core.create_persistent_volume(_pv("released-other", "file.csi.azure.com"))  # another driver's: not waited for
    assert settle.volumes_of(core, DRIVER) == ["released-etcd-0"]
    looked_again = threading.Event()
    looks: list[list[str]] = []
    listed = settle.volumes_of

    def volumes_of(api, driver):
        looks.append(listed(api, driver))
        if len(looks) >= 2:
            looked_again.set()  # the wait saw the volume and did not return: now the driver deletes it
        return looks[-1]

    def driver_deletes_it():  # what the EBS controller does once the claim is gone
        looked_again.wait()
        core.delete_persistent_volume("released-etcd-0")

    monkeypatch.setattr(settle, "volumes_of", volumes_of)
    deleter = threading.Thread(target=driver_deletes_it)
    deleter.start()
    try:
        settle.wait_for_release(core, DRIVER, timeout_s=300, poll_s=0.2)
        at_return = listed(core, DRIVER)  # a wait that returned early still sees the volume (not yet deleted)
    finally:
        looked_again.set()
        deleter.join()
    assert looks[0] == ["released-etcd-0"] and looks[-1] == [] and at_return == []


def test_volumes_that_stay_fail_the_destroy_naming_them(core):
    core.create_persistent_volume(_pv("released-stuck", DRIVER))
    left = r"ebs\.csi\.aws\.com: PersistentVolumes still there after 1 s: released-stuck"
    with pytest.raises(settle.VolumesLeft, match=left):
        settle.wait_for_release(core, DRIVER, timeout_s=1, poll_s=0.2)
