"""Issue 32's papercuts on the command line, each as a researcher met it.

- a job file with several typos listed them one per run (docs/jobs.md: "Every problem is listed at once");
- a script without the `--` before it got "unrecognized arguments ...; --help lists the options";
- `checkpoints NAME` with no cluster named no way to read a local run's folder;
- a missing Pulumi CLI (for --stack) exited 1, as a cluster's failure; a missing kubeconfig exits 2.
"""

from __future__ import annotations

import pytest

from torchfleet.cli import main


def _run(argv, capsys) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as exited:
        code = exited.code
    return code, capsys.readouterr().err


def test_every_job_file_typo_at_once(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "job.yaml").write_text("name: j\nstak: local\ncpu: true\nnodez: 2\nimagee: r/t:1\n"
                                       "command: [python, train.py]\n")
    code, err = _run(["submit", "-f", "job.yaml", "--dry-run"], capsys)
    assert code == 2, err
    for typo, meant in (("stak", "stack"), ("nodez", "nodes"), ("imagee", "image")):
        assert f"job.yaml: unknown key '{typo}'; did you mean '{meant}'?" in err, err
    assert err.startswith("torchfleet submit: 3 problems:"), err


@pytest.mark.parametrize(("argv", "hint"), [
    (["run", "--local", "--nodes", "2", "train.py", "--total-steps=3"],
     "the training command goes after --: torchfleet run [options] -- train.py --total-steps=3"),
    (["submit", "j", "--cpu", "python", "train.py", "--lr", "0.1"],
     "the training command goes after --: torchfleet submit [options] -- python train.py --lr 0.1"),
    (["sweep", "s", "--param", "lr=1,2", "train.py"], "the training command goes after --: torchfleet sweep"),
])
def test_a_forgotten_double_dash_says_where_the_script_goes(argv, hint, capsys):
    code, err = _run(argv, capsys)
    assert code == 2 and hint in err, err
    assert "--help` lists the options" not in err


@pytest.mark.parametrize("command", [["checkpoints", "spiral-a"], ["cp", "spiral-a:output/model", "out"]])
def test_no_cluster_points_to_a_local_runs_folder(command, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    monkeypatch.delenv("TORCHFLEET_STACK", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    code, err = _run(command, capsys)
    assert code == 2, err
    assert "no cluster to talk to" in err and "a local run's folder: --local torchfleet-runs/NAME" in err, err


def test_no_cluster_elsewhere_keeps_its_message(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    monkeypatch.delenv("TORCHFLEET_STACK", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    code, err = _run(["list"], capsys)
    assert code == 2 and "no cluster to talk to" in err and "--local" not in err, err
