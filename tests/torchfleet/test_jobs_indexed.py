"""The `job` operator (issue 19, the default): Kubernetes' own Indexed Job running torchrun's elastic agents.

Schemas (kubernetes-validate 1.30 and newest), the restricted level and checkov run over every operator in
test_jobs_manifests.py, test_jobs_pod_security.py and test_jobs_checkov.py; here, what the Job does with each
way a pod can end, the rendezvous in its args, and that it is the default everywhere.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import yaml
from elastic_trainer import launcher
from elastic_trainer.launch.plan import build_plan

from components import spec as platform
from torchfleet.cli import main
from torchfleet.jobs import indexed_job, manifests
from torchfleet.jobs import target as targets
from torchfleet.jobs.spec import build_request

IMAGE = "registry.example.com/team/train:1.4.2"


def _job(nodes="2:8", **flags):
    t = replace(targets.from_stack("aws-usw2"), operator="job")
    req = build_request(
        t,
        name="resnet",
        image=IMAGE,
        gpu="t4",
        gpus_per_node=None,
        nodes=nodes,
        command=["python", "train.py", "--lr", "0.1"],
        **flags,
    )
    return req, t, manifests.build(req, t)


def test_the_job_operator_is_the_default_of_the_platform_and_the_cli():
    assert platform.OPERATORS[0] == "job" and platform.TrainingSpec().operator == "job"
    assert targets.defaults().operator == "job"


def test_the_indexed_job_asks_for_every_node_and_succeeds_with_the_first(capsys):
    _, _, job = _job()
    spec = job["spec"]
    assert (job["apiVersion"], job["kind"]) == ("batch/v1", "Job")
    # 8 nodes at once; completions past what failed and succeeded indexes can reach (2:8: 6 may fail)
    assert (spec["completionMode"], spec["parallelism"], spec["completions"]) == ("Indexed", 8, 8 + 6 + 1)
    assert spec["successPolicy"] == {"rules": [{"succeededCount": 1}]}  # torchrun ends all agents together
    assert spec["podReplacementPolicy"] == "Failed"  # a replacement only once the old pod's checkpoint is written
    assert (spec["backoffLimitPerIndex"], spec["maxFailedIndexes"]) == (3, 6)  # on while MIN=2 can run
    assert job["metadata"]["labels"][indexed_job.LABEL_RECOVERY] == "restart"
    assert manifests.min_max(job) == (2, 8)
    assert manifests.container_name(job) == "worker"
    assert spec["template"]["spec"]["restartPolicy"] == "Never"


def _action(rules, exit_code=None, disrupted=False) -> str:
    """What the Job controller does with a failed pod: its first matching rule, else Count
    (https://kubernetes.io/docs/concepts/workloads/controllers/job/#pod-failure-policy; exit 0 never matches)."""
    for rule in rules:
        if "onPodConditions" in rule:
            if disrupted and {"type": "DisruptionTarget", "status": "True"} in rule["onPodConditions"]:
                return rule["action"]
            continue
        codes = rule["onExitCodes"]
        assert codes["containerName"] == "worker" and codes["operator"] == "In"
        assert codes["values"] == sorted(set(codes["values"])) and 0 not in codes["values"]
        assert len(codes["values"]) <= 255  # the API's limit
        if exit_code in codes["values"]:
            return rule["action"]
    return "Count"


@pytest.mark.parametrize(
    ("exit_code", "disrupted", "action"),
    [
        (launcher.EXIT_BAD_INPUT, False, "FailJob"),  # a bad argument: every node fails the same way
        (1, False, "FailJob"),  # torchrun gave up after its restarts: a bug
        (65, False, "FailJob"),
        (launcher.EXIT_RDZV_UNAVAILABLE, False, "Count"),  # etcd unreachable, or the run ended without this node
        (143, False, "Ignore"),  # SIGTERM (the launcher's mapping): a drain, a spot notice
        # SIGKILL: an out-of-memory kill looks the same, so it is counted (a free retry loops forever); a
        # reclaim's SIGKILL after the grace period carries DisruptionTarget (below). Review of 2026-11-25.
        (137, False, "Count"),
        (139, False, "Count"),  # a crash by signal: retried, a few times
        (1, True, "Ignore"),  # a reclaimed pod's exit code is whatever the kill left
        (None, True, "Ignore"),  # PodGC on a deleted node: no exit code at all
    ],
)
def test_each_way_a_pod_ends_does_what_the_readme_promises(exit_code, disrupted, action):
    _, _, job = _job()
    assert _action(job["spec"]["podFailurePolicy"]["rules"], exit_code, disrupted) == action


def test_the_rendezvous_is_in_the_args_and_the_launcher_keeps_it():
    req, t, job = _job(nodes="2:8")
    (container,) = job["spec"]["template"]["spec"]["containers"]
    args = [a.replace("$(POD_IP)", "10.0.0.7") for a in container["args"]]
    plan = build_plan(args, {})  # what the training image's launcher hands torchrun
    from torch.distributed.run import get_args_parser

    parsed = get_args_parser().parse_args(plan.torchrun_args)
    assert (parsed.rdzv_backend, parsed.rdzv_endpoint, parsed.rdzv_id) == ("etcd-v2", t.etcd_endpoint, req.rdzv_id)
    assert parsed.nnodes == "2:8" and parsed.local_addr == "10.0.0.7"
    assert (parsed.training_script, parsed.training_script_args) == ("train.py", ["--lr", "0.1"])


def test_submit_without_an_operator_dry_runs_an_indexed_job(capsys, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", "/nonexistent")
    for var in ("TORCHFLEET_STACK", "TORCHFLEET_IMAGE", "TORCHFLEET_NAMESPACE", "TORCHFLEET_CONTEXT"):
        monkeypatch.delenv(var, raising=False)
    code = main(
        ["submit", "resnet", "--gpu", "t4", "--nodes", "1:2", "--image", IMAGE, "--dry-run", "--", "python", "train.py"]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    job, policy = yaml.safe_load_all(out)
    assert (job["kind"], job["metadata"]["labels"][indexed_job.LABEL_RECOVERY]) == ("Job", "restart")
    assert policy["kind"] == "NetworkPolicy"


def test_an_unknown_operator_exits_2_listing_the_choices(capsys):
    with pytest.raises(SystemExit) as ended:  # argparse's own usage error
        main(
            [
                "submit",
                "resnet",
                "--operator",
                "volcano",
                "--gpu",
                "t4",
                "--image",
                IMAGE,
                "--dry-run",
                "--",
                "python",
                "train.py",
            ]
        )
    err = capsys.readouterr().err
    assert ended.value.code == 2 and "--operator" in err and "'job'" in err


# ---------------------------------------------------------------- the pods, run as processes


def _pod_process(job, req, etcd, store, index, log):
    """Pod INDEX of the Job as a process: the container's command, args and environment as the kubelet runs
    them (``$(POD_IP)`` expanded, JOB_COMPLETION_INDEX set), with the local etcd and store."""
    import os
    import subprocess
    import sys

    from elastic_trainer.local import IMAGE_DIR

    (worker,) = job["spec"]["template"]["spec"]["containers"]
    args = [a.replace("$(POD_IP)", "127.0.0.1") for a in worker["args"]]
    args = [f"--rdzv_endpoint={etcd.endpoint}" if a.startswith("--rdzv_endpoint=") else a for a in args]
    env = {e["name"]: e["value"].replace(req.job_dir, str(store)) for e in worker["env"] if "value" in e}
    env.update(JOB_COMPLETION_INDEX=str(index), GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1", PYTHONPATH=str(IMAGE_DIR))
    return subprocess.Popen(
        [sys.executable, *worker["command"][1:], *args],
        cwd=IMAGE_DIR,
        env={**os.environ, **env},
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )


def _events(path, kind):
    import json

    return [
        json.loads(line.split("@@tf ", 1)[1])
        for line in path.read_text().splitlines()
        if line.startswith("@@tf ") and f'"ev": "{kind}"' in line
    ]


@pytest.mark.slow
def test_min_nodes_train_at_once_a_later_pod_joins_and_one_after_the_end_exits_75(tmp_path):
    """--nodes 1:2 as the Job's pods run it: pod 0 trains alone (MIN), pod 1 starting later joins the run
    (a membership change), both end with 0 together (so the first succeeded index is the job's success), and
    a pod that starts after the run ended (one that was Pending until then) exits 75, retried, not 1."""
    import time

    from elastic_trainer.local import Etcd, etcd_binary

    if etcd_binary() is None:
        pytest.fail("etcd is not installed (apt-get install etcd-server), or $TORCHFLEET_ETCD_BINARY is not executable")
    t = replace(targets.from_stack("local"), operator="job")
    total = 400  # 40 s at least: pod 1 (torch import and all) starts long before pod 0 is done
    req = build_request(
        t,
        name="pair",
        image=IMAGE,
        cpu=True,
        gpu=None,
        gpus_per_node=None,
        nodes="1:2",
        command=[
            "python",
            "examples/synthetic.py",
            f"--total-steps={total}",
            "--global-batch-size=16",
            "--step-delay-s=0.1",
        ],
    )
    job = manifests.build(req, t)
    store = tmp_path / "pair"
    logs = [tmp_path / f"pod-{i}.log" for i in range(3)]
    with Etcd() as etcd:
        procs = [_pod_process(job, req, etcd, store, 0, logs[0])]
        try:
            deadline = time.monotonic() + 120
            while not [e for e in _events(logs[0], "step") if e["step"] >= 5]:
                assert time.monotonic() < deadline and procs[0].poll() is None, logs[0].read_text()[-3000:]
                time.sleep(0.2)
            procs.append(_pod_process(job, req, etcd, store, 1, logs[1]))
            codes = [p.wait(timeout=300) for p in procs]
            assert codes == [0, 0], "\n\n".join(log.read_text()[-3000:] for log in logs[:2])
            # rank 0 writes the events, and the rendezvous may give rank 0 to either pod after the join
            both = "\n\n".join(log.read_text()[-3000:] for log in logs[:2])
            assert {e["world"] for log in logs[:2] for e in _events(log, "step")} == {1, 2}, both
            assert [e["step"] for log in logs[:2] for e in _events(log, "done")] == [total], both
            late = _pod_process(job, req, etcd, store, 1, logs[2])  # index 1 again: Pending until the end
            procs.append(late)
            assert late.wait(timeout=120) == launcher.EXIT_RDZV_UNAVAILABLE, logs[2].read_text()[-3000:]
            assert "RendezvousClosedError" in logs[2].read_text()
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
