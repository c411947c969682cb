"""submit/list/status/logs/delete for the default `job` operator (issue 19), against the fake API of
test_jobs_cluster.py: batch/v1 calls only (no custom resource, so no CRD needed in the cluster), the job's
network policy created before the job and then owned by it, and delete leaving nothing behind."""

import json
from datetime import timedelta
from unittest import mock

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.torchfleet.fake_cluster import (  # noqa: F401 (fixtures; api and kubeconfig: conftest.py)
    NOW,
    TIMEOUT,
    cli,
    frozen_now,
)
from torchfleet.jobs import manifests
from torchfleet.jobs import target as targets
from torchfleet.jobs.spec import build_request

SUBMIT = ["submit", "resnet", "--gpu", "t4", "--nodes", "2:4", "--image", "r/t:1", "--", "python", "train.py"]


def job_cli(argv, kubeconfig, capsys):
    return cli(argv, kubeconfig, capsys, operator=None)  # the default operator


def batch_job(name="resnet", recovery="restart", conditions=(), **status):
    t = targets.defaults()
    req = build_request(
        t,
        name=name,
        gpu="t4",
        nodes="2:4",
        gpus_per_node=None,
        image="r/t:1",
        command=["python", "train.py", "--total-steps", "100"],
    )
    obj = manifests.build(req, t)
    obj["metadata"]["labels"]["torchfleet.io/recovery"] = recovery
    obj["metadata"].update(uid=f"uid-{name}", creationTimestamp=NOW - timedelta(hours=1))
    obj["status"] = {"conditions": list(conditions), **status}
    return _v1job(obj)


def _v1job(obj):
    """The dict as the typed client returns it (the commands turn it back into the API's JSON shape)."""
    return client.ApiClient().deserialize(json.dumps(obj, default=str), "V1Job", "application/json")


def worker(index, phase="Running", name=None):
    return client.V1Pod(
        metadata=client.V1ObjectMeta(
            name=name or f"resnet-{index}-abcde",
            creation_timestamp=NOW,
            labels={
                "torchfleet.io/job": "resnet",
                "torchfleet.io/role": "training",
                "batch.kubernetes.io/job-completion-index": str(index),
            },
        ),
        spec=client.V1PodSpec(containers=[client.V1Container(name="worker")], node_name="node-a"),
        status=client.V1PodStatus(phase=phase),
    )


def test_submit_creates_the_policy_then_the_indexed_job_which_then_owns_it(api, kubeconfig, capsys):
    api.create_namespaced_job.side_effect = lambda self, ns, body, **k: _v1job(
        {**body, "metadata": {**body["metadata"], "uid": "u-1"}}
    )
    order = mock.Mock()
    order.attach_mock(api.create_namespaced_network_policy, "policy")
    order.attach_mock(api.create_namespaced_job, "job")
    order.attach_mock(api.patch_namespaced_network_policy, "adopt")
    code, out, err = job_cli(SUBMIT, kubeconfig, capsys)
    assert code == 0, err
    assert [c[0] for c in order.mock_calls] == ["policy", "job", "adopt"]
    (create,) = api.create_namespaced_job.call_args_list
    _, namespace, body = create.args
    assert namespace == "elastic-job" and body["kind"] == "Job" and body["spec"]["completionMode"] == "Indexed"
    assert create.kwargs["field_validation"] == "Strict"
    owner = api.patch_namespaced_network_policy.call_args.args[3]["metadata"]["ownerReferences"]
    assert owner == [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "resnet", "uid": "u-1", "blockOwnerDeletion": False}
    ]
    api.create_namespaced_custom_object.assert_not_called()
    api.get_namespaced_custom_object.assert_not_called()  # no CRD is asked for, not even to check the name
    assert "submitted Job resnet to namespace elastic-job: 2-4 x 1 t4" in out


def test_submit_of_a_taken_name_exits_2(api, kubeconfig, capsys):
    api.read_namespaced_job.side_effect = None
    api.read_namespaced_job.return_value = batch_job()
    code, _, err = job_cli(SUBMIT, kubeconfig, capsys)
    assert code == 2 and "resnet already exist" in err
    api.create_namespaced_network_policy.assert_not_called()


