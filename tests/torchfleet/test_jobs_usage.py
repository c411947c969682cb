"""GPU-hours and their cost so far, in `list` and `status` (issue 21), from the job's pods: each holds one
machine from its container's start to its end (or now), priced at the catalog's list price."""

from __future__ import annotations

from datetime import timedelta
from unittest import mock

import pytest
from kubernetes import client

from components.catalog import prices
from tests.torchfleet.fake_cluster import NOW, api, cli, job_object, kubeconfig, node  # noqa: F401 (fixtures)
from torchfleet.jobs import usage

T4 = prices.machine_price("aws", "g4dn.xlarge")
BIG = prices.machine_price("aws", "g4dn.12xlarge")


def pod(name, started_h=None, ended_h=None, node_name="node-a", job="resnet"):
    """A pod whose container started ``started_h`` hours ago and ended ``ended_h`` hours ago (None: runs)."""
    state = client.V1ContainerState()
    if started_h is not None and ended_h is None:
        state.running = client.V1ContainerStateRunning(started_at=NOW - timedelta(hours=started_h))
    elif started_h is not None:
        state.terminated = client.V1ContainerStateTerminated(
            exit_code=143, started_at=NOW - timedelta(hours=started_h), finished_at=NOW - timedelta(hours=ended_h))
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels={"torchfleet.io/job": job, "torchfleet.io/role": "training"},
                                     creation_timestamp=NOW - timedelta(hours=3)),
        spec=client.V1PodSpec(containers=[client.V1Container(name="elasticjob-worker")], node_name=node_name),
        status=client.V1PodStatus(phase="Running" if ended_h is None and started_h is not None else "Pending",
                                  container_statuses=[client.V1ContainerStatus(
                                      name="elasticjob-worker", image="r/t:1", image_id="", ready=True,
                                      restart_count=0, state=state)]),
    )


def labels_of(**instance_types):
    return lambda name: None if name not in instance_types else {usage.INSTANCE_TYPE: instance_types[name]}


def test_running_ended_and_pending_pods_each_count_their_own_hours():
    pods = [pod("w-0", started_h=2), pod("w-1", started_h=1.5, ended_h=1), pod("w-2")]
    used = usage.of_job(job_object(), pods, "aws", labels_of(**{"node-a": "g4dn.xlarge"}), NOW)
    assert used.machine_hours == pytest.approx(2.5) and used.gpu_hours == pytest.approx(2.5)
    assert used.usd == pytest.approx(2.5 * T4)
    assert used.text() == (f"at least 2.50 GPU-hours (2.50 machine-hours), at most {2.5 * T4:.2f} USD so far "
                           f"(on-demand list price, {prices.of('aws').region}, priced {prices.of('aws').priced}; "
                           "spot pays less)")


def test_the_nodes_machine_is_priced_else_the_one_the_job_was_sized_for():
    pods = [pod("w-0", started_h=1, node_name="big"), pod("w-1", started_h=1, node_name="unreadable")]
    used = usage.of_job(job_object(), pods, "aws", labels_of(big="g4dn.12xlarge"), NOW)
    assert used.usd == pytest.approx(BIG + T4)  # the annotation says g4dn.xlarge


def test_gpu_hours_count_every_gpu_of_a_pod():
    job = job_object()
    job["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"]["limits"][
        "nvidia.com/gpu"] = "4"
    used = usage.of_job(job, [pod("w-0", started_h=3)], "aws", labels_of(), NOW)
    assert (used.machine_hours, used.gpu_hours) == (pytest.approx(3), pytest.approx(12))


def test_a_machine_without_a_list_price_leaves_the_cost_unknown():
    used = usage.of_job(job_object(), [pod("w-0", started_h=1)], "aws", labels_of(**{"node-a": "x9.mystery"}), NOW)
    assert used.usd is None and "without a list price" in used.text()
    local = usage.of_job(job_object(), [pod("w-0", started_h=1)], "local", labels_of(), NOW)
    assert local.usd is None and local.basis is None and "no list price" in local.text()


def test_list_shows_gpu_hours_and_usd(api, kubeconfig, capsys):  # noqa: F811 (fixtures)
    """The CLI's clock is NOW, the pods' times are relative to it: the figures hold however long the
    suite took to get here (they drifted by the minutes since NOW was taken, in a full run)."""
    api.list_namespaced_custom_object.return_value = {"items": [job_object("resnet")]}
    api.list_namespaced_pod.return_value = client.V1PodList(items=[pod("resnet-worker-0", started_h=2),
                                                                   pod("resnet-worker-1", started_h=1)])
    api.read_node.return_value = node("node-a", "us-west-2a")  # no instance-type label: the job's machine
    with mock.patch("torchfleet.jobs.commands._now", return_value=NOW):
        code, out, err = cli(["list", "-o", "wide"], kubeconfig, capsys)
    assert code == 0, err
    row = out.splitlines()[1].split()
    assert row[7:9] == ["3.00", f"{3 * T4:.2f}"]
    assert "GPU-HOURS and USD: at least, from the jobs' current pods" in err
    api.get_namespaced_custom_object.return_value = job_object("resnet")
    api.list_namespaced_event.return_value = client.CoreV1EventList(items=[])
    api.read_namespaced_pod_log.return_value = "no events here"
    with mock.patch("torchfleet.jobs.commands._now", return_value=NOW):
        code, out, err = cli(["status", "resnet"], kubeconfig, capsys)
    assert code == 0, err
    assert f"Used:            at least 3.00 GPU-hours (3.00 machine-hours), at most {3 * T4:.2f} USD so far" in out
