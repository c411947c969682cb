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
from elastic_trainer.launcher import build_plan

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
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 8, 8)
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
        (137, False, "Ignore"),  # SIGKILL after the grace period
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
