"""`run --local`, `submit` and `sweep` check the script's Task before anything starts (issue 32).

Before, `run --local` with a Task whose `loss_sum` was spelt `loss` started etcd and two nodes, and after
23 s said "node1 restarted its worker 3 times without a step; the end of its log: | (empty)". The check
is the launcher's own (tests/training_image/test_task_check.py covers what it finds); here each command
refuses the script with exit 2, naming the file and line, and starts, packs or writes nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from torchfleet.cli import main
from torchfleet.task_script import script_in

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = (REPO / "training-image" / "examples" / "train.py").read_text()
SCRIPT_ARGS = ["--total-steps=10", "--global-batch-size=8"]


@pytest.fixture
def misnamed(tmp_path: Path) -> tuple[Path, int]:
    """The template with `loss_sum` spelt `loss`, and that line's number."""
    script = tmp_path / "code" / "train.py"
    script.parent.mkdir()
    script.write_text(TEMPLATE.replace("def loss_sum(self", "def loss(self"))
    line = next(i for i, text in enumerate(script.read_text().splitlines(), 1) if "def loss(self" in text)
    return script, line


def test_run_local_refuses_it_before_any_process_starts(misnamed, tmp_path):
    script, line = misnamed
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHFLEET_")}
    done = subprocess.run([sys.executable, "-m", "torchfleet", "run", "--local", "--name", "bad", "--",
                           str(script), *SCRIPT_ARGS], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2, done.stderr
    assert f"{script}:{line}: Task SpiralClassifier has no method loss_sum" in done.stderr
    assert "rename loss to loss_sum?" in done.stderr
    assert not (tmp_path / "torchfleet-runs").exists()  # no run folder, no etcd, no node


@pytest.mark.parametrize("command", ["submit", "sweep"])
def test_submit_and_sweep_refuse_the_workdirs_script(misnamed, command, capsys):
    script, line = misnamed
    sweep = ["--param", "lr=0.1,0.2"] if command == "sweep" else []
    code = main([command, "j", "--stack", "local", "--cpu", "--image", "r/t:1", "--workdir", str(script.parent),
                 *sweep, "--dry-run", "--", "python", "train.py", *SCRIPT_ARGS])
    out, err = capsys.readouterr()
    assert code == 2, err
    assert f"train.py:{line}: Task SpiralClassifier has no method loss_sum" in err
    assert out == ""  # no manifest printed


def test_submit_does_not_resolve_imports_on_the_laptop(misnamed, capsys):
    """The image has the job's packages: a module missing here is not an error of the job."""
    script, _ = misnamed
    script.write_text(TEMPLATE.replace("import torch\n", "import torch\nimport only_in_the_image\n", 1))
    code = main(["submit", "j", "--stack", "local", "--cpu", "--image", "r/t:1", "--workdir", str(script.parent),
                 "--dry-run", "--", "python", "train.py", *SCRIPT_ARGS])
    assert code == 0, capsys.readouterr().err


@pytest.mark.parametrize(("command", "script"), [
    (["python", "train.py", "--lr=1"], "train.py"),
    (["python3", "-u", "sub/train.py"], "sub/train.py"),
    (["train.py"], "train.py"),
    (["python", "-m", "pkg.train"], None),
    (["bash", "-c", "python train.py"], None),
])
def test_the_script_of_a_jobs_command(command, script):
    assert script_in(command) == script
