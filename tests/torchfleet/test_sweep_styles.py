"""Sweeps in both argument styles (issue 22, item 1).

Regression: ``torchfleet sweep ... --param optimizer.lr=0.1,0.01`` appended ``lr=0.1``-style (Hydra)
arguments only, which the project's own template (``TrainConfig.add_arguments``, argparse) refuses:
every job of the sweep crash-looped, and ``--param --lr=...`` / ``params: {--lr: [...]}`` were refused.
Now ``--param-style argparse`` (the default) appends ``--lr=0.1`` and ``hydra`` appends ``lr=0.1``.
The last test runs a sweep of the template: each rendered pod's command, as the kubelet would run
it, through the real launcher against a real etcd.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
import torch
import yaml
from elastic_trainer.local import IMAGE_DIR, Etcd, etcd_binary
from elastic_trainer.store.checkpoint import CheckpointStore

from torchfleet.cli import main
from torchfleet.jobs.mounts import DEFAULT_MOUNT

IMAGE = "registry.example.com/team/train:1.4.2"
CPU = ["--stack", "local", "--cpu", "--image", IMAGE]


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    """No cluster, no Pulumi, no user config, a folder of its own."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "no-config"))
    for var in ("TORCHFLEET_STACK", "TORCHFLEET_IMAGE", "TORCHFLEET_NAMESPACE", "TORCHFLEET_CONTEXT"):
        monkeypatch.delenv(var, raising=False)
    with mock.patch("torchfleet.jobs.kubeconfig.connect", side_effect=AssertionError("connected")), \
         mock.patch("torchfleet.jobs.target.read_stack_outputs", side_effect=AssertionError("pulumi")):
        yield


def sweep(capsys, *argv: str, command=("python", "train.py")) -> tuple[int, list[dict], str]:
    code = main(["sweep", "s", *CPU, *argv, "--dry-run", "--", *command])
    out, err = capsys.readouterr()
    jobs = [d for d in yaml.safe_load_all(out) if d and d["kind"] == "Job"] if code == 0 else []
    return code, jobs, err


def appended(job: dict, script: str = "train.py") -> list[str]:
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    return args[args.index(script) + 1:]


@pytest.mark.parametrize("given", [
    ["--param", "lr=0.1,0.01"],
    ["--param", "--lr=0.1,0.01"],  # the value after --param starts with '-': argparse alone refused it
    ["--param=--lr=0.1,0.01"],
    ["--param", "--lr=0.1,0.01", "--param-style", "argparse"],
])
def test_argparse_style_appends_options(capsys, given):
    code, jobs, err = sweep(capsys, *given)
    assert code == 0, err
    assert [appended(j) for j in jobs] == [["--lr=0.1"], ["--lr=0.01"]]
    assert "s-0: --lr=0.1\n" in err


def test_a_negative_value_stays_the_option_s_value(capsys):
    code, jobs, err = sweep(capsys, "--param", "--shift=-1,1")
    assert code == 0, err
    assert [appended(j) for j in jobs] == [["--shift=-1"], ["--shift=1"]]


def test_hydra_style_appends_overrides(capsys):
    code, jobs, err = sweep(capsys, "--param-style", "hydra", "--param", "optimizer.lr=0.1,0.01",
                            "--param", "+model.depth=18")
    assert code == 0, err
    assert [appended(j) for j in jobs] == [["optimizer.lr=0.1", "+model.depth=18"],
                                           ["optimizer.lr=0.01", "+model.depth=18"]]


@pytest.mark.parametrize(("given", "expected"), [
    (["--param-style", "yaml", "--param", "lr=1"], "argument --param-style: invalid choice: 'yaml'"),
    (["--param-style", "hydra", "--param", "--lr=1,2"],
     "--param --lr: a Hydra override has no dashes (e.g. lr=0.1,0.01); for a script whose options are --flags "
     "(argparse, TrainConfig.add_arguments) use --param-style argparse"),
    (["--param", "+model.depth=18,50"], "--param +model.depth: '+' and '~' are Hydra's override syntax"),
    (["--param", "lr=1", "--param", "--lr=2"], "--param --lr: given twice"),
    (["--param", "-l=1,2"], "--param: expected KEY=V1,V2,... with KEY the script's option"),
])
def test_a_bad_style_or_key_exits_2_naming_it(capsys, given, expected):
    try:
        code = main(["sweep", "s", *CPU, *given, "--dry-run", "--", "python", "train.py"])
    except SystemExit as exited:  # argparse's own errors (a choice)
        code = exited.code
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert expected in err, err


