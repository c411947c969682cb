"""`run --local` creates ./torchfleet-runs with a .gitignore of `*` (issue 32, a second fresh walk: the
folder had none, so `git add -A` in the researcher's project committed every local run, its logs and
checkpoints). Checked with git itself."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from torchfleet import run_local

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _git(cwd, *argv: str) -> str:
    return subprocess.run(["git", *argv], cwd=cwd, check=True, capture_output=True, text=True).stdout


def test_a_new_runs_folder_is_ignored_by_git(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _git(tmp_path, "init", "-q")
    run = run_local.runs_folder() / "my-run"
    run.mkdir()
    (run / "node1.log").write_text("@@tf {}\n")
    (tmp_path / "train.py").write_text("print()\n")
    _git(tmp_path, "add", "-A")
    assert _git(tmp_path, "diff", "--cached", "--name-only").split() == ["train.py"]


def test_a_runs_folder_that_exists_is_left_as_it_is(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "torchfleet-runs").mkdir()
    assert run_local.runs_folder().resolve() == tmp_path / "torchfleet-runs"
    assert not (tmp_path / "torchfleet-runs" / ".gitignore").exists()  # its owner chose; not rewritten
