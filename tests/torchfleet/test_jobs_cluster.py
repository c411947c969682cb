"""list/status/logs/delete against the fake API (fake_cluster.py: a real ApiClient, the API methods mocked and
their calls asserted exactly; no API server is needed).

These tests are about the ElasticJob's custom-resource path (``--operator torchelastic``, added by ``cli``
unless a test names an operator or a stack); the default `job` operator's batch/v1 path is
test_jobs_cluster_batch.py, submit and sweep test_jobs_cluster_submit.py."""

import json
from datetime import timedelta
from unittest import mock

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.torchfleet.fake_cluster import (  # noqa: F401 (frozen_now: the clock every test here reads)
    EJ,
    NOW,
    TIMEOUT,
    cli,
    cond,
    frozen_now,
    job_object,
    node,
    not_found,
    pod,
)
from torchfleet.cli import main

# ---------------------------------------------------------------- list


def test_list_table(api, kubeconfig, capsys):
    api.list_namespaced_custom_object.return_value = {"items": [
        job_object("resnet", conditions=[cond("Created", 60), cond("Running", 50)], failed=1),
        job_object("bert", conditions=[], age_s=30, zone="us-west-2b"),
    ]}
    api.list_namespaced_pod.return_value = client.V1PodList(items=[
        pod("resnet-worker-0", restarts=2), pod("resnet-worker-1", phase="Pending", node=None),
        pod("bert-worker-0", job="bert", phase="Pending", node=None),
    ])
    api.read_node.return_value = node("node-a", "us-west-2a")
    code, out, err = cli(["list"], kubeconfig, capsys)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "STATE", "NODES", "GPU", "ZONE", "AGE", "RESTARTS", "GPU-HOURS", "USD"]
    # these pods carry no start time: no hours yet (tests/torchfleet/test_jobs_usage.py counts them)
    assert lines[1].split() == ["bert", "Pending", "0/2/4", "t4", "us-west-2b", "30s", "0", "0.00", "0.00"]
    assert lines[2].split() == ["resnet", "Running", "1/2/4", "t4", "us-west-2a", "1h", "3", "0.00", "0.00"]
    api.list_namespaced_pod.assert_called_once_with(
        mock.ANY, "elastic-job", label_selector="torchfleet.io/role=training", _request_timeout=TIMEOUT)
    api.read_node.assert_called_once_with(mock.ANY, "node-a", _request_timeout=TIMEOUT)


def test_list_when_nodes_are_not_readable(api, kubeconfig, capsys):
    api.list_namespaced_custom_object.return_value = {"items": [job_object("resnet")]}
    api.list_namespaced_pod.return_value = client.V1PodList(items=[pod("resnet-worker-0")])
    api.read_node.side_effect = ApiException(status=403, reason="Forbidden")
    code, out, _ = cli(["list"], kubeconfig, capsys)
    assert code == 0
    assert out.splitlines()[1].split()[4] == "-"


# ---------------------------------------------------------------- status


def _ckpt_log(*steps):
    lines = ["[torchfleet] torchrun --nnodes=2:4 ...", "2026 [rank0] INFO step 10"]
    lines += ["@@tf " + json.dumps({"ev": "ckpt", "step": s, "gen": 2, "reason": "every"}) for s in steps]
    return "\n".join(lines)


def test_status_reads_last_checkpoint_from_the_logs(api, kubeconfig, capsys):
    api.get_namespaced_custom_object.return_value = job_object(conditions=[cond("Running", 5)])
    api.list_namespaced_pod.return_value = client.V1PodList(items=[pod("resnet-worker-0"),
                                                                   pod("resnet-worker-1", node="node-b")])
    api.list_namespaced_event.return_value = client.CoreV1EventList(items=[client.CoreV1Event(
        metadata=client.V1ObjectMeta(name="e1"), involved_object=client.V1ObjectReference(name="resnet-worker-1"),
        reason="Preempted", type="Warning", message="spot node reclaimed", last_timestamp=NOW - timedelta(minutes=3))])
    api.read_node.side_effect = lambda self, name, **k: node(name, "us-west-2a")
    api.read_namespaced_pod_log.side_effect = lambda self, name, ns, **k: (
        _ckpt_log(100, 200) if name.endswith("-0") else "no events here")
    code, out, err = cli(["status", "resnet"], kubeconfig, capsys)
    assert code == 0, err
    assert "State:           Running" in out
    assert "Last checkpoint: step 200 (read from resnet-worker-0 log)" in out
    assert "Preempted" in out and "spot node reclaimed" in out
    assert "g4dn.xlarge" in out and "spot" in out
    api.read_namespaced_pod_log.assert_any_call(mock.ANY, "resnet-worker-0", "elastic-job",
                                                container="elasticjob-worker", tail_lines=2000,
                                                _request_timeout=TIMEOUT)
    selectors = [c.kwargs["field_selector"] for c in api.list_namespaced_event.call_args_list]
    assert selectors == ["involvedObject.name=resnet", "involvedObject.name=resnet-worker-0",
                         "involvedObject.name=resnet-worker-1"]


