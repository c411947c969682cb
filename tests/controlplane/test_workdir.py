"""``submit --workdir`` against the real control plane: the API server takes the parts (a full one included)
as immutable ConfigMaps, Pod Security Admission (``restricted``) admits the pods with their unpack step, the
ConfigMaps belong to the job (a sweep's to every job of it) and the garbage collector takes them with the
last one, and a submit that fails midway leaves none behind.

kwok runs no container: the unpack step itself runs on this machine (tests/torchfleet/test_workdir_unpack.py).
"""

from __future__ import annotations

import base64
import itertools
import json
import os

import pytest

from components.spec import LABEL_JOB
from tests.controlplane.layer import get, kubectl, wait_for
from tests.controlplane.test_jobs import IMAGE, cli, training_pods
from torchfleet.jobs import pod_template, workdir

_names = itertools.count()


@pytest.fixture
def code(tmp_path, monkeypatch):
    """A folder (no git work tree) that packs to two parts: a full one and the rest."""
    monkeypatch.setenv("HOME", str(tmp_path))
    root = tmp_path / "code"
    root.mkdir()
    (root / "train.py").write_text("print('hello from the workdir')\n")
    (root / "weights.bin").write_bytes(os.urandom(workdir.PART_BYTES + 64 * 1024))  # does not compress
    return root


def config_maps(layer, selector: str) -> list[dict]:
    return get(layer.cp, "configmaps", "-n", layer.namespace, "-l", selector)["items"]


def job_uid(layer, name: str) -> str:
    return get(layer.cp, "job", name, "-n", layer.namespace)["metadata"]["uid"]


def owners(config_map: dict) -> set[tuple[str, str]]:
    return {(o["kind"], o["name"]) for o in config_map["metadata"].get("ownerReferences", [])}


def submit(layer, capsys, name: str, folder, *extra: str, command: str = "submit") -> tuple[int, str]:
    return cli(layer, capsys, command, name, "--gpu", "t4", "--nodes", "1", "--image", IMAGE,
               "--workdir", str(folder), *extra, "--", "python", "train.py")  # fmt: skip


def test_the_parts_are_owned_by_the_job_its_pods_admitted_and_collected_with_it(training_layer, capsys, code):
    layer, name = training_layer, f"tier-workdir-{next(_names)}"
    status, out = submit(layer, capsys, name, code)
    assert status == 0, out
    try:
        maps = sorted(config_maps(layer, f"{LABEL_JOB}={name}"), key=lambda m: m["metadata"]["name"])
        assert len(maps) == 2
        assert len(base64.b64decode(maps[0]["binaryData"][workdir.PART_KEY])) == workdir.PART_BYTES
        uid = job_uid(layer, name)
        for config_map in maps:
            assert config_map["immutable"] is True
            assert [(o["kind"], o["name"], o["uid"]) for o in config_map["metadata"]["ownerReferences"]] == [
                ("Job", name, uid)
            ]
        # Admitted under restricted: the pods exist, each with the unpack step and the code as its folder.
        pods = wait_for(f"a pod of {name}", lambda: training_pods(layer, name))
        spec = pods[0]["spec"]
        assert [c["name"] for c in spec["initContainers"]] == [workdir.INIT_CONTAINER]
        short = maps[0]["metadata"]["labels"][workdir.LABEL_WORKDIR]
        assert spec["containers"][0]["workingDir"].endswith(f"/{name}/workdir/{short}")
        # Immutable: the code a job runs cannot be swapped under it.
        refused = kubectl(layer.cp, "patch", "configmap", maps[0]["metadata"]["name"], "-n", layer.namespace,
                          "--type=merge", "-p", json.dumps({"binaryData": {"part": ""}}), check=False)  # fmt: skip
        assert "field is immutable" in refused, refused
    finally:
        assert cli(layer, capsys, "delete", name)[0] == 0
    wait_for(f"{name}'s ConfigMaps collected", lambda: not config_maps(layer, f"{LABEL_JOB}={name}"))