def test_list_shows_the_indexed_jobs_without_asking_for_a_crd(api, kubeconfig, capsys):
    api.list_namespaced_job.return_value = client.V1JobList(
        items=[batch_job(conditions=[{"type": "Complete", "status": "True"}]), batch_job("bert", active=2)]
    )
    api.list_namespaced_pod.return_value = client.V1PodList(items=[worker(0), worker(1)])
    api.read_node.side_effect = ApiException(status=403, reason="Forbidden")
    code, out, err = job_cli(["list"], kubeconfig, capsys)
    assert code == 0, err
    rows = [line.split()[:3] for line in out.splitlines()[1:]]
    assert rows == [["bert", "Running", "0/2/4"], ["resnet", "Succeeded", "2/2/4"]]
    api.list_namespaced_job.assert_called_once_with(
        mock.ANY, "elastic-job", label_selector="torchfleet.io/recovery in (restart,inplace)", _request_timeout=TIMEOUT
    )
    api.list_namespaced_custom_object.assert_not_called()


def test_status_and_logs_read_the_worker_container_of_the_indexed_pods(api, kubeconfig, capsys):
    api.read_namespaced_job.side_effect = None
    api.read_namespaced_job.return_value = batch_job(active=2)
    api.list_namespaced_pod.return_value = client.V1PodList(items=[worker(1), worker(0)])
    api.list_namespaced_event.return_value = client.CoreV1EventList(items=[])
    api.read_node.side_effect = ApiException(status=403, reason="Forbidden")
    api.read_namespaced_pod_log.return_value = "line\n"
    code, out, err = job_cli(["status", "resnet"], kubeconfig, capsys)
    assert code == 0, err
    assert "Job:             resnet (Job, namespace elastic-job)" in out
    assert "Recovery:        restart" in out and "Lighthouse" not in out
    assert all(c.kwargs["container"] == "worker" for c in api.read_namespaced_pod_log.call_args_list)
    api.read_namespaced_pod_log.reset_mock()
    code, out, err = job_cli(["logs", "resnet", "--rank", "1"], kubeconfig, capsys)
    assert code == 0 and out == "line\n", err
    api.read_namespaced_pod_log.assert_called_once_with(
        mock.ANY, "resnet-1-abcde", "elastic-job", container="worker", tail_lines=None, _request_timeout=TIMEOUT
    )


def test_delete_removes_the_job_and_lets_the_garbage_collector_take_its_pods_and_policies(api, kubeconfig, capsys):
    api.read_namespaced_job.side_effect = None
    api.read_namespaced_job.return_value = batch_job()
    code, out, err = job_cli(["delete", "resnet"], kubeconfig, capsys)
    assert code == 0 and "deleted Job resnet" in out, err
    # Background, not the batch API's default of orphaning the pods
    api.delete_namespaced_job.assert_called_once_with(
        mock.ANY, "resnet", "elastic-job", propagation_policy="Background", _request_timeout=TIMEOUT
    )
    api.delete_namespaced_custom_object.assert_not_called()


def test_delete_leaves_a_job_that_is_not_torchfleets_alone(api, kubeconfig, capsys):
    store_owner = batch_job("store-owner")
    store_owner.metadata.labels.pop("torchfleet.io/recovery")
    api.read_namespaced_job.side_effect = None
    api.read_namespaced_job.return_value = store_owner
    code, _, err = job_cli(["delete", "store-owner"], kubeconfig, capsys)
    assert code == 2 and "no Job 'store-owner' in namespace elastic-job" in err
    api.delete_namespaced_job.assert_not_called()


def test_status_of_a_missing_job_exits_2(api, kubeconfig, capsys):
    code, out, err = job_cli(["status", "ghost"], kubeconfig, capsys)
    assert code == 2 and "NAME: no Job 'ghost' in namespace elastic-job" in err and out == ""
