"""A rendezvous of its own per submission (issue 19): the same job name submitted twice in a row trains twice.

Regression: the rendezvous id was the job's name (PyTorchJob ``rdzvId: <name>``; the ElasticJob controller
prepends ``--rdzv_id=<name>``), and torch's etcd-v2 backend keeps a run's closed rendezvous for 7,200 s,
so ``torchfleet delete X && torchfleet submit X`` after a finished run met it closed and every node failed.

The real run takes the `job` operator's pod as `submit` builds it (command, args, environment) and runs it
as a local process against a real etcd, as the kubelet would (``$(POD_IP)`` expanded; only the etcd
endpoint and the store's path made local).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import replace

import pytest
from elastic_trainer.local import IMAGE_DIR, Etcd, etcd_binary

from torchfleet.jobs import manifests, pod_template
from torchfleet.jobs import target as targets
from torchfleet.jobs.spec import build_request

IMAGE = "registry.example.com/team/train:1.4.2"
OPERATORS = ("job", "torchelastic", "kubeflow")


def _request(name: str, operator: str = "job", command=("python", "train.py")):
    t = replace(targets.from_stack("local"), operator=operator)
    req = build_request(
        t, name=name, image=IMAGE, cpu=True, gpu=None, gpus_per_node=None, nodes="1", command=list(command)
    )
    return req, t, manifests.build(req, t)


def _rdzv_ids(args: list[str]) -> list[str]:
    return [a.split("=", 1)[1] for a in args if a.startswith("--rdzv_id=")]


@pytest.mark.parametrize("operator", OPERATORS)
def test_every_submission_gets_its_own_rendezvous_id(operator):
    first, _, job = _request("resnet", operator)
    second, _, again = _request("resnet", operator)
    assert re.fullmatch(r"resnet-[0-9a-f]{8}", first.rdzv_id) and first.rdzv_id != second.rdzv_id
    for req, obj in ((first, job), (second, again)):
        container = manifests.worker_spec(obj)["template"]["spec"]["containers"][0]
        # the last --rdzv_id is torchrun's (argparse keeps the last): after the ElasticJob controller's
        # prepended --rdzv_id=<name>, and before the user's script
        assert _rdzv_ids(container["args"]) == [req.rdzv_id]
        assert container["args"].index(f"--rdzv_id={req.rdzv_id}") < container["args"].index("train.py")
        assert obj["metadata"]["annotations"][pod_template.ANNOTATION_RDZV_ID] == req.rdzv_id
        # and on the pods of every operator: the etcd gate resolves a pod's run from it
        # (an ElasticJob's or PyTorchJob's pods have no batch/v1 Job to read it from)
        template = manifests.worker_spec(obj)["template"]
        assert template["metadata"]["annotations"] == {pod_template.ANNOTATION_RDZV_ID: req.rdzv_id}
        # and the rendezvous endpoint every operator is given is the gate's Service, never etcd's
        endpoint = "etcd-gate.elastic-job.svc:2379"
        if operator == "kubeflow":
            policy = obj["spec"]["elasticPolicy"]
            assert (policy["rdzvHost"], policy["rdzvPort"]) == ("etcd-gate.elastic-job.svc", 2379)
        elif operator == "torchelastic":
            assert obj["spec"]["rdzvEndpoint"] == endpoint
        else:
            assert f"--rdzv_endpoint={endpoint}" in container["args"]
    if operator == "kubeflow":  # the operator's PET_RDZV_ID says the same
        assert job["spec"]["elasticPolicy"]["rdzvId"] == first.rdzv_id


def test_an_inplace_job_has_no_rendezvous():
    t = targets.from_stack("local")
    req = build_request(
        t,
        name="pair",
        image=IMAGE,
        recovery="inplace",
        cpu=True,
        gpu=None,
        gpus_per_node=None,
        nodes="1:2",
        command=["python", "train.py"],
    )
    job = manifests.build(req, t)
    assert req.rdzv_id == "" and pod_template.ANNOTATION_RDZV_ID not in job["metadata"]["annotations"]
    assert pod_template.ANNOTATION_RDZV_ID not in job["spec"]["template"]["metadata"].get("annotations", {})
    assert not _rdzv_ids(job["spec"]["template"]["spec"]["containers"][0]["args"])


def _run_pod(job: dict, req, etcd: Etcd, store, log) -> int:
    """The job's pod 0 as a process: what the kubelet would run, with the local etcd and store."""
    (worker,) = job["spec"]["template"]["spec"]["containers"]
    args = [a.replace("$(POD_IP)", "127.0.0.1") for a in worker["args"]]
    args = [f"--rdzv_endpoint={etcd.endpoint}" if a.startswith("--rdzv_endpoint=") else a for a in args]
    env = {e["name"]: e["value"].replace(req.job_dir, str(store)) for e in worker["env"] if "value" in e}
    env.update(JOB_COMPLETION_INDEX="0", GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1", PYTHONPATH=str(IMAGE_DIR))
    with log.open("w") as out:
        return subprocess.run(
            [sys.executable, *worker["command"][1:], *args],
            cwd=IMAGE_DIR,
            env={**os.environ, **env},
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=240,
        ).returncode


def _done(text: str) -> list[int]:
    return [
        json.loads(line.split("@@tf ", 1)[1])["step"]
        for line in text.splitlines()
        if line.startswith("@@tf ") and '"ev": "done"' in line
    ]


@pytest.mark.slow
def test_the_same_job_name_trains_twice_in_a_row(tmp_path):
    if etcd_binary() is None:
        pytest.fail("etcd is not installed (apt-get install etcd-server), or $TORCHFLEET_ETCD_BINARY is not executable")
    command = ["python", "examples/synthetic.py", "--total-steps=4", "--global-batch-size=8"]
    store = tmp_path / "resnet"
    with Etcd() as etcd:
        first, _, job = _request("resnet", command=command)
        code = _run_pod(job, first, etcd, store, tmp_path / "first.log")
        assert code == 0 and _done((tmp_path / "first.log").read_text()) == [4], (tmp_path / "first.log").read_text()
        # `torchfleet delete resnet && torchfleet submit resnet ...`: a new submission, a new rendezvous
        second, _, again = _request("resnet", command=command)
        code = _run_pod(again, second, etcd, store, tmp_path / "second.log")
        text = (tmp_path / "second.log").read_text()
        assert code == 0 and _done(text) == [4], text[-4000:]
        # The bug, shown on the same etcd: the first run's id (what the job's name alone was) is closed.
        job["spec"]["template"]["spec"]["containers"][0]["args"] = [
            f"--rdzv_id={first.rdzv_id}" if a.startswith("--rdzv_id=") else a
            for a in again["spec"]["template"]["spec"]["containers"][0]["args"]
        ]
        code = _run_pod(job, second, etcd, store, tmp_path / "closed.log")
        text = (tmp_path / "closed.log").read_text()
        assert "RendezvousClosedError" in text and not _done(text), text[-4000:]
        assert code == 75, text[-4000:]  # the launcher's "rendezvous unavailable": retried, not fatal
