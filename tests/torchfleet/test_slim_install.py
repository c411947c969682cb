"""The command line installs without the Pulumi cloud SDKs and torch, and keeps working so (issue 21).

``pip install torchfleet`` gets pyproject's core dependencies only; the Pulumi program's providers are the
``platform`` extra and torch the ``train`` one. A child Python that cannot import them (a meta-path
finder raises ModuleNotFoundError for each, as an install without them does) imports every command
module, prints every command's help and runs the commands a researcher uses without a cluster; a
command that needs an extra says which, in one line. Measured 2026-11-25 on this machine: a fresh
venv with ``pip install /work/main`` (pip's cache warm) is 250 MB, the full ``.[dev]`` venv 6.1 GB.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ABSENT = ("pulumi_aws", "pulumi_gcp", "pulumi_azure_native", "pulumi_kubernetes", "pulumi_policy", "torch",
          "torchvision", "numpy", "torchft", "etcd")
CHILD = textwrap.dedent(f"""
    import importlib.abc, json, sys

    class Absent(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name.split(".")[0] in {ABSENT!r}:
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)

    sys.meta_path.insert(0, Absent())
    sys.path[:] = [p for p in sys.path if not p.endswith("training-image")]
    from torchfleet import cli

    argv = json.loads(sys.argv[1])
    code = cli.main(argv) if argv else [__import__(m) for m in cli.COMMAND_MODULES] and 0
    loaded = sorted({{m.split(".")[0] for m in sys.modules}} & set({ABSENT!r}))
    print(json.dumps({{"loaded": loaded}}), file=sys.stderr)
    sys.exit(code)
""")


def slim(*argv: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CHILD, json.dumps(list(argv))], capture_output=True, text=True,
                          timeout=120, cwd=cwd, env={"PATH": "/usr/bin:/bin", "HOME": str(cwd)})


def test_core_dependencies_leave_out_the_cloud_sdks_and_torch_and_dev_keeps_everything():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    core = {d.split("==")[0] for d in project["dependencies"]}
    assert not core & {"pulumi-aws", "pulumi-gcp", "pulumi-azure-native", "pulumi-kubernetes", "torch", "torchft"}
    extras = project["optional-dependencies"]
    assert {d.split("==")[0] for d in extras["platform"]} == {"pulumi-aws", "pulumi-gcp", "pulumi-azure-native",
                                                              "pulumi-kubernetes"}
    # .ci/setup installs .[dev]: the suite needs the program's SDKs, torch and torchft
    assert {"torchfleet[platform]", "torchfleet[train]", "torchfleet[inplace]"} <= set(extras["dev"])


def test_every_command_module_imports_without_the_extras():
    done = slim()
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stderr.splitlines()[-1]) == {"loaded": []}


def _commands() -> list[str]:
    from torchfleet import cli

    action = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sorted(action.choices)


@pytest.mark.parametrize("command", _commands())
def test_every_commands_help_prints_without_the_extras(command):
    done = slim(command, "--help")
    assert done.returncode == 0 and "usage:" in done.stdout, done.stderr


def test_a_researchers_commands_run_without_the_extras(tmp_path):
    (tmp_path / "store" / "run1" / "output").mkdir(parents=True)
    (tmp_path / "store" / "run1" / "output" / "notes.txt").write_text("hello")
    for argv in (["gpus", "--cloud", "aws"],
                 ["submit", "a", "--gpu", "t4", "--image", "registry.example.com/t:1", "--dry-run", "--", "python",
                  "t.py"],
                 ["sweep", "s", "--stack", "aws-usw2", "--gpu", "t4", "--image", "registry.example.com/t:1", "--param",
                  "lr=0.1,0.01", "--max-cost", "20", "--dry-run", "--", "python", "t.py"],
                 ["checkpoints", "run1", "--shared-dir", str(tmp_path / "store")],
                 ["cp", "run1:output/notes.txt", str(tmp_path / "notes.txt"), "--shared-dir", str(tmp_path / "store")]):
        done = slim(*argv, cwd=tmp_path)
        assert done.returncode == 0, f"{argv}: {done.stderr}"
        assert json.loads(done.stderr.splitlines()[-1]) == {"loaded": []}, argv
    assert (tmp_path / "notes.txt").read_text() == "hello"


def test_a_command_that_needs_an_extra_says_which():
    done = slim("synth", "--stack", "aws-usw2")
    assert done.returncode == 1
    assert "needs torchfleet's `platform` extra (the Pulumi cloud SDKs)" in done.stderr
    assert "pip install 'torchfleet[platform]'" in done.stderr and "unexpected error" not in done.stderr


def test_the_demo_says_it_needs_torch_before_starting_anything():
    """Its nodes run this Python: without torch they died one by one, the cause deep in a node's log."""
    done = slim("demo")
    assert done.returncode in (1, 2)  # 2: find_spec finds no torch (a real slim venv); 1: the import refused here
    assert "needs torchfleet's `train` extra (torch and the trainer's libraries)" in done.stderr
    assert "etcd (v2 API)" not in done.stdout

