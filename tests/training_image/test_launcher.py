"""The launcher's argument handling (pure) and its signal contract (a real torchrun)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
from elastic_trainer import launcher
from elastic_trainer.launcher import LaunchError, build_plan, check_rdzv_conf, parse_rdzv_conf
from elastic_trainer.localrun import IMAGE_DIR

# What the ElasticJob controller prepends to the container args (DESIGN.md).
CONTROLLER = ["--rdzv_backend=etcd", "--rdzv_endpoint=etcd:2379", "--rdzv_id=job", "--nnodes=1:4"]
SCRIPT = ["/workspace/examples/imagenet.py", "--arch", "resnet18", "--rdzv_backend=ignored-script-arg"]


def opt(plan, name: str) -> list[str]:
    """Values of ``--name=...`` among the torchrun options (before the script)."""
    options = plan.torchrun_args[: plan.torchrun_args.index(SCRIPT[0])]
    return [a.split("=", 1)[1] for a in options if a.startswith(f"--{name}=")]


def test_defaults_wrap_the_controller_args():
    plan = build_plan([*CONTROLLER, "--nproc_per_node=8", *SCRIPT], {})
    assert opt(plan, "rdzv_backend") == ["etcd-v2"]  # legacy etcd loses its keys after 2 h
    assert opt(plan, "rdzv_conf") == ["last_call_timeout=1,keep_alive_interval=1,keep_alive_max_attempt=3"]
    assert opt(plan, "max_restarts") == ["100"]
    assert plan.torchrun_args[-len(SCRIPT) :] == SCRIPT  # script args untouched
    assert plan.env == {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1", "TORCHFLEET_PG_TIMEOUT_S": "300"}


@pytest.mark.parametrize(
    ("extra", "environ", "backend"),
    [
        (["--rdzv_backend=c10d"], {}, "c10d"),  # a later backend in the args wins
        (["--rdzv-backend", "etcd-v2"], {}, "etcd-v2"),
        ([], {"TORCHFLEET_ALLOW_LEGACY_ETCD": "1"}, "etcd"),
    ],
)
def test_backend_overrides(extra, environ, backend):
    plan = build_plan([*CONTROLLER, *extra, *SCRIPT], environ)
    assert opt(plan, "rdzv_backend") == [backend]


def test_user_values_win_over_defaults():
    plan = build_plan(
        [*CONTROLLER, "--max_restarts=7", "--rdzv_conf=join_timeout=900,last_call_timeout=5",
         "--rdzv-conf", "keep_alive_interval=2,keep_alive_max_attempt=2", *SCRIPT],
        {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "0", "TORCHFLEET_PG_TIMEOUT_S": "120"},
    )
    # torchrun's argparse keeps the last occurrence: the user's comes after the default
    options = plan.torchrun_args[: plan.torchrun_args.index(SCRIPT[0])]
    assert [a for a in options if a.startswith("--max_restarts")][-1] == "--max_restarts=7"
    assert plan.rdzv_conf == {
        "last_call_timeout": "5", "keep_alive_interval": "2", "keep_alive_max_attempt": "2", "join_timeout": "900",
    }
    assert plan.env == {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "0", "TORCHFLEET_PG_TIMEOUT_S": "120"}
    from torch.distributed.run import parse_args

    parsed = parse_args(plan.torchrun_args)
    assert parsed.max_restarts == 7
    assert parsed.rdzv_backend == "etcd-v2"
    assert parsed.training_script_args == SCRIPT[1:]


# What Kubeflow's training operator sets from a PyTorchJob's elasticPolicy: torchrun reads PET_*
# only as the defaults of its options, so the launcher's own options used to override them.
KUBEFLOW_ENV = {"PET_RDZV_BACKEND": "c10d", "PET_MAX_RESTARTS": "3",
                "PET_RDZV_CONF": "join_timeout=900,keep_alive_interval=2,keep_alive_max_attempt=2"}


def test_kubeflow_pet_settings_replace_the_defaults():
    # Regression (review): elasticPolicy's rdzvBackend, rdzvConf and maxRestarts were ignored.
    plan = build_plan(["--nproc_per_node=1", *SCRIPT], KUBEFLOW_ENV)
    assert opt(plan, "rdzv_backend") == ["c10d"]
    assert opt(plan, "max_restarts") == ["3"]
    assert plan.rdzv_conf == {"last_call_timeout": "1", "keep_alive_interval": "2",
                              "keep_alive_max_attempt": "2", "join_timeout": "900"}


def test_explicit_options_win_over_kubeflow_pet_settings():
    plan = build_plan(["--rdzv_backend=etcd-v2", "--max_restarts=7", "--rdzv_conf=join_timeout=60,last_call_timeout=2",
                       *SCRIPT], KUBEFLOW_ENV)
    from torch.distributed.run import parse_args

    parsed = parse_args(plan.torchrun_args)
    assert (parsed.rdzv_backend, parsed.max_restarts) == ("etcd-v2", 7)
    assert plan.rdzv_conf == {"last_call_timeout": "2", "keep_alive_interval": "2",
                              "keep_alive_max_attempt": "2", "join_timeout": "60"}


@pytest.mark.parametrize(
    ("environ", "backend"),
    [
        ({"PET_RDZV_BACKEND": "etcd"}, "etcd-v2"),  # legacy etcd loses its keys after 2 h, as for ElasticJob
        ({"PET_RDZV_BACKEND": "etcd", "TORCHFLEET_ALLOW_LEGACY_ETCD": "1"}, "etcd"),
        ({"PET_RDZV_BACKEND": "etcd-v2"}, "etcd-v2"),
    ],
)
def test_kubeflow_backend(environ, backend):
    assert opt(build_plan(SCRIPT, environ), "rdzv_backend") == [backend]


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"PET_RDZV_CONF": "keep_alive_interval=1,keep_alive_max_attempt=2"}, "keep_alive_max_attempt"),
        ({"PET_RDZV_CONF": "join_timeout"}, "PET_RDZV_CONF: expected key=value"),
    ],
)
def test_unsafe_kubeflow_settings_are_refused(environ, message):
    with pytest.raises(LaunchError, match=message):
        build_plan(SCRIPT, environ)


@pytest.mark.parametrize(
    ("conf", "ok"),
    [
        ({"keep_alive_interval": "1", "keep_alive_max_attempt": "3"}, True),  # 3 s >= 1 + 1 + 1
        ({"keep_alive_interval": "2", "keep_alive_max_attempt": "2"}, True),  # 4 s >= 2 + 1 + 1
        ({}, True),  # torch's 5 x 3
        ({"keep_alive_interval": "1", "keep_alive_max_attempt": "2"}, False),  # split one job in two
        ({"keep_alive_interval": "1", "keep_alive_max_attempt": "1"}, False),  # never forms a group
        ({"keep_alive_interval": "3", "keep_alive_max_attempt": "1"}, False),
    ],
)
def test_heartbeat_budget_is_checked(conf, ok):
    if ok:
        check_rdzv_conf(conf)
    else:
        with pytest.raises(LaunchError, match=r"keep_alive_interval=\d+ x keep_alive_max_attempt=\d+"):
            check_rdzv_conf(conf)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--rdzv_conf=keep_alive_max_attempt=2"], "keep_alive_max_attempt"),  # with the tuned interval of 1 s
        (["--rdzv_conf=last_call_timeout=0.5"], "last_call_timeout"),
        (["--rdzv_conf=last_call_timeout"], "key=value"),
    ],
)
def test_bad_settings_are_refused_naming_the_option(argv, message, capsys):
    with pytest.raises(LaunchError, match=message):
        build_plan([*CONTROLLER, *argv, *SCRIPT], {})
    assert launcher.main([*CONTROLLER, *argv, *SCRIPT]) == 2
    assert message in capsys.readouterr().err


def test_bad_pg_timeout_is_refused():
    with pytest.raises(LaunchError, match="TORCHFLEET_PG_TIMEOUT_S"):
        build_plan([*CONTROLLER, *SCRIPT], {"TORCHFLEET_PG_TIMEOUT_S": "soon"})


def test_parse_rdzv_conf():
    assert parse_rdzv_conf(" a=1, b = 2 ,") == {"a": "1", "b": "2"}


def test_dry_run_prints_the_plan(monkeypatch, capsys):
    monkeypatch.setenv("TORCHFLEET_DRY_RUN", "1")
    assert launcher.main([*CONTROLLER, *SCRIPT]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert "--rdzv_backend=etcd-v2" in printed["torchrun"]
    assert printed["env"]["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1"


SLEEPER = "import time, sys\nprint('ready', flush=True)\ntime.sleep(120)\n"


def _start_and_sigterm(cmd: list[str], tmp_path) -> int:
    script = tmp_path / "sleeper.py"
    script.write_text(SLEEPER)
    env = {"PYTHONPATH": str(IMAGE_DIR), "PATH": "/usr/bin:/bin"}
    proc = subprocess.Popen([*cmd, "--standalone", "--nproc_per_node=1", str(script)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while proc.stdout.readline().strip() != "ready":
            assert time.monotonic() < deadline and proc.poll() is None, "worker never started"
        proc.send_signal(signal.SIGTERM)
        return proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.slow
def test_sigterm_ends_in_143_where_torchrun_alone_exits_1(tmp_path):
    # Pins DESIGN.md's fact: torchrun exits 1 on SIGTERM (fatal for both controllers).
    assert _start_and_sigterm([sys.executable, "-m", "torch.distributed.run"], tmp_path) == 1
    assert _start_and_sigterm([sys.executable, "-m", "elastic_trainer.launcher"], tmp_path) == 143


@pytest.mark.parametrize(
    ("extra", "environ", "preload"),
    [
        ([], {}, True),  # workers forked from a forkserver that imported torch during the rendezvous
        (["--start_method=spawn"], {}, False),  # the user's choice of how workers start is kept
        (["--no-python"], {}, False),
        ([], {"TORCHFLEET_PRELOAD": "0"}, False),
    ],
)
def test_preloaded_workers(extra, environ, preload):
    plan = build_plan([*CONTROLLER, *extra, *SCRIPT], environ)
    assert plan.preload is preload
    assert ("--start_method=forkserver" in plan.torchrun_args) is preload
    assert ("--run_path" in plan.torchrun_args) is preload


def test_imagenet_example_imports_torchvision_only_when_it_runs(tmp_path):
    script = IMAGE_DIR / "examples" / "imagenet.py"
    env = {"PYTHONPATH": str(IMAGE_DIR), "PATH": "/usr/bin:/bin"}
    shown = subprocess.run([sys.executable, str(script), "--help"], env=env, capture_output=True, text=True)
    assert shown.returncode == 0 and "--global-batch-size" in shown.stdout
    try:
        import torchvision  # noqa: F401
    except ImportError:
        (tmp_path / "train" / "a").mkdir(parents=True)
        ran = subprocess.run([sys.executable, str(script), f"--data={tmp_path}", f"--checkpoint-dir={tmp_path}",
                              "--total-steps=1", "--global-batch-size=2"], env=env, capture_output=True, text=True)
        assert ran.returncode == 1 and "torchvision is required" in ran.stderr


def test_the_forkserver_preload_does_not_initialise_cuda():
    # Workers are forked from the process that imported elastic_trainer.warm; a CUDA context
    # does not survive a fork, so warming up must never create one.
    # On a CPU-only torch nothing initialises anyway, so trip on any call into torch.cuda instead.
    code = (
        "import sys, torch\n"
        "def touched(*a, **k): sys.exit(3)\n"
        "torch.cuda._lazy_init = torch.cuda.is_available = torch.cuda.device_count = touched\n"
        "import elastic_trainer.warm\n"
    )
    env = {"PYTHONPATH": str(IMAGE_DIR), "PATH": "/usr/bin:/bin"}
    assert subprocess.run([sys.executable, "-c", code], env=env, capture_output=True).returncode == 0


@pytest.mark.slow
def test_sigterm_while_waiting_for_the_rendezvous_exits_143_and_leaves_it_open(make_job, etcd):
    # Regression (review): torchrun installs its signal handlers only when workers start, so a
    # SIGTERM during the initial rendezvous (minutes, waiting for the minimum of --nnodes) was
    # ignored by a container's PID 1 and the pod ended in 137 after its grace period.
    job = make_job("--total-steps=5", "--global-batch-size=8", nnodes="2:2")
    waiting = job.start_node("waiting")
    key = f"http://{etcd.endpoint}/v2/keys/torch/elastic/rendezvous/{job.run_id}"
    deadline = time.monotonic() + 60
    while True:  # the node is in the rendezvous once it has written its state
        try:
            with urllib.request.urlopen(key, timeout=1):
                break
        except urllib.error.HTTPError:
            assert time.monotonic() < deadline and waiting.running(), "the node never joined the rendezvous"
            time.sleep(0.2)
    time.sleep(1)  # well inside the wait: a round needs a second node
    sent_at = waiting.sigterm()
    assert waiting.wait(30) == 143
    assert time.monotonic() - sent_at < 5
    # and the rendezvous stays open for the pod's replacement (torchrun closes it for every node
    # when its agent ends on any exception other than its own SignalException)
    job.start_node(), job.start_node()
    assert job.wait_for("done", 90)["step"] == 5
