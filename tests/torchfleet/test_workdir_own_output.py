"""``--workdir`` leaves Torchfleet's own output out and says what it packed (issue 32).

A researcher's first `submit --workdir .` after a `run --local` in the same folder packed
./torchfleet-runs/ (checkpoints: over the 16 MiB limit at once) and the YAML a dry run had been saved
to, and said "N files, M bytes" and no more. Real folders, a real dry run's output, the real packer.
"""

from __future__ import annotations

import io
import os
import tarfile

import pytest

from torchfleet.cli import main
from torchfleet.jobs.workdir_pack import pack

CMD = ["--", "python", "train.py", "--total-steps=10"]


def _names(packed) -> set[str]:
    with tarfile.open(fileobj=io.BytesIO(packed.data), mode="r:gz") as tar:
        return {m.name for m in tar.getmembers()}


@pytest.fixture
def folder(tmp_path, capsys, monkeypatch):
    """Code, a local run's folder (a 20 MiB checkpoint, sparse), a saved dry run, a Hydra config."""
    monkeypatch.setenv("HOME", str(tmp_path))  # no global excludes file of this machine's user
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    root = tmp_path / "project"
    root.mkdir()
    (root / "train.py").write_text("print('train')\n" * 100)
    (root / "model.py").write_text("NET = 1\n")
    (root / "conf").mkdir()
    (root / "conf" / "config.yaml").write_text("lr: 0.1\nmanaged_by: torchfleet\n")  # a config, not a manifest
    (root / ".gitignore").write_text("*.log\n")
    (root / "debug.log").write_text("ignored")
    checkpoint = root / "torchfleet-runs" / "local-1" / "checkpoints" / "step_20.pt"
    checkpoint.parent.mkdir(parents=True)
    with checkpoint.open("wb") as f:
        f.truncate(20 << 20)
    (root / "torchfleet-runs" / "local-1" / "run.json").write_text("{}")
    assert main(["submit", "j", "--stack", "local", "--cpu", "--dry-run", *CMD]) == 0
    (root / "job.yaml").write_text(capsys.readouterr().out)  # what `--dry-run > job.yaml` saves
    return root


def test_own_output_and_ignored_files_are_left_out_and_said(folder):
    packed = pack(folder)
    assert _names(packed) == {"train.py", "model.py", "conf/config.yaml", ".gitignore"}
    notes = "\n".join(packed.notes)
    assert "left out Torchfleet's own output, torchfleet-runs/ (2 files)" in notes
    assert "left out Torchfleet's own output, dry-run manifests (job.yaml)" in notes


def test_the_submit_says_what_it_packed(folder, capsys, monkeypatch):
    monkeypatch.chdir(folder)
    assert main(["submit", "j", "--stack", "local", "--cpu", "--workdir", ".", "--dry-run", *CMD]) == 0
    err = capsys.readouterr().err
    size = sum(os.path.getsize(folder / p) for p in ("train.py", "model.py", "conf/config.yaml", ".gitignore"))
    assert f"--workdir: 4 files, {size / 1024:.1f} KiB; the biggest: train.py (1.5 KiB), " in err, err
    assert "torchfleet-runs/ (2 files)" in err


def test_in_a_git_work_tree_too(folder):
    import subprocess

    env = {"PATH": os.environ["PATH"], "HOME": str(folder)}
    subprocess.run(["git", "init", "-q"], cwd=folder, check=True, env=env)
    subprocess.run(["git", "add", "-A"], cwd=folder, check=True, env=env)  # even tracked, they stay out
    assert _names(pack(folder)) == {"train.py", "model.py", "conf/config.yaml", ".gitignore"}