def test_a_sweep_shares_one_set_that_goes_with_its_last_job(training_layer, capsys, code):
    layer, name = training_layer, f"tier-wdsweep-{next(_names)}"
    status, out = submit(layer, capsys, name, code, "--param", "lr=0.1,0.2", command="sweep")
    assert status == 0, out
    selector = f"{pod_template.LABEL_SWEEP}={name}"
    maps = config_maps(layer, selector)
    assert len(maps) == 2, "one set for both jobs"
    assert all(owners(m) == {("Job", f"{name}-0"), ("Job", f"{name}-1")} for m in maps)
    assert cli(layer, capsys, "delete", f"{name}-0")[0] == 0
    # The garbage collector drops the deleted owner and keeps the ConfigMaps for the other job.
    wait_for(f"{name}-0 gone from the owners",
             lambda: all(owners(m) == {("Job", f"{name}-1")} for m in config_maps(layer, selector)))  # fmt: skip
    assert len(config_maps(layer, selector)) == 2
    assert cli(layer, capsys, "delete", f"{name}-1")[0] == 0
    wait_for(f"{name}'s ConfigMaps collected", lambda: not config_maps(layer, selector))


def test_a_job_refused_at_create_leaves_no_parts(training_layer, capsys, code):
    """A batch Job of that name that is not torchfleet's (so the name check passes it): the create is
    refused (409) after the parts were made, and submit removes them."""
    layer, name = training_layer, f"tier-wdtaken-{next(_names)}"
    foreign = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": layer.namespace},
               "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never",
                        "containers": [{"name": "c", "image": IMAGE}]}}}}  # fmt: skip
    kubectl(layer.cp, "create", "-f", "-", input=json.dumps(foreign))
    try:
        status, out = submit(layer, capsys, name, code)
        assert status == 2 and "already exists" in out, out
        assert config_maps(layer, f"{LABEL_JOB}={name}") == []
    finally:
        kubectl(layer.cp, "delete", "job", name, "-n", layer.namespace, "--wait=false")


def test_a_part_refused_midway_removes_the_parts_made_before_it(training_layer, capsys, code):
    """A ResourceQuota that admits one more ConfigMap: the second part is refused (403), the first removed,
    no job made."""
    layer, name = training_layer, f"tier-wdquota-{next(_names)}"
    count = len(get(layer.cp, "configmaps", "-n", layer.namespace)["items"])
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name, "namespace": layer.namespace},
             "spec": {"hard": {"configmaps": str(count + 1)}}}  # fmt: skip
    kubectl(layer.cp, "create", "-f", "-", input=json.dumps(quota))
    try:
        # The quota admission plugin enforces only once the controller has counted what is there.
        wait_for("the quota counted", lambda: get(layer.cp, "resourcequota", name, "-n", layer.namespace)
                 .get("status", {}).get("used", {}).get("configmaps"))  # fmt: skip
        status, out = submit(layer, capsys, name, code)
        assert status == 1 and "exceeded quota" in out, out
        assert config_maps(layer, f"{LABEL_JOB}={name}") == []
        assert kubectl(layer.cp, "get", "job", name, "-n", layer.namespace, check=False).find("NotFound") >= 0
    finally:
        kubectl(layer.cp, "delete", "resourcequota", name, "-n", layer.namespace)


def test_the_same_code_resubmitted_right_after_a_delete_is_taken(training_layer, capsys, code):
    """``delete X && submit X`` of unchanged code, twice, and both jobs' ConfigMaps are collected. The old job's
    go only once the garbage collector gets to them; the new submit's have names of their own
    (workdir.new_nonce), so it never depends on how fast that is (here it was fast enough either way)."""
    layer, name = training_layer, f"tier-wdagain-{next(_names)}"
    for _ in range(2):
        status, out = submit(layer, capsys, name, code)
        assert status == 0, out
        assert cli(layer, capsys, "delete", name)[0] == 0
    wait_for(f"{name}'s ConfigMaps collected", lambda: not config_maps(layer, f"{LABEL_JOB}={name}"))
