"""``--workdir``'s unpack step: the init container's exact command, as ``submit --dry-run`` writes it, run on
this machine against the parts its ConfigMaps hold, laid out as the projected volume lays them out.

Only the archive's mount point differs (the kubelet mounts the volume at workdir.ARCHIVE_DIR; here the
parts are in a temporary folder); the shared store is a temporary folder given as --mount.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import os
import subprocess
import sys
import tarfile
from concurrent.futures import ThreadPoolExecutor

import pytest
import yaml

from components import spec as platform
from tests.k8s.pod_security import restricted_problems
from tests.torchfleet.checkov import checkov_results
from torchfleet.cli import main
from torchfleet.jobs import workdir


def dry_run(capsys, folder, mount, *extra):
    capsys.readouterr()
    code = main(
        [
            "submit",
            "code",
            "--cpu",
            "--image",
            "registry.example.com/t:1",
            "--workdir",
            str(folder),
            "--mount",
            str(mount),
            "--dry-run",
            *extra,
            "--",
            "python",
            "train.py",
        ]
    )
    out = capsys.readouterr()
    assert code == 0, out.err
    documents = list(yaml.safe_load_all(out.out))
    maps = {d["metadata"]["name"]: d for d in documents if d["kind"] == "ConfigMap"}
    job = next(d for d in documents if d["kind"] not in ("ConfigMap", "NetworkPolicy"))
    return maps, job, documents


def pod_spec(job):
    return job["spec"]["template"]["spec"]


def project(maps, spec, into):
    """What the kubelet puts in the archive volume: each source's items, by their paths."""
    volume = next(v for v in spec["volumes"] if v["name"] == workdir.VOLUME)
    into.mkdir()
    for source in volume["projected"]["sources"]:
        config_map = maps[source["configMap"]["name"]]
        for item in source["configMap"]["items"]:
            (into / item["path"]).write_bytes(base64.b64decode(config_map["binaryData"][item["key"]]))
    return into


def unpack_command(spec, parts):
    """The init container's command, its archive mount point moved to PARTS and `python` this one."""
    init = spec["initContainers"][0]
    command = list(init["command"])
    assert command[:2] == ["python", "-c"] and command[3] == workdir.ARCHIVE_DIR
    assert {"mountPath": workdir.ARCHIVE_DIR, "name": workdir.VOLUME, "readOnly": True} in init["volumeMounts"]
    command[0], command[3] = sys.executable, str(parts)
    return command


def run(command):
    return subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": os.environ["PATH"], "PYTHONDONTWRITEBYTECODE": "1"},
    )


