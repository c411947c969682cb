"""`run --local --param` sweeps on this machine; sweep parameters are checked against the script's own
flags before anything runs or is submitted (issue 32).

Before, `run --local` had no --param, and `sweep --param image_size=64,128` submitted every job, each of
whose pods failed on argparse's "unrecognized arguments: --image_size=64" (imagenet.py's flag is
--image-size).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.processes import TAG_VARIABLE, assert_none_left, new_tag
from torchfleet.cli import main
from torchfleet.jobs.script_flags import script_options

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "training-image" / "examples"


def _err(argv, capsys) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as exited:
        code = exited.code
    return code, capsys.readouterr().err


def test_a_sweep_of_an_images_example_names_the_flag_it_meant(capsys):
    code, err = _err(["sweep", "s", "--stack", "local", "--cpu", "--param", "image_size=64,128", "--dry-run", "--",
                      "python", "/workspace/examples/imagenet.py", "--total-steps=10"], capsys)
    assert code == 2, err
    assert "--param image_size: /workspace/examples/imagenet.py has no option --image_size; did you mean " \
           "image-size (--image-size)?" in err


def test_a_workdir_script_is_checked_and_a_right_key_passes(tmp_path, capsys):
    (tmp_path / "train.py").write_text((EXAMPLES / "train.py").read_text())
    base = ["sweep", "s", "--stack", "local", "--cpu", "--workdir", str(tmp_path), "--dry-run"]
    code, err = _err([*base, "--param", "lrr=0.1,0.2", "--param", "seeds=1,2", "--", "python", "train.py"], capsys)
    assert code == 2 and "2 problems" in err, err
    assert "did you mean lr (--lr)?" in err and "did you mean seed (--seed)?" in err
    code, err = _err([*base, "--param", "lr=0.1,0.2", "--param", "total-steps=5,10", "--", "python", "train.py"],
                     capsys)
    assert code == 0, err


def test_scripts_whose_flags_cannot_be_read_are_not_checked(tmp_path):
    hydra = tmp_path / "hydra_app.py"
    hydra.write_text("import hydra\n\n@hydra.main(config_path='conf')\ndef main(cfg):\n    pass\n")
    known = tmp_path / "known.py"
    known.write_text("import argparse\np = argparse.ArgumentParser()\np.add_argument('--a')\n"
                     "args, rest = p.parse_known_args()\n")
    computed = tmp_path / "computed.py"
    computed.write_text("import argparse\np = argparse.ArgumentParser()\n"
                        "for n in ['a']:\n    p.add_argument('--' + n)\n")
    assert script_options(hydra) is None and script_options(known) is None and script_options(computed) is None
    assert "--total-steps" in script_options(EXAMPLES / "train.py")  # the trainer's own, via TrainConfig


def test_run_local_refuses_an_unknown_param_before_anything_starts(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, err = _err(["run", "--local", "--param", "learning_rate=0.1,0.2", "--", str(EXAMPLES / "train.py"),
                      "--total-steps=5", "--global-batch-size=8"], capsys)
    assert code == 2 and "--param learning_rate: train.py has no option --learning_rate" in err, err
    assert not (tmp_path / "torchfleet-runs").exists()


@pytest.mark.slow
def test_run_local_sweeps_one_run_per_combination(tmp_path):
    tag = new_tag()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("TORCHFLEET_")}, TAG_VARIABLE: tag}
    done = subprocess.run([sys.executable, "-m", "torchfleet", "run", "--local", "--nodes", "1", "--name", "lrs",
                           "--param", "lr=0.1,0.01", "--", str(EXAMPLES / "train.py"), "--total-steps=10",
                           "--global-batch-size=8"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert_none_left(tag)
    for i, lr in enumerate(("0.1", "0.01")):
        folder = tmp_path / "torchfleet-runs" / f"lrs-{i}"
        record = json.loads((folder / "run.json").read_text())
        assert record["command"][-1] == f"--lr={lr}" and record["exit"] == 0, record
        assert (folder / "output" / "model" / "model.pt").is_file()
        assert re.search(rf"^  lrs-{i}  exit 0  loss [\d.e+-]+  --lr={lr}$", done.stdout, re.M), done.stdout[-2000:]


# Issue 32: `run --local --param lr=abc` ran until the script's argparse refused it in each node, ~22 s,
# exit 1; documented is exit 2 for bad input, before anything starts.
def test_run_local_refuses_a_param_value_the_scripts_argparse_would_refuse(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, err = _err(["run", "--local", "--param", "lr=0.1,abc", "--param", "total-steps=ten", "--",
                      str(EXAMPLES / "train.py"), "--global-batch-size=8"], capsys)
    assert code == 2, err
    assert "--param lr: 'abc' is not a valid float for train.py's --lr (its type=float)" in err
    assert "--param total-steps: 'ten' is not a valid" in err and "train.py's --total-steps" in err
    assert not (tmp_path / "torchfleet-runs").exists()


def test_a_cluster_sweep_refuses_a_bad_value_too(tmp_path, capsys):
    (tmp_path / "train.py").write_text((EXAMPLES / "train.py").read_text())
    code, err = _err(["sweep", "s", "--stack", "local", "--cpu", "--workdir", str(tmp_path), "--dry-run",
                      "--param", "classes=3,4.5", "--", "python", "train.py"], capsys)
    assert code == 2 and "--param classes: '4.5' is not a valid int for train.py's --classes (its type=int)" in err, err


def test_choices_and_flags_are_checked_and_unreadable_types_left_alone(tmp_path):
    from torchfleet.jobs.errors import UsageError
    from torchfleet.jobs.script_flags import check_values

    script = tmp_path / "s.py"
    script.write_text("import argparse\np = argparse.ArgumentParser()\n"
                      "p.add_argument('--opt', choices=['sgd', 'adam'])\n"
                      "p.add_argument('--fast', action='store_true')\np.add_argument('--size', type=parse_size)\n"
                      "p.add_argument('--name')\n")
    check_values([("--opt", ["adam"]), ("--size", ["big"]), ("--name", ["x"])], script, "s.py")
    with pytest.raises(UsageError) as refused:
        check_values([("--opt", ["rmsprop"]), ("--fast", ["1"])], script, "s.py")
    assert "--param opt: 'rmsprop' is not one of s.py's --opt choices: sgd, adam" in str(refused.value)
    assert "--param fast: s.py's --fast is a flag that takes no value (argparse refuses --fast=1)" in str(refused.value)


def test_the_local_sweeps_summary_gives_each_runs_final_loss(tmp_path):
    """Issue 32: the summary listed exit codes only; the loss is the last the run's events reported."""
    from torchfleet import local_folder
    from torchfleet.run_local import sweep_line

    folder = tmp_path / "lrs-0"
    folder.mkdir()
    record = local_folder.Record(folder, name="lrs-0")
    record.node_started(type("N", (), {"name": "node0", "pid": 1})(), 0)
    (folder / "node0.log").write_text("\n".join("@@tf " + json.dumps(e) for e in [
        {"ev": "start", "wall": 1.0, "world": 1}, {"ev": "step", "wall": 2.0, "step": 1, "world": 1, "loss": 0.9},
        {"ev": "step", "wall": 3.0, "step": 2, "world": 1, "loss": 0.123456},
        {"ev": "done", "wall": 4.0, "step": 2, "world": 1}]) + "\n")
    assert sweep_line("lrs-0", ["--lr=0.1"], 0, folder) == "  lrs-0  exit 0  loss 0.1235  --lr=0.1"
    assert sweep_line("lrs-1", ["--lr=1"], 130, tmp_path / "never-made") == "  lrs-1  exit 130  loss -  --lr=1"
