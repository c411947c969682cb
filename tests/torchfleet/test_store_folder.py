"""A job's folder of the shared store is its maker's: ``subPath: <maker's folder>/<job>``
(torchfleet/jobs/store_folder.py, issue 30). The same mapping in the admission policy's CEL is checked on the real
API server (tests/controlplane/test_researcher_store.py); here the CLI's half: the mapping, what it refuses, where
the CLI puts it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from torchfleet.jobs import pod_template, store_folder
from torchfleet.jobs.errors import UsageError


@pytest.mark.parametrize(
    ("username", "folder"),
    [
        ("alice", "@alice"),
        ("Alice", "@Alice"),  # the API server tells them apart, so does the store
        ("alice@example.org", "@alice@example.org"),
        ("arn:aws:sts::111122223333:assumed-role/Role/alice",
         "@arn%3Aaws%3Asts%3A%3A111122223333%3Aassumed-role%2FRole%2Falice"),
        ("a/../b", "@a%2F..%2Fb"),  # one path element: no traversal
        ("..", "@.."),  # not '..': the '@' comes first
        ("a%2Fb", "@a%252Fb"),  # '%' escaped first: never the folder of 'a/b'
    ],
)
def test_a_username_maps_to_one_folder_of_one_element(username, folder):
    assert store_folder.folder(username) == folder
    assert "/" not in folder and folder not in (".", "..")


def test_no_two_usernames_share_a_folder():
    names = ["a/b", "a%2Fb", "a:b", "a%3Ab", "a%b", "a%25b", "A/b", "a_b"]
    assert len({store_folder.folder(n) for n in names}) == len(names)


@pytest.mark.parametrize("username", ["", "a b", "ali\u00e7e", "a\nb", "a*b", "a" * 255, "a\\b"])
def test_a_username_that_names_no_folder_is_refused_saying_what_would_do(username):
    with pytest.raises(UsageError, match=r"cannot name a folder of the shared store.*A-Z a-z 0-9 . _ @ % \+ = , ~ -"):
        store_folder.folder(username)


def test_place_puts_the_builders_mounts_under_the_makers_folder_and_keeps_a_placed_one():
    mount = pod_template.shared_mount("/mnt/shared", "resnet")
    placed = dict(pod_template.shared_mount("/mnt/shared", "other"), subPath="@bob/other")
    job = {"kind": "Job", "metadata": {}, "spec": {"template": {"spec": {
        "initContainers": [{"name": "workdir", "volumeMounts": [dict(mount)]}],
        "containers": [{"name": "worker", "volumeMounts": [dict(mount), {"name": "dshm", "mountPath": "/dev/shm"}]}],
    }}}}
    pod = {"kind": "Pod", "metadata": {}, "spec": {"containers": [{"name": "r", "volumeMounts": [placed]}]}}
    store_folder.place(job, "alice")
    store_folder.place(pod, "alice")
    spec = job["spec"]["template"]["spec"]
    assert [m["subPath"] for c in spec["initContainers"] + spec["containers"] for m in c["volumeMounts"]
            if m["name"] == "shared"] == ["@alice/resnet", "@alice/resnet"]  # fmt: skip
    assert spec["containers"][0]["volumeMounts"][0]["mountPath"] == "/mnt/shared/resnet"  # the paths unchanged
    assert pod["spec"]["containers"][0]["volumeMounts"][0]["subPath"] == "@bob/other"


def test_a_reader_follows_its_jobs_folder_and_the_store_root_is_read_back():
    job = {"kind": "Job", "metadata": {}, "spec": {"template": {"spec": {"containers": [
        {"name": "worker",
         "volumeMounts": [dict(pod_template.shared_mount("/data", "resnet"), subPath="@alice/resnet")]}]}}}}
    reader = {"kind": "Pod", "spec": {"containers": [{"volumeMounts": [pod_template.shared_mount("/data", "resnet")]}]}}
    store_folder.follow(reader, job)
    assert reader["spec"]["containers"][0]["volumeMounts"][0]["subPath"] == "@alice/resnet"
    assert pod_template.store_root({"mountPath": "/data/resnet", "subPath": "@alice/resnet"}) == "/data"
    legacy = {"kind": "Job", "metadata": {}, "spec": {"template": {"spec": {"containers": [
        {"name": "worker", "volumeMounts": [pod_template.shared_mount("/data", "resnet")]}]}}}}
    assert store_folder.job_sub_path(legacy) is None  # the old layout: the reader gets its creator's folder


def test_an_administrator_prints_a_users_folder():
    done = subprocess.run([sys.executable, "-m", "torchfleet.jobs.store_folder", "arn:aws:iam::1:user/a"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    assert done.stdout == "@arn%3Aaws%3Aiam%3A%3A1%3Auser%2Fa\n"
