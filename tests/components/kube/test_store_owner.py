"""store_owner.py without mocks: the Job that hands the store's root to the training uid."""

from __future__ import annotations

import re

import pytest

from components.kube import manifests, store_owner
from components.spec import MANAGER_TOLERATIONS, TRAINING_UID

NFS = {"nfs": {"server": "10.0.0.2", "path": "/share"}}


def test_volume_is_the_training_volume_bound_to_the_job_claim():
    pv = store_owner.persistent_volume("ml", "data", NFS, "1Ti", ("nfsvers=4.1",))
    training = manifests.persistent_volume("ml", "data", NFS, "1Ti", ("nfsvers=4.1",))
    assert pv["metadata"]["name"] == "torchfleet-system-ml-data" != training["metadata"]["name"]
    assert pv["spec"]["claimRef"] == {"namespace": "torchfleet-system", "name": "ml-data"}
    assert {**pv["spec"], "claimRef": None} == {**training["spec"], "claimRef": None}


def test_claim_binds_only_that_volume():
    claim = store_owner.persistent_volume_claim("ml", "data", "1Ti")
    pv = store_owner.persistent_volume("ml", "data", NFS, "1Ti")
    assert claim["spec"]["volumeName"] == pv["metadata"]["name"]
    assert claim["spec"]["storageClassName"] == ""
    assert pv["spec"]["claimRef"] == {"namespace": claim["metadata"]["namespace"], "name": claim["metadata"]["name"]}


def test_script_chowns_and_chmods_the_root_only():
    assert store_owner.script() == (
        f"set -eu; chown {TRAINING_UID}:{TRAINING_UID} /store; chmod 2775 /store; ls -ldn /store"
    )


def test_job_mounts_the_claim_where_the_script_works():
    job = store_owner.job("ml", "data")
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"] == ["sh", "-c", store_owner.script()]
    assert pod["volumes"] == [{"name": "store", "persistentVolumeClaim": {"claimName": "ml-data"}}]
    assert container["volumeMounts"] == [{"name": "store", "mountPath": "/store"}]
    assert "nodeSelector" not in pod


def test_job_follows_the_manager_selector():
    pod = store_owner.job("ml", "data", {"torchfleet.io/pool": "manager"})["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"torchfleet.io/pool": "manager"}
    assert pod["tolerations"] == list(MANAGER_TOLERATIONS)  # the manager pool's taint, every cloud's (issue 30)


def test_image_is_an_exact_release():
    name, tag = store_owner.IMAGE.rsplit(":", 1)
    assert name == "busybox" and re.fullmatch(r"\d+\.\d+\.\d+", tag)


def test_every_checkov_skip_is_an_annotation_with_a_reason():
    annotations = store_owner.job("ml", "data")["metadata"]["annotations"]
    skips = dict(v.split("=", 1) for k, v in annotations.items() if k.startswith("checkov.io/skip"))
    assert skips == store_owner.CHECKOV_SKIPS
    assert all(len(why.split()) >= 8 for why in skips.values())


def test_a_job_name_longer_than_a_label_is_refused():
    with pytest.raises(ValueError, match="longer than 63"):
        store_owner.job_name("n" * 50, "shared-data")