def test_status_reads_the_store_when_mounted(api, kubeconfig, capsys, tmp_path):
    ckpts = tmp_path / "resnet" / "checkpoints"
    for name, meta in (("ckpt-g000002-s0000001200", True), ("ckpt-g000002-s0000001300", False),
                       ("ckpt-g000001-s0000005000", True), (".tmp-g000002-s0000001400-ab", True)):
        (ckpts / name).mkdir(parents=True)
        if meta:
            (ckpts / name / "meta.json").write_text("{}")
    api.get_namespaced_custom_object.return_value = job_object()
    api.list_namespaced_pod.return_value = client.V1PodList(items=[])
    api.list_namespaced_event.return_value = client.CoreV1EventList(items=[])
    code, out, _ = cli(["status", "resnet", "--shared-dir", str(tmp_path)], kubeconfig, capsys)
    assert code == 0
    # Newest committed by (generation, step): gen 2 beats gen 1's larger step; no meta.json = not committed.
    assert f"Last checkpoint: step 1200 (read from {ckpts})" in out
    api.read_namespaced_pod_log.assert_not_called()


def test_status_falls_back_to_the_job_status(api, kubeconfig, capsys):
    api.get_namespaced_custom_object.return_value = job_object(conditions=[cond("Created", 1)])
    api.list_namespaced_pod.return_value = client.V1PodList(items=[pod("resnet-worker-0", phase="Pending")])
    api.list_namespaced_event.return_value = client.CoreV1EventList(items=[])
    api.read_node.return_value = node("node-a", "us-west-2a")
    code, out, _ = cli(["status", "resnet"], kubeconfig, capsys)
    assert code == 0
    assert "Last checkpoint: none seen yet (job Created" in out


def test_status_of_missing_job_exits_2(api, kubeconfig, capsys):
    api.get_namespaced_custom_object.side_effect = not_found()
    code, out, err = cli(["status", "ghost"], kubeconfig, capsys)
    assert code == 2 and "NAME: no ElasticJob 'ghost' in namespace elastic-job" in err and out == ""


# ---------------------------------------------------------------- logs


def test_logs_of_a_rank(api, kubeconfig, capsys):
    api.get_namespaced_custom_object.return_value = job_object()
    api.list_namespaced_pod.return_value = client.V1PodList(items=[pod("resnet-worker-0"), pod("resnet-worker-1")])
    api.read_namespaced_pod_log.return_value = "line one\nline two\n"
    code, out, _ = cli(["logs", "resnet", "--rank", "1", "--tail", "50"], kubeconfig, capsys)
    assert code == 0 and out == "line one\nline two\n"
    api.read_namespaced_pod_log.assert_called_once_with(
        mock.ANY, "resnet-worker-1", "elastic-job", container="elasticjob-worker", tail_lines=50,
        _request_timeout=TIMEOUT)


def test_logs_follow_streams(api, kubeconfig, capsys):
    api.get_namespaced_custom_object.return_value = job_object()
    api.list_namespaced_pod.return_value = client.V1PodList(items=[pod("resnet-worker-0")])
    response = mock.Mock()
    response.stream.return_value = iter([b"step 1\nst", b"ep 2\n", b"last"])
    api.read_namespaced_pod_log.return_value = response
    code, out, _ = cli(["logs", "resnet", "-f"], kubeconfig, capsys)
    assert code == 0 and out == "step 1\nstep 2\nlast\n"
    api.read_namespaced_pod_log.assert_called_once_with(
        mock.ANY, "resnet-worker-0", "elastic-job", container="elasticjob-worker", follow=True, tail_lines=None,
        _preload_content=False, _request_timeout=(10, 7 * 24 * 3600))


def test_logs_of_a_missing_rank_exits_2(api, kubeconfig, capsys):
    api.get_namespaced_custom_object.return_value = job_object()
    api.list_namespaced_pod.return_value = client.V1PodList(items=[pod("resnet-worker-0")])
    code, _, err = cli(["logs", "resnet", "--rank", "3"], kubeconfig, capsys)
    assert code == 2 and "--rank: job resnet has no pod of node 3; its pods: resnet-worker-0" in err
    api.read_namespaced_pod_log.assert_not_called()


def test_logs_of_missing_job_exits_2(api, kubeconfig, capsys):
    api.get_namespaced_custom_object.side_effect = not_found()
    code, _, err = cli(["logs", "ghost"], kubeconfig, capsys)
    assert code == 2 and "no ElasticJob 'ghost'" in err


def test_logs_pytorchjob_container_is_pytorch(api, kubeconfig, capsys):
    api.get_namespaced_custom_object.return_value = job_object(kind="PyTorchJob")
    api.list_namespaced_pod.return_value = client.V1PodList(items=[pod("resnet-worker-0")])
    api.read_namespaced_pod_log.return_value = ""
    code, _, _ = cli(["logs", "resnet", "--operator", "kubeflow"], kubeconfig, capsys)
    assert code == 0
    assert api.read_namespaced_pod_log.call_args.kwargs["container"] == "pytorch"


# ---------------------------------------------------------------- delete


