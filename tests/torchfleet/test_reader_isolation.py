"""The reader pod of `checkpoints | cp` runs what the platform chose, not what a job chose: the pinned
READER_IMAGE (or the researcher's configured mirror of it), its Python isolated (-I) with HOME absent on a
read-only root. The real API server runs the pod in tests/controlplane/test_reader_pod.py."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import pytest

from torchfleet.cli import main
from torchfleet.jobs import image_ref, reader_pod, results, store_access
from torchfleet.jobs import target as targets
from torchfleet.jobs.errors import UsageError

JOB = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "r", "uid": "u"}}


def test_the_platform_image_is_pinned_by_digest():
    ref = image_ref.parse(reader_pod.READER_IMAGE)
    assert ref.digest and ref.digest.startswith("sha256:") and ref.tag == "3.13.14-slim-trixie"


def test_the_reader_image_is_the_platforms_unless_the_researcher_names_a_mirror():
    assert results.reader_image(argparse.Namespace(reader_image=None)) == reader_pod.READER_IMAGE
    mirror = "registry.example.com/mirror/python@sha256:" + "a" * 64
    assert results.reader_image(argparse.Namespace(reader_image=mirror)) == mirror


@pytest.mark.parametrize(("image", "message"), [
    ("registry.example.com/python:3.13", "has no digest"),
    ("Bad Image", "--reader-image: 'Bad Image' is not an image reference"),
])
def test_a_reader_image_without_a_digest_is_refused(image, message):
    with pytest.raises(UsageError, match=message):
        results.reader_image(argparse.Namespace(reader_image=image))


@pytest.mark.parametrize("command", ["cp", "checkpoints"])
def test_a_bad_reader_image_is_exit_2_before_any_cluster_call(command, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("TORCHFLEET_READER_IMAGE", "registry.example.com/python:3.13")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    argv = ["cp", "resnet:output", str(tmp_path / "out")] if command == "cp" else ["checkpoints", "resnet"]
    code = main([*argv, "--kubeconfig", str(tmp_path / "none")])
    err = capsys.readouterr().err
    assert code == 2 and "TORCHFLEET_READER_IMAGE" in err and "has no digest" in err, err


def test_the_pod_runs_isolated_python_with_no_writable_home():
    pod = reader_pod.build_pod("r-reader-0a1b2c", "r", "/mnt/shared", reader_pod.READER_IMAGE,
                               targets.defaults("aws"), JOB)
    container = pod["spec"]["containers"][0]
    assert container["image"] == reader_pod.READER_IMAGE
    assert container["command"][:3] == ["python3", "-I", "-B"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert not any(name.startswith("PYTHON") for name in env)  # -I ignores them: none is pretended to work
    mounts = [m["mountPath"] for m in container["volumeMounts"]]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert not any(env["HOME"] == m or env["HOME"].startswith(m.rstrip("/") + "/") for m in mounts)
    assert container["workingDir"] == "/"  # not the writable scratch


def test_the_exec_command_is_isolated_too():
    argv = store_access.command(reader_pod.PYTHON[0], ["size", "/j", "."])
    assert argv[:3] == list(reader_pod.PYTHON)


def _plant(home):
    """What a job's owner could leave in a writable HOME or push through the environment."""
    site = home / ".local/lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    site.mkdir(parents=True)
    (site / "usercustomize.py").write_text(f"open({str(home / 'ran-usercustomize')!r}, 'w').close()\n")
    (home / "evil").mkdir()
    (home / "evil/sitecustomize.py").write_text(f"open({str(home / 'ran-sitecustomize')!r}, 'w').close()\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    return {**env, "HOME": str(home), "PYTHONPATH": str(home / "evil")}


@pytest.mark.parametrize("isolated", [True, False])
def test_code_planted_in_home_or_the_environment_does_not_run_before_the_script(tmp_path, isolated):
    """The command the reader execs, run here: with -I neither file runs; without it (the old command) both do,
    so the test can fail."""
    home, job = tmp_path / "home", tmp_path / "job"
    job.mkdir()
    env = _plant(home)
    # The interpreter the venv was made from: a venv's own turns the user site off, the pod's image does not.
    python = getattr(sys, "_base_executable", None) or sys.executable
    argv = store_access.command(python, ["size", str(job), "."])
    if not isolated:
        argv = [a for a in argv if a not in ("-I", "-B")]
    proc = subprocess.run(argv, input=store_access.SCRIPT, env=env, capture_output=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    ran = sorted(p.name for p in home.iterdir() if p.name.startswith("ran-"))
    assert ran == ([] if isolated else ["ran-sitecustomize", "ran-usercustomize"])


def test_the_config_files_reader_image_is_read_and_named_when_wrong(capsys, monkeypatch, tmp_path):
    monkeypatch.delenv("TORCHFLEET_READER_IMAGE", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    (tmp_path / "torchfleet").mkdir()
    (tmp_path / "torchfleet/config.yaml").write_text("reader_image: registry.example.com/python:3.13\n")
    code = main(["checkpoints", "resnet", "--kubeconfig", str(tmp_path / "none")])
    err = capsys.readouterr().err
    assert code == 2 and "config.yaml: reader_image: 'registry.example.com/python:3.13' has no digest" in err, err
