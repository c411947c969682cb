"""job_leftovers' checks, on data (no cluster): what the real-pod tests in test_real_training.py count
as left of a deleted job, and which etcd keys of its run would never expire. A check that matched
nothing, or passed a key without a TTL, would let those tests pass whatever the delete left."""

from __future__ import annotations

import json

from tests.controlplane import job_leftovers

UID = "4b1e0c2a-0000-4000-8000-000000000001"


class _Node:
    def __init__(self, items: list[dict]):
        self.items = items

    def kubectl(self, *args: str) -> str:
        return json.dumps({"items": self.items})


def _obj(kind: str, name: str, labels=None, owners=None) -> dict:
    return {"kind": kind, "metadata": {"name": name, "labels": labels or {}, "ownerReferences": owners or []}}


def test_a_jobs_objects_are_found_by_label_owner_or_name_and_no_others():
    items = [
        _obj("Pod", "x-0-abcde", {"torchfleet.io/job": "x"}),
        _obj("Pod", "x-lighthouse-5d8f-q2w", {"torchfleet.io/lighthouse": "x"}),
        _obj("ConfigMap", "code-part", owners=[{"uid": UID, "name": "x"}]),
        _obj("ReplicaSet", "rs", owners=[{"uid": "other", "name": "x-lighthouse"}]),
        _obj("NetworkPolicy", "job-x-egress"),
        _obj("Job", "x"),
        _obj("NetworkPolicy", "job-x"),
        _obj("Pod", "xy-0-abcde", {"torchfleet.io/job": "xy"}),  # another job whose name starts the same
        _obj("NetworkPolicy", "job-xy-egress", {"torchfleet.io/job": "xy"}),
        _obj("Service", "etcd"),
        _obj("NetworkPolicy", "default-deny"),
    ]
    found = job_leftovers.objects(_Node(items), "ns", "x", UID)
    assert found == ["ConfigMap/code-part", "Job/x", "NetworkPolicy/job-x", "NetworkPolicy/job-x-egress",
                     "Pod/x-0-abcde", "Pod/x-lighthouse-5d8f-q2w", "ReplicaSet/rs"]  # fmt: skip


def test_only_keys_that_expire_pass():
    run = "x-1234abcd"
    store = f"/torch/elastic/store/{run}"
    fine = [
        {"key": f"/torch/elastic/rendezvous/{run}", "dir": False, "ttl": 7194},
        {"key": store, "dir": True, "ttl": None},  # the gate's sweep's
        {"key": f"{store}/dG9y", "dir": True, "ttl": None},  # a '/' in a key's base64 name
        {"key": f"{store}/dG9y/YQ==", "dir": False, "ttl": 60},
    ]
    assert job_leftovers.keys_without_expiry(fine, run) == []
    forever = [
        {"key": f"{store}/bm8tdHRs", "dir": False, "ttl": None},
        {"key": f"{store}/bG9uZw==", "dir": False, "ttl": 7201},
        {"key": f"/torch/elastic/rendezvous/{run}", "dir": True, "ttl": None},
        {"key": f"/torch/elastic/store/{run}x", "dir": True, "ttl": None},  # not this run's store directory
    ]
    assert job_leftovers.keys_without_expiry(fine + forever, run) == forever