def test_delete(api, kubeconfig, capsys):
    code, out, _ = cli(["delete", "resnet"], kubeconfig, capsys)
    assert code == 0 and "deleted ElasticJob resnet" in out and "stay on the shared store" in out
    api.delete_namespaced_custom_object.assert_called_once_with(
        mock.ANY, *EJ, "resnet", propagation_policy="Background", _request_timeout=TIMEOUT)


def test_delete_missing_job_exits_2(api, kubeconfig, capsys):
    api.delete_namespaced_custom_object.side_effect = not_found()
    code, _, err = cli(["delete", "ghost"], kubeconfig, capsys)
    assert code == 2 and "no ElasticJob 'ghost'" in err


def test_delete_forbidden_exits_1(api, kubeconfig, capsys):
    api.delete_namespaced_custom_object.side_effect = ApiException(status=403, reason="Forbidden")
    code, _, err = cli(["delete", "resnet"], kubeconfig, capsys)
    assert code == 1 and "403 Forbidden" in err


def test_ctrl_c_ends_logs_follow_quietly(api, kubeconfig, capsys):
    api.get_namespaced_custom_object.return_value = job_object()
    api.list_namespaced_pod.return_value = client.V1PodList(items=[pod("resnet-worker-0")])

    def chunks():
        yield b"step 1\n"
        raise KeyboardInterrupt

    response = mock.Mock()
    response.stream.return_value = chunks()
    api.read_namespaced_pod_log.return_value = response
    code, out, err = cli(["logs", "resnet", "-f"], kubeconfig, capsys)
    assert code == 130 and out == "step 1\n" and "Traceback" not in err


def test_list_without_the_crd_hints_at_the_operator(api, kubeconfig, capsys):
    api.list_namespaced_custom_object.side_effect = not_found()
    code, _, err = cli(["list"], kubeconfig, capsys)
    assert code == 1 and "has no ElasticJob resource" in err and "--operator" in err


def test_no_kubeconfig_at_all_says_how_to_name_a_cluster(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setattr("kubernetes.config.kube_config.KUBE_CONFIG_DEFAULT_LOCATION", str(tmp_path / "none"))
    code = main(["list"])
    err = capsys.readouterr().err
    assert code == 2 and "no cluster to talk to" in err and "--stack NAME, or --kubeconfig PATH" in err


def _ended(name, exit_code, phase="Failed"):
    ended = pod(name, phase=phase)
    ended.status.container_statuses[0].state = client.V1ContainerState(
        terminated=client.V1ContainerStateTerminated(exit_code=exit_code))
    return ended


@pytest.mark.parametrize(("pods", "shown"), [
    ([_ended("resnet-worker-0", 1), pod("resnet-worker-1")], "Failed"),  # a bug: the controller says Restarting
    ([_ended("resnet-worker-0", 2), pod("resnet-worker-1")], "Failed"),  # a bad argument
    ([_ended("resnet-worker-0", 143), pod("resnet-worker-1")], "Restarting"),  # retried: the controller recreates it
    ([_ended("resnet-worker-0", 0, "Succeeded"), pod("resnet-worker-1", phase="Pending", node=None)], "Succeeded"),
])
def test_an_elasticjobs_outcome_is_read_from_its_pods(api, kubeconfig, capsys, pods, shown):
    # Regression (issue 19): the 2020 controller never sets Failed with restartPolicy ExitCode (it says
    # Restarting for ever), and Succeeded only once all MAX pods succeeded; `status --watch` never ended.
    api.list_namespaced_custom_object.return_value = {"items": [
        job_object("resnet", conditions=[cond("Running", 50), cond("Restarting", 40)])]}
    api.list_namespaced_pod.return_value = client.V1PodList(items=pods)
    api.read_node.return_value = node("node-a", "us-west-2a")
    code, out, err = cli(["list"], kubeconfig, capsys)
    assert code == 0, err
    assert out.splitlines()[1].split()[1] == shown


def test_status_goes_on_when_a_pods_node_cannot_serve_its_logs(api, kubeconfig, capsys):
    # Regression (issue 19, found on the control-plane tier): the API server reads logs from the pod's
    # kubelet; a pod whose node went with a spot reclaim answered 500 and `status` exited 1.
    api.get_namespaced_custom_object.return_value = job_object(conditions=[cond("Running", 5)])
    api.list_namespaced_pod.return_value = client.V1PodList(items=[pod("resnet-worker-0"),
                                                                   pod("resnet-worker-1", node="node-b")])
    api.list_namespaced_event.return_value = client.CoreV1EventList(items=[])
    api.read_node.side_effect = lambda self, name, **k: node(name, "us-west-2a")

    def logs(self, name, ns, **k):
        if name.endswith("-1"):
            raise ApiException(status=500, reason="Internal Server Error")
        return _ckpt_log(100)

    api.read_namespaced_pod_log.side_effect = logs
    code, out, err = cli(["status", "resnet"], kubeconfig, capsys)
    assert code == 0, err
    assert "Last checkpoint: step 100 (read from resnet-worker-0 log)" in out
