"""Wording of the CLI's notes, as a process prints them (issue 22: "sizing for g4dn.xlarge (a aws t4 machine ...)")."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


@pytest.mark.parametrize(("cloud", "gpu"), [("aws", "t4"), ("azure", "t4"), ("gcp", "l4")])
def test_the_sizing_note_names_the_cloud_without_a_wrong_article(tmp_path, cloud, gpu):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHFLEET_")}
    ran = subprocess.run([sys.executable, "-m", "torchfleet", "submit", "j", "--gpu", gpu, "--cloud", cloud, "--image",
                          "registry.example.com/team/train:1.4.2", "--dry-run", "--", "python", "train.py"],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path,
                         env={**env, "XDG_CONFIG_HOME": str(tmp_path / "no-config")})
    assert ran.returncode == 0, ran.stderr
    note = next(line for line in ran.stderr.splitlines() if line.startswith("note: no --stack"))
    assert f"(the {gpu} machine on {cloud}, 1 GPU(s))" in note, note
    assert f"a {cloud} " not in note
