"""The default training image: one name in one place (torchfleet/jobs/image_ref.py), issue 32.

`submit` without --image used to stop at "--image: required", and the docs named an image no one
publishes (torchfleet/trainer:0.1.0). The default is what the release workflow pushes, at this package's
version; every doc example that runs the training image names exactly it.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml

import torchfleet
from torchfleet.cli import main
from torchfleet.jobs.image_ref import DEFAULT_IMAGE, PUBLISHED_REPOSITORY

REPO = Path(__file__).resolve().parents[2]
CMD = ["--", "python", "train.py", "--total-steps=10"]


def test_it_is_what_the_release_workflow_publishes_at_this_version():
    workflow = (REPO / ".github" / "workflows" / "image.yml").read_text()
    (published,) = re.findall(r"image=(\S+)/\$\{OWNER,,\}/([\w.-]+):\$\{BASH_REMATCH\[1\]\}", workflow)
    registry, name = published
    owner = PUBLISHED_REPOSITORY.split("/")[1]
    assert f"{registry}/{owner}/{name}" == PUBLISHED_REPOSITORY and owner == owner.lower()
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert f"{PUBLISHED_REPOSITORY}:{version}" == DEFAULT_IMAGE and version == torchfleet.__version__


def _image_of(out: str) -> str:
    docs = [d for d in yaml.safe_load_all(out) if d]
    return docs[0]["spec"]["template"]["spec"]["containers"][0]["image"]


def test_submit_without_image_runs_the_default_and_says_so(capsys, monkeypatch):
    monkeypatch.delenv("TORCHFLEET_IMAGE", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", "/nonexistent-config")
    assert main(["submit", "j", "--stack", "local", "--cpu", "--dry-run", *CMD]) == 0
    out, err = capsys.readouterr()
    assert _image_of(out) == DEFAULT_IMAGE
    assert f"note: --image not given: the published training image {DEFAULT_IMAGE}" in err


@pytest.mark.parametrize("source", ["flag", "env"])
def test_a_given_image_wins(source, capsys, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", "/nonexistent-config")
    monkeypatch.delenv("TORCHFLEET_IMAGE", raising=False)
    flag = ["--image", "r.example.com/t:2"] if source == "flag" else []
    if source == "env":
        monkeypatch.setenv("TORCHFLEET_IMAGE", "r.example.com/t:2")
    assert main(["submit", "j", "--stack", "local", "--cpu", *flag, "--dry-run", *CMD]) == 0
    out, err = capsys.readouterr()
    assert _image_of(out) == "r.example.com/t:2" and "--image not given" not in err


DOCS = [*REPO.glob("*.md"), *(REPO / "docs").glob("*.md"), *(REPO / "training-image").rglob("*.md"),
        *(REPO / "training-image").rglob("Dockerfile*"), *(REPO / "k8s" / "examples").glob("*.yaml")]


def test_every_doc_example_names_the_default_image():
    named = {(path.relative_to(REPO).as_posix(), m) for path in DOCS
             for m in re.findall(r"[\w.:/-]*torchfleet[/-]trainer:[\w.]+", path.read_text())
             if m != "/torchfleet-trainer:X.Y.Z"}  # docs/workdir.md's pattern of the published names
    assert named, "no doc names the training image"
    wrong = {(path, image) for path, image in named
             if image != DEFAULT_IMAGE and not image.startswith("registry.example.com/mirror/")}
    assert not wrong, f"expected {DEFAULT_IMAGE}: {sorted(wrong)}"
