"""The in-place node (replica_node.py) and how the launcher hands over to it (issue 14): no torchrun, one
worker, restarted only when it fails; the options it cannot honour are refused naming them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from elastic_trainer import launcher
from elastic_trainer.inplace import ENV_RECOVERY, recovery_mode, replica_node


@pytest.mark.parametrize(
    ("options", "environ", "message"),
    [
        (["--nproc_per_node=2"], {}, "--nproc_per_node=2: the in-place mode runs one worker per node"),
        (["--nproc_per_node", "4"], {}, "--nproc_per_node=4"),
        ([], {"PET_NPROC_PER_NODE": "8"}, "--nproc_per_node=8"),
        (["--max_restarts=-1"], {}, "--max_restarts=-1: must be a whole number >= 0"),
        (["--max_restarts=many"], {}, "--max_restarts=many"),
    ],
)
def test_options_an_inplace_node_cannot_honour_are_refused(options, environ, message):
    with pytest.raises(replica_node.NodeError, match=message):
        replica_node.node_settings(options, environ)


@pytest.mark.parametrize(
    ("options", "environ", "restarts"),
    [([], {}, 100), (["--nproc_per_node=1", "--max_restarts=5"], {}, 5), ([], {"PET_MAX_RESTARTS": "7"}, 7)],
)
def test_max_restarts(options, environ, restarts):
    assert replica_node.node_settings(options, environ) == restarts


def test_the_launcher_refuses_an_unknown_recovery_mode(monkeypatch, capsys):
    monkeypatch.setenv(ENV_RECOVERY, "sometimes")
    assert launcher.main(["--nproc_per_node=1", "train.py"]) == 2
    assert "TORCHFLEET_RECOVERY='sometimes': must be restart or inplace" in capsys.readouterr().err


def test_the_launcher_refuses_several_workers_per_inplace_node(monkeypatch, capsys):
    monkeypatch.setenv(ENV_RECOVERY, "inplace")
    assert launcher.main(["--nproc_per_node=2", "train.py"]) == 2
    assert "--nproc_per_node=2" in capsys.readouterr().err


@pytest.mark.parametrize(("value", "mode"), [(None, "restart"), ("", "restart"), ("inplace", "inplace")])
def test_recovery_mode(value, mode):
    assert recovery_mode({} if value is None else {ENV_RECOVERY: value}) == mode


def test_recovery_mode_names_the_variable():
    with pytest.raises(ValueError, match="TORCHFLEET_RECOVERY='fast': must be one of restart, inplace"):
        recovery_mode({ENV_RECOVERY: "fast"})


def counting_script(tmp_path, codes: list[int]) -> list[str]:
    """A worker that exits with codes[n] on its n-th start (counted in a file)."""
    counter = tmp_path / "starts"
    script = tmp_path / "worker.py"
    script.write_text(
        "import pathlib, sys\n"
        f"p = pathlib.Path({str(counter)!r})\n"
        "n = int(p.read_text()) if p.exists() else 0\n"
        "p.write_text(str(n + 1))\n"
        f"sys.exit({codes!r}[n])\n"
    )
    return [str(script)]


@pytest.mark.parametrize(
    ("codes", "max_restarts", "result", "starts"),
    [
        ([75, 1, 0], 100, 0, 3),  # lost its quorum, crashed, then finished: started again each time
        ([2], 100, 2, 1),  # bad input: starting again would only fail again
        ([143], 100, 143, 1),  # its own spot notice: the controller retries the pod
        ([75, 75, 75], 2, 1, 3),  # restarts used up
    ],
)
def test_the_worker_is_started_again_only_when_it_failed(tmp_path, monkeypatch, codes, max_restarts, result, starts):
    monkeypatch.setattr(replica_node, "RESTART_PAUSE_S", 0.0)
    assert replica_node.run_node(counting_script(tmp_path, codes), max_restarts) == result
    assert int((tmp_path / "starts").read_text()) == starts


def test_sigterm_reaches_the_worker_and_its_code_is_the_nodes(tmp_path):
    script = tmp_path / "worker.py"
    ready = tmp_path / "ready"
    script.write_text(
        "import pathlib, signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))\n"
        f"pathlib.Path({str(ready)!r}).touch()\n"
        "time.sleep(60)\n"
    )
    node = subprocess.Popen(
        [sys.executable, "-c", "import sys; from elastic_trainer.inplace import replica_node; "
         f"sys.exit(replica_node.main([], [{str(script)!r}]))"],
        env={"PYTHONPATH": str(Path(launcher.__file__).parent.parent)}, stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    node.send_signal(signal.SIGTERM)
    assert node.wait(30) == 143


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"TORCHFLEET_REPLICA_GROUPS": "3", "TORCHFT_LIGHTHOUSE": "http://lh:29510"},
         "TORCHFLEET_REPLICA_GROUP is not set"),
        ({"TORCHFLEET_REPLICA_GROUP": "3", "TORCHFLEET_REPLICA_GROUPS": "3", "TORCHFT_LIGHTHOUSE": "http://lh:29510"},
         "TORCHFLEET_REPLICA_GROUP=3 must be below TORCHFLEET_REPLICA_GROUPS=3"),
        ({"TORCHFLEET_REPLICA_GROUP": "one", "TORCHFLEET_REPLICA_GROUPS": "3"},
         "TORCHFLEET_REPLICA_GROUP='one': must be a whole number >= 0"),
        ({"JOB_COMPLETION_INDEX": "-1", "TORCHFLEET_REPLICA_GROUPS": "3"}, "JOB_COMPLETION_INDEX='-1'"),
        ({"TORCHFLEET_REPLICA_GROUP": "0", "TORCHFLEET_REPLICA_GROUPS": "0"}, "TORCHFLEET_REPLICA_GROUPS='0'"),
        ({"TORCHFLEET_REPLICA_GROUP": "0", "TORCHFLEET_REPLICA_GROUPS": "2"}, "TORCHFT_LIGHTHOUSE is not set"),
        ({"TORCHFLEET_REPLICA_GROUP": "0", "TORCHFLEET_REPLICA_GROUPS": "3", "TORCHFT_LIGHTHOUSE": "http://lh:1"},
         "--global-batch-size=2 is smaller than TORCHFLEET_REPLICA_GROUPS=3"),
        ({"TORCHFLEET_REPLICA_GROUP": "0", "TORCHFLEET_REPLICA_GROUPS": "2", "TORCHFT_LIGHTHOUSE": "http://lh:1",
          "TORCHFLEET_INPLACE_QUORUM_TIMEOUT_S": "0"}, "TORCHFLEET_INPLACE_QUORUM_TIMEOUT_S='0': must be a positive"),
        ({"TORCHFLEET_REPLICA_GROUP": "0", "TORCHFLEET_REPLICA_GROUPS": "2", "TORCHFT_LIGHTHOUSE": "http://lh:1",
          "TORCHFLEET_INPLACE_TIMEOUT_S": "soon"}, "TORCHFLEET_INPLACE_TIMEOUT_S='soon'"),
        ({"TORCHFLEET_REPLICA_GROUP": "0", "TORCHFLEET_REPLICA_GROUPS": "2", "TORCHFT_LIGHTHOUSE": "http://lh:1",
          "TORCHFLEET_INPLACE_FINAL_WAIT_S": "-5"}, "TORCHFLEET_INPLACE_FINAL_WAIT_S='-5': must be a positive"),
    ],
)
def test_inplace_settings_are_refused_naming_the_variable_and_end_the_node(tmp_path, monkeypatch, caplog, environ,
                                                                            message):
    from elastic_trainer.inplace import group, settings
    from elastic_trainer.signals import StopRequest
    from elastic_trainer.trainer import TrainConfig

    for name in ("TORCHFLEET_REPLICA_GROUP", "TORCHFLEET_REPLICA_GROUPS", "JOB_COMPLETION_INDEX", "TORCHFT_LIGHTHOUSE",
                 "TORCHFLEET_INPLACE_TIMEOUT_S", "TORCHFLEET_INPLACE_QUORUM_TIMEOUT_S",
                 "TORCHFLEET_INPLACE_FINAL_WAIT_S"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    cfg = TrainConfig(checkpoint_dir=tmp_path, total_steps=1, global_batch_size=2)
    with pytest.raises(ValueError, match=message):
        group._InplaceRun(None, cfg, None)
    # not installed: the test process keeps its own signal handlers
    assert group.train_inplace(None, cfg, StopRequest()) == settings.EXIT_BAD_SETTINGS  # the node ends, no restart
    assert settings.EXIT_BAD_SETTINGS in replica_node.FINAL_CODES


def test_an_indexed_jobs_completion_index_is_the_group(monkeypatch, tmp_path):
    from elastic_trainer.inplace import settings

    monkeypatch.delenv("TORCHFLEET_REPLICA_GROUP", raising=False)
    monkeypatch.setenv("JOB_COMPLETION_INDEX", "2")
    assert settings.group_index() == 2
    monkeypatch.setenv("TORCHFLEET_REPLICA_GROUP", "1")  # an explicit one wins
    assert settings.group_index() == 1


def test_a_spare_completion_index_is_a_group_of_its_own_on_the_slice_index_mod_groups(monkeypatch, tmp_path):
    # Regression: the in-place Job's spare indexes (completions > MAX, inplace_job.py) were refused with a
    # ValueError (exit 2: the Job failed at once) the moment one started.
    from types import SimpleNamespace

    from elastic_trainer.data.sampler import ElasticBatchSampler
    from elastic_trainer.inplace import group
    from elastic_trainer.trainer import TrainConfig

    monkeypatch.delenv("TORCHFLEET_REPLICA_GROUP", raising=False)
    for name, value in {"JOB_COMPLETION_INDEX": "3", "TORCHFLEET_REPLICA_GROUPS": "2",
                        "TORCHFT_LIGHTHOUSE": "http://lh:1"}.items():
        monkeypatch.setenv(name, value)
    cfg = TrainConfig(checkpoint_dir=tmp_path, total_steps=4, global_batch_size=8)
    run = group._InplaceRun(SimpleNamespace(dataset=range(64)), cfg, None)
    assert (run.group, run.slice) == (3, 1)  # replica id group3, the slice of group 1
    group1 = ElasticBatchSampler(64, 8, 1, 2, cfg.seed, total_steps=4)
    assert [run.sampler.batch(s) for s in range(4)] == [group1.batch(s) for s in range(4)]


@pytest.mark.parametrize(
    ("options", "script", "expected"),
    [
        (["--nproc_per_node=1"], ["train.py", "--lr", "0.1"], [sys.executable, "-u", "train.py", "--lr", "0.1"]),
        # `torchfleet submit -- python -m team.train` arrives as torchrun's --module
        (["--nproc_per_node=1", "--module"], ["team.train", "--lr", "0.1"],
         [sys.executable, "-u", "-m", "team.train", "--lr", "0.1"]),
        (["-m"], ["team.train"], [sys.executable, "-u", "-m", "team.train"]),
        # any other program (`-- ./train.sh`) arrives as --no-python: run as it is
        (["--no-python"], ["./train.sh", "x"], ["./train.sh", "x"]),
        (["--no_python"], ["./train.sh"], ["./train.sh"]),
    ],
)
def test_the_worker_starts_as_torchrun_would_start_it(options, script, expected):
    """Regression: the in-place node ran `python -u team.train` for a --module command, which fails."""
    assert replica_node.worker_command(script, options) == expected


def test_a_module_command_runs_through_the_launcher(tmp_path):
    """`python -m pkg.mod` through the real launcher in in-place mode: the module runs and its code is the node's."""
    package = tmp_path / "team"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "train.py").write_text("import sys; print('module ran', sys.argv[1:]); sys.exit(0)\n")
    env = {**os.environ, "TORCHFLEET_RECOVERY": "inplace",
           "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    done = subprocess.run([sys.executable, "-m", "elastic_trainer.launcher", "--nproc_per_node=1", "--module",
                           "team.train", "--lr", "0.1"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "module ran ['--lr', '0.1']" in done.stdout
