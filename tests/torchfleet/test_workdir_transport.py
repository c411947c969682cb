"""``submit --workdir`` through the real kubernetes client, only HTTP faked (test_jobs_transport.py's server):
the order of the requests, the owner patch as a strategic merge, and the clean-up when the patch fails
(the tier, tests/controlplane/test_workdir.py, cannot make a patch fail after the job exists)."""

from __future__ import annotations

import pytest
import yaml

from tests.torchfleet.test_jobs_transport import BATCH, NS, POLICIES, kubeconfig, server  # noqa: F401 (fixtures)
from torchfleet.cli import main
from torchfleet.jobs import workdir

CONFIGMAPS = f"/api/v1/namespaces/{NS}/configmaps"


@pytest.fixture
def code(tmp_path, monkeypatch):
    monkeypatch.setattr(workdir, "new_nonce", lambda: "0000")  # new per submit: the dry run's names, here
    monkeypatch.setenv("HOME", str(tmp_path))
    root = tmp_path / "code"
    root.mkdir()
    (root / "train.py").write_text("print('hi')\n")
    return root


def documents(capsys, flags):
    capsys.readouterr()
    assert main(["submit", "--dry-run", *flags]) == 0
    found = list(yaml.safe_load_all(capsys.readouterr().out))
    return [d for d in found if d["kind"] == "ConfigMap"], next(d for d in found if d["kind"] == "Job")


def answer(server, job, *, patch_status=200):  # noqa: F811 (the fixture, passed on)
    name = job["metadata"]["name"]
    server.on("POST", CONFIGMAPS, 201, {"kind": "ConfigMap"})
    server.on("POST", POLICIES, 201, {"kind": "NetworkPolicy"})
    server.on("PATCH", f"{POLICIES}/job-{name}", 200, {"kind": "NetworkPolicy"})
    server.on("POST", BATCH, 201, {**job, "metadata": {**job["metadata"], "uid": "u-1"}})
    server.on("DELETE", f"{BATCH}/{name}", 200, {"kind": "Status"})


def test_the_parts_go_first_and_the_job_becomes_their_owner_by_strategic_merge(server, kubeconfig, capsys, code):  # noqa: F811
    flags = ["wd", "--cpu", "--image", "r/t:1", "--workdir", str(code), "--", "python", "train.py"]
    maps, job = documents(capsys, flags)
    (config_map,) = maps
    answer(server, job)
    server.on("PATCH", f"{CONFIGMAPS}/{config_map['metadata']['name']}", 200, config_map)
    assert main(["submit", "--kubeconfig", kubeconfig, *flags]) == 0, capsys.readouterr().err
    calls = [(c.method, c.path) for c in server.calls if c.method != "GET"]
    assert calls == [("POST", CONFIGMAPS), ("POST", POLICIES), ("POST", BATCH), ("PATCH", f"{POLICIES}/job-wd"),
                     ("PATCH", f"{CONFIGMAPS}/{config_map['metadata']['name']}")]  # fmt: skip
    create = next(c for c in server.calls if (c.method, c.path) == ("POST", CONFIGMAPS))
    patch = server.calls[-1]
    # what the dry run printed, with its maker recorded as submit records it (the fake server's SelfSubjectReview)
    config_map["metadata"]["annotations"]["torchfleet.io/created-by"] = "alice@example.org"
    assert create.body == config_map and create.query["fieldValidation"] == ["Strict"]
    assert patch.content_type == "application/strategic-merge-patch+json"
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "wd", "uid": "u-1", "blockOwnerDeletion": False}
    assert patch.body == {"metadata": {"ownerReferences": [owner]}}
    assert "code in /mnt/shared/wd/workdir/" in capsys.readouterr().out


def test_a_refused_owner_patch_removes_the_job_and_the_parts(server, kubeconfig, capsys, code):  # noqa: F811
    flags = ["wd", "--cpu", "--image", "r/t:1", "--workdir", str(code), "--", "python", "train.py"]
    maps, job = documents(capsys, flags)
    name = maps[0]["metadata"]["name"]
    answer(server, job)
    server.on("PATCH", f"{CONFIGMAPS}/{name}", 500, {"kind": "Status", "message": "etcd timeout"})
    server.on("DELETE", f"{CONFIGMAPS}/{name}", 200, {"kind": "Status"})
    assert main(["submit", "--kubeconfig", kubeconfig, *flags]) == 1
    assert "etcd timeout" in capsys.readouterr().err
    deletes = [c.path for c in server.calls if c.method == "DELETE"]
    assert deletes == [f"{BATCH}/wd", f"{CONFIGMAPS}/{name}"]