@pytest.fixture
def code(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    root = tmp_path / "code"
    (root / "pkg").mkdir(parents=True)
    (root / "train.py").write_text("import pkg.model\n")
    (root / "pkg" / "model.py").write_text("X = 1\n")
    (root / "run.sh").write_text("#!/bin/sh\n")
    (root / "run.sh").chmod(0o755)
    (root / "latest.py").symlink_to("train.py")
    return root


def test_the_init_command_unpacks_the_code_where_the_training_container_runs(tmp_path, capsys, code):
    mount = tmp_path / "shared"
    maps, job, _ = dry_run(capsys, code, mount)
    spec = pod_spec(job)
    done = run(unpack_command(spec, project(maps, spec, tmp_path / "parts")))
    assert done.returncode == 0, done.stderr
    target = mount / "code" / "workdir" / next(iter(maps.values()))["metadata"]["labels"][workdir.LABEL_WORKDIR]
    assert spec["containers"][0]["workingDir"] == str(target)
    assert (target / "pkg" / "model.py").read_text() == "X = 1\n"
    assert os.access(target / "run.sh", os.X_OK) and os.readlink(target / "latest.py") == "train.py"
    assert [p.name for p in target.parent.iterdir()] == [target.name], "no temporary folder left"
    again = run(unpack_command(spec, tmp_path / "parts"))
    assert again.returncode == 0 and "already unpacked" in again.stdout


def test_an_archive_of_several_parts_is_joined_in_order(tmp_path, capsys, code):
    (code / "weights.bin").write_bytes(os.urandom(workdir.PART_BYTES + 4096))  # does not compress: two parts
    maps, job, _ = dry_run(capsys, code, tmp_path / "shared")
    assert len(maps) == 2
    spec = pod_spec(job)
    done = run(unpack_command(spec, project(maps, spec, tmp_path / "parts")))
    assert done.returncode == 0, done.stderr
    target = spec["containers"][0]["workingDir"]
    assert (code / "weights.bin").read_bytes() == (tmp_path / target / "weights.bin").read_bytes()


def test_the_pods_of_a_job_unpacking_at_once_all_succeed_with_one_copy(tmp_path, capsys, code):
    maps, job, _ = dry_run(capsys, code, tmp_path / "shared")
    spec = pod_spec(job)
    command = unpack_command(spec, project(maps, spec, tmp_path / "parts"))
    with ThreadPoolExecutor(6) as pool:
        results = list(pool.map(lambda _: run(command), range(6)))
    assert [r.returncode for r in results] == [0] * 6, [r.stderr for r in results]
    target = spec["containers"][0]["workingDir"]
    assert sorted(os.listdir(os.path.dirname(target))) == [os.path.basename(target)]
    assert (tmp_path / target / "train.py").read_text() == "import pkg.model\n"


def test_a_part_that_does_not_match_the_sha256_is_refused_and_nothing_is_unpacked(tmp_path, capsys, code):
    maps, job, _ = dry_run(capsys, code, tmp_path / "shared")
    spec = pod_spec(job)
    parts = project(maps, spec, tmp_path / "parts")
    (parts / "part-000").write_bytes((parts / "part-000").read_bytes() + b"x")
    done = run(unpack_command(spec, parts))
    assert done.returncode != 0 and "sha256" in done.stderr
    assert not os.path.exists(spec["containers"][0]["workingDir"])


@pytest.mark.parametrize("name", ["../escaped.txt", "link-out", "/abs/escaped.txt"])
def test_a_hostile_archive_is_refused_by_the_data_filter_and_leaves_nothing(tmp_path, name):
    """An archive with the right sha256 but a member leaving the folder (one the packer never makes: a
    ConfigMap written by hand): tarfile's data filter refuses it, and the temporary folder is removed.
    Regression: the filter's FilterError is no OSError, and the temporary folder was left behind."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        member = tarfile.TarInfo(name)
        if name == "link-out":
            member.type, member.linkname = tarfile.SYMTYPE, "../../outside"
            tar.addfile(member)
        else:
            member.size = 1
            tar.addfile(member, io.BytesIO(b"x"))
    data = gzip.compress(raw.getvalue())
    parts = tmp_path / "parts"
    parts.mkdir()
    (parts / "part-000").write_bytes(data)
    target = tmp_path / "shared" / "job" / "workdir" / "x"
    ref = workdir.Workdir(owner="job", sha256=hashlib.sha256(data).hexdigest(), parts=1)
    command = [sys.executable, *workdir.command(ref, str(tmp_path / "shared" / "job"))[1:]]
    command[3], command[5] = str(parts), str(target)
    done = run(command)
    assert not (tmp_path / "shared" / "escaped.txt").exists() and not (tmp_path / "outside").exists()
    if name.startswith("/"):  # the filter strips the leading slash: it lands inside the folder
        assert done.returncode == 0 and (target / "abs" / "escaped.txt").is_file(), done.stderr
        return
    assert done.returncode != 0 and "Error" in done.stderr
    assert os.listdir(target.parent) == []


@pytest.mark.parametrize("operator", platform.OPERATORS)
def test_the_pod_with_its_unpack_step_is_restricted(tmp_path, capsys, code, operator):
    _, job, _ = dry_run(capsys, code, tmp_path / "shared", "--operator", operator)
    from torchfleet.jobs import manifests

    template = manifests.worker_spec(job)["template"]
    assert restricted_problems(template["spec"]) == []
    init = template["spec"]["initContainers"][0]
    assert init["securityContext"]["readOnlyRootFilesystem"] is True
    assert init["image"] == template["spec"]["containers"][0]["image"]


def test_the_pod_and_its_config_maps_pass_checkov(tmp_path, capsys, code):
    _, job, documents = dry_run(capsys, code, tmp_path / "shared")
    template = job["spec"]["template"]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "code-0", "namespace": job["metadata"]["namespace"], **template["metadata"]},
        "spec": template["spec"],
    }
    folder = tmp_path / "checkov"
    folder.mkdir()
    (folder / "workdir.yaml").write_text(yaml.safe_dump_all([pod, *documents], sort_keys=False))
    from tests.torchfleet.test_jobs_checkov import SKIPS

    failed = [
        f"{c['check_id']} {c['check_name']} ({c['resource']})"
        for r in checkov_results(folder, SKIPS)
        for c in r.get("failed_checks", [])
    ]
    assert failed == []


def test_each_submit_of_the_same_code_has_config_maps_of_its_own_and_the_same_folder(tmp_path, capsys, code):
    """The folder is the content's (a resubmit finds it unpacked); the ConfigMaps' names are the submit's, so a
    resubmit right after ``delete`` never meets the old job's before the garbage collector has removed them."""
    first, job_one, _ = dry_run(capsys, code, tmp_path / "shared")
    second, job_two, _ = dry_run(capsys, code, tmp_path / "shared")
    assert set(first).isdisjoint(second)
    assert pod_spec(job_one)["containers"][0]["workingDir"] == pod_spec(job_two)["containers"][0]["workingDir"]
    assert [m["binaryData"] for m in first.values()] == [m["binaryData"] for m in second.values()]
