"""`torchfleet submit | list | status | delete` against the real control plane, for every kind of
job the README offers, and what each does when its pods exit 0, 1, 2, 137 or 143.

The pods are admitted by the real Pod Security Admission (`restricted`), placed by the real
scheduler on fake nodes shaped like the aws-usw2 stack's pools, and run by the real Job controller;
kwok ends a pod with the exit code a test writes on it (kwok_stages.EXIT_CODE_ANNOTATION), as the
kubelet reports a container that exited. No training runs: the trainer's own behaviour under each
exit is tested with real torchrun + etcd in tests/training_image.
"""

from __future__ import annotations

import itertools
import json

import pytest

from components.spec import LABEL_JOB, LABEL_ZONE
from tests.controlplane.kwok_stages import EXIT_CODE_ANNOTATION
from tests.controlplane.layer import get, kubectl, wait_for
from torchfleet.cli import main
from torchfleet.jobs.indexed_job import BACKOFF_LIMIT_PER_INDEX

IMAGE = "registry.example.com/team/train:1.0"
# Each kind of job the CLI submits, as the flags a researcher types.
KINDS = {
    "restart": [],
    "inplace": ["--recovery", "inplace"],
}
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
_names = itertools.count()


def cli(layer, capsys, *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main([argv[0], "--kubeconfig", str(layer.cp.kubeconfig), "--namespace", layer.namespace, *argv[1:]])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def submit(layer, capsys, kind: str, *extra: str, nodes: str = "2") -> str:
    name = f"tier-{kind}-{next(_names)}"
    code, out = cli(layer, capsys, "submit", name, "--gpu", "t4", "--nodes", nodes, "--image", IMAGE,
                    *KINDS[kind], *extra, "--", "python", "train.py")  # fmt: skip
    assert code == 0, out
    return name


def training_pods(layer, name: str) -> list[dict]:
    return get(layer.cp, "pods", "-n", layer.namespace, "-l", f"{LABEL_JOB}={name}")["items"]


def running(layer, name: str, count: int) -> list[dict]:
    return wait_for(
        f"{count} running pods of {name}",
        lambda: (
            (pods := [p for p in training_pods(layer, name) if p["status"].get("phase") == "Running"])
            and len(pods) >= count
            and pods
        ),
    )


def end_pod(layer, pod: dict, code: int, gone_ok: bool = False) -> None:
    """The pod's container exits CODE (kwok's pod-exit stage reads the annotation). GONE_OK: the pod
    may be gone already (a run that finished removes its other pods), which is then not an error."""
    name = pod["metadata"]["name"]
    args = ("annotate", "-n", layer.namespace, "pod", name, f"{EXIT_CODE_ANNOTATION}={code}")
    out = kubectl(layer.cp, *args, check=not gone_ok)  # stdout and stderr when not checked
    if gone_ok and f"pod/{name} annotated" not in out and get_or_none(layer, name) is not None:
        kubectl(layer.cp, *args)  # it is there: the annotation must take (raises with kubectl's error)


def get_or_none(layer, pod_name: str) -> dict | None:
    out = kubectl(layer.cp, "get", "-n", layer.namespace, "pod", pod_name, "-o", "json", "--ignore-not-found")
    return json.loads(out) if out.strip() else None


def job_conditions(layer, name: str) -> dict[str, str]:
    """The Job's true conditions, type -> reason."""
    status = get(layer.cp, "job", name, "-n", layer.namespace).get("status", {})
    return {c["type"]: c.get("reason", "") for c in status.get("conditions", []) if c["status"] == "True"}


def finished(layer, name: str, condition: str) -> dict[str, str]:
    """Wait until the Job has CONDITION (Complete or Failed); its conditions then."""
    return wait_for(f"{name} {condition}", lambda: condition in (c := job_conditions(layer, name)) and c)


def delete(layer, capsys, name: str) -> None:
    code, out = cli(layer, capsys, "delete", name)
    assert code == 0, out


def leftovers(layer, name: str) -> list[str]:
    """Everything in the namespace that still names the job (pods, services, policies, the job)."""
    out = kubectl(
        layer.cp, "get", "jobs,pods,services,deployments,networkpolicies", "-n", layer.namespace,
        "-l", f"{LABEL_JOB}={name}", "-o", "name",
    )  # fmt: skip
    return out.split()


@pytest.mark.parametrize("kind", KINDS)
def test_a_job_is_admitted_under_restricted_and_placed_in_one_zone_of_gpu_nodes(training_layer, capsys, kind):
    name = submit(training_layer, capsys, kind)
    try:
        pods = running(training_layer, name, 2)
        gpu_nodes = {n["metadata"]["name"]: n for n in training_layer.gpu_nodes}
        assert {p["spec"]["nodeName"] for p in pods} <= set(gpu_nodes)
        zones = {gpu_nodes[p["spec"]["nodeName"]]["metadata"]["labels"][LABEL_ZONE] for p in pods}
        assert len(zones) == 1, f"one job's pods span zones {zones}"
        code, out = cli(training_layer, capsys, "list")
        assert code == 0 and name in out, out
    finally:
        delete(training_layer, capsys, name)
    wait_for(f"nothing left of {name}", lambda: not leftovers(training_layer, name))


# What the README promises for each exit of a training pod ("Operators", and --recovery inplace):
# "Complete" and "Failed" are the Job's condition; "replaced" a new pod for the index, with the
# failure counted against backoffLimitPerIndex (1) or not (0), read from the annotation the Job
# controller puts on the replacement.
OUTCOMES = {
    "restart": {
        0: "Complete",
        1: "Failed",
        2: "Failed",
        75: ("replaced", 1),
        137: ("replaced", 1),  # SIGKILL is what an OOM kill leaves too: counted (indexed_job.py)
        143: ("replaced", 0),
    },
    "inplace": {0: "Complete", 1: ("replaced", 1), 2: "Failed", 137: ("replaced", 1), 143: ("replaced", 1)},
}
INDEX_FAILURES = "batch.kubernetes.io/job-index-failure-count"
CASES = [(kind, code) for kind, outcomes in OUTCOMES.items() for code in outcomes]


@pytest.mark.parametrize(("kind", "exit_code"), CASES)
def test_each_exit_does_what_the_readme_promises(training_layer, capsys, kind, exit_code):
    expected = OUTCOMES[kind][exit_code]
    name = submit(training_layer, capsys, kind)
    try:
        pods = running(training_layer, name, 2)
        victim = min(pods, key=lambda p: p["metadata"]["labels"][COMPLETION_INDEX])
        # torchrun ends every agent of a finished run alike; once the first has exited 0 the Job may
        # be complete and its other pods removed before the next annotation (as a loaded CI run saw).
        for i, pod in enumerate(pods if exit_code == 0 else [victim]):
            end_pod(training_layer, pod, exit_code, gone_ok=i > 0)
        if expected in ("Complete", "Failed"):
            reasons = finished(training_layer, name, expected)
            if expected == "Failed":
                assert reasons["Failed"] == "PodFailurePolicy", reasons
            else:
                assert "Failed" not in reasons, reasons
            code, out = cli(training_layer, capsys, "status", name)
            assert code == 0, out
            assert {"Complete": "Succeeded", "Failed": "Failed"}[expected] in out, out
            return
        _, counted = expected
        index = victim["metadata"]["labels"][COMPLETION_INDEX]
        (replacement, *_) = wait_for(
            f"a replacement for {victim['metadata']['name']}",
            lambda: [
                p
                for p in training_pods(training_layer, name)
                if p["metadata"]["labels"][COMPLETION_INDEX] == index
                and p["metadata"]["uid"] != victim["metadata"]["uid"]
                and p["status"].get("phase") == "Running"
            ],
        )
        assert replacement["metadata"]["annotations"].get(INDEX_FAILURES) == str(counted)
        assert not job_conditions(training_layer, name).get("Failed"), job_conditions(training_layer, name)
        code, out = cli(training_layer, capsys, "list")
        assert code == 0 and name in out, out
    finally:
        delete(training_layer, capsys, name)


@pytest.mark.parametrize("kind", KINDS)
def test_a_same_name_resubmit_after_delete_works(training_layer, capsys, kind):
    name = submit(training_layer, capsys, kind)
    running(training_layer, name, 1)
    delete(training_layer, capsys, name)
    wait_for(f"nothing left of {name}", lambda: not leftovers(training_layer, name))
    code, out = cli(training_layer, capsys, "submit", name, "--gpu", "t4", "--nodes", "2", "--image", IMAGE,
                    *KINDS[kind], "--", "python", "train.py")  # fmt: skip
    assert code == 0, out
    try:
        running(training_layer, name, 1)
    finally:
        delete(training_layer, capsys, name)


@pytest.mark.parametrize("kind", KINDS)
def test_a_run_that_lost_a_node_for_good_and_then_finished_succeeds(training_layer, capsys, kind):
    """Regression (review of 2026-11-25): with completions = MAX the Job controller counted one failed plus one
    succeeded index as all of a 1:2 job's completions and marked the finished run Failed (FailedIndexes)
    before reading its success policy. In-place jobs kept completions = MAX after the restart mode's fix."""
    name = submit(training_layer, capsys, kind, nodes="1:2")
    try:
        seen: set[str] = set()
        for _ in range(BACKOFF_LIMIT_PER_INDEX + 1):  # index 1 crashes by signal until its retries are spent
            (pod, *_) = wait_for(
                f"a new running pod of index 1 of {name}",
                lambda: [
                    p
                    for p in training_pods(training_layer, name)
                    if p["metadata"]["labels"][COMPLETION_INDEX] == "1"
                    and p["metadata"]["uid"] not in seen
                    and p["status"].get("phase") == "Running"
                ],
            )
            seen.add(pod["metadata"]["uid"])
            end_pod(training_layer, pod, 139)
        wait_for(
            f"index 1 of {name} failed for good",
            lambda: (
                get(training_layer.cp, "job", name, "-n", training_layer.namespace)["status"].get("failedIndexes")
                == "1"
            ),
        )
        (survivor,) = [p for p in running(training_layer, name, 1) if p["metadata"]["labels"][COMPLETION_INDEX] == "0"]
        end_pod(training_layer, survivor, 0)
        reasons = finished(training_layer, name, "Complete")
        assert "Failed" not in reasons, reasons
    finally:
        delete(training_layer, capsys, name)
