"""encryptionAtHost per Azure pool (Azure review 14): on by default, refused before anything is
created on a size the catalog records without it (the AKS pool create would fail), and named as the
way out; refused on the other clouds."""

from __future__ import annotations

import pytest

from components.catalog import host_encryption
from tests.components.spec.configs import config, ok, only, pools

GPU = "torchfleet:gpuPools[0]"


def test_azure_pools_encrypt_at_host_by_default():
    spec = ok(config("azure"))
    assert spec.manager_pool.encryption_at_host is True
    assert {p.encryption_at_host for p in spec.gpu_pools} == {True}


def test_a_pool_can_turn_it_off_and_only_that_pool():
    spec = ok(pools("azure", {"gpu": "t4", "maxNodes": 2, "encryptionAtHost": False},
                    {"gpu": "a100-80gb", "maxNodes": 1, "zones": ["1"]}))
    assert {p.name: p.encryption_at_host for p in spec.gpu_pools} == {
        "gpu-t4-1": False, "gpu-t4-2": False, "gpu-a100-80gb-1": True}
    manager = ok(config("azure", managerPool={"maxNodes": 3, "encryptionAtHost": "false"})).manager_pool
    assert manager.encryption_at_host is False


@pytest.fixture
def nc8_without_it(monkeypatch):
    real = host_encryption.supported
    monkeypatch.setattr(host_encryption, "supported", lambda t: False if t == "Standard_NC8as_T4_v3" else real(t))


def test_a_size_recorded_without_it_is_refused_naming_the_sizes_that_have_it(nc8_without_it):
    message = only(pools("azure", {"gpu": "t4", "maxNodes": 2, "machineTypes": ["Standard_NC8as_T4_v3"]}),
                   f"{GPU}.machineTypes")
    assert message.startswith("Standard_NC8as_T4_v3 cannot encrypt at host")
    assert "sizes that can: Standard_NC4as_T4_v3, Standard_NC16as_T4_v3, Standard_NC64as_T4_v3" in message
    assert message.endswith(f"or set {GPU}.encryptionAtHost: false")
    ok(pools("azure", {"gpu": "t4", "maxNodes": 2, "machineTypes": ["Standard_NC8as_T4_v3"],
                       "encryptionAtHost": False}))


def test_a_manager_size_recorded_without_it_is_refused(monkeypatch):
    monkeypatch.setattr(host_encryption, "supported", lambda t: t != "Standard_D8s_v5")
    message = only(config("azure", managerPool={"maxNodes": 3, "machineType": "Standard_D8s_v5"}),
                   "torchfleet:managerPool.machineType")
    assert "sizes that can: Standard_D4s_v5," in message
    assert message.endswith("or set torchfleet:managerPool.encryptionAtHost: false")


def test_an_unrecorded_size_is_accepted_and_left_to_torchfleet_check():
    spec = ok(pools("azure", {"gpu": "h100", "maxNodes": 1, "machineTypes": ["Standard_ND96isr_H100_v5"]}))
    assert spec.gpu_pools[0].encryption_at_host is True


@pytest.mark.parametrize("cloud", ["aws", "gcp"])
def test_other_clouds_refuse_the_key(cloud):
    message = only(pools(cloud, {"gpu": "t4", "maxNodes": 2, "encryptionAtHost": True}), f"{GPU}.encryptionAtHost")
    assert message == f"only Azure pools set encryption at host; remove this key on {cloud}"


def test_not_a_boolean_names_the_key():
    assert only(pools("azure", {"gpu": "t4", "maxNodes": 2, "encryptionAtHost": "yes"}),
                f"{GPU}.encryptionAtHost") == "expected true or false, got 'yes'"