def job_file(tmp_path, text: str) -> str:
    path = tmp_path / "sweep.yaml"
    path.write_text(f"name: s\nstack: local\ncpu: true\nimage: {IMAGE}\ncommand: [python, train.py]\n{text}")
    return str(path)


def test_a_job_file_sweeps_options_and_says_its_style(tmp_path, capsys):
    code = main(["sweep", "-f", job_file(tmp_path, "params: {--lr: [0.1, 0.01]}\n"), "--dry-run"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert [appended(d) for d in yaml.safe_load_all(out) if d["kind"] == "Job"] == [["--lr=0.1"], ["--lr=0.01"]]
    code = main(["sweep", "-f", job_file(tmp_path, "param-style: hydra\nparams: {optimizer.lr: [0.1]}\n"),
                 "--dry-run"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert [appended(d) for d in yaml.safe_load_all(out) if d["kind"] == "Job"] == [["optimizer.lr=0.1"]]


@pytest.mark.parametrize(("text", "expected"), [
    ("param-style: yaml\nparams: {lr: [1]}\n", "sweep.yaml: param-style: one of argparse, hydra, got 'yaml'"),
    ("paramStyle: hydra\nparams: {lr: [1]}\n", "sweep.yaml: unknown key 'paramStyle'; did you mean 'param-style'?"),
    ("param-style: hydra\nparams: {--lr: [1]}\n", "sweep.yaml: params --lr: a Hydra override has no dashes"),
])
def test_a_bad_job_file_style_exits_2_naming_the_key(tmp_path, capsys, text, expected):
    code = main(["sweep", "-f", job_file(tmp_path, text), "--dry-run"])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert expected in err, err


def test_only_a_sweep_takes_a_style(tmp_path, capsys):
    code = main(["submit", "-f", job_file(tmp_path, "param-style: hydra\n"), "--dry-run"])
    assert code == 2 and "param-style: only a sweep takes param-style" in capsys.readouterr().err


def _run_pod(job: dict, etcd: Etcd, store: Path, log: Path) -> subprocess.Popen:
    """The job's pod 0 as the kubelet would run it, with the local etcd and store."""
    (worker,) = job["spec"]["template"]["spec"]["containers"]
    args = [a.replace("$(POD_IP)", "127.0.0.1") for a in worker["args"]]
    args = [f"--rdzv_endpoint={etcd.endpoint}" if a.startswith("--rdzv_endpoint=") else a for a in args]
    env = {e["name"]: e["value"].replace(DEFAULT_MOUNT, str(store)) for e in worker["env"] if "value" in e}
    env.update(JOB_COMPLETION_INDEX="0", GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1", PYTHONPATH=str(IMAGE_DIR))
    return subprocess.Popen([sys.executable, *worker["command"][1:], *args], cwd=IMAGE_DIR,
                            env={**os.environ, **env}, stdout=log.open("w"), stderr=subprocess.STDOUT)


@pytest.mark.slow
def test_a_sweep_of_the_template_trains_each_value(tmp_path, capsys):
    if etcd_binary() is None:
        pytest.fail("etcd is not installed (apt-get install etcd-server), or $TORCHFLEET_ETCD_BINARY is not executable")
    script = "examples/train.py"  # the template (training-image/examples/train.py), as the image's workdir has it
    code, jobs, err = sweep(capsys, "--param", "--lr=0.1,0.01", "--param", "seed=3",
                            command=("python", script, "--total-steps=3", "--global-batch-size=16"))
    assert code == 0, err
    store = tmp_path / "store"
    with Etcd() as etcd:
        logs = {j["metadata"]["name"]: tmp_path / f"{j['metadata']['name']}.log" for j in jobs}
        pods = [(j["metadata"]["name"], _run_pod(j, etcd, store, logs[j["metadata"]["name"]])) for j in jobs]
        codes = {name: pod.wait(300) for name, pod in pods}
    assert codes == {"s-0": 0, "s-1": 0}, {name: logs[name].read_text()[-3000:] for name in logs}
    for name, lr in (("s-0", 0.1), ("s-1", 0.01)):
        state, meta, _ = CheckpointStore(store / name / "checkpoints").load_latest()
        assert meta["reason"] == "final" and state["step"] == 3
        assert state["sampler"]["seed"] == 3
        # the swept value reached the script: its optimizer started from it (AdamW's initial_lr)
        assert state["optimizer"]["param_groups"][0]["initial_lr"] == pytest.approx(lr)
        assert isinstance(state["model"], dict) and all(torch.isfinite(t).all() for t in state["model"].values())
