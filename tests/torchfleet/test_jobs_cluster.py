"""submit/list/status/logs/delete against a fake API: a real kubernetes ApiClient built from a real
kubeconfig, with the CustomObjectsApi/CoreV1Api/NetworkingV1Api methods mocked and their calls
asserted exactly. No API server is needed (the kubeconfig points at a closed local port).

These tests are about the ElasticJob's custom-resource path (``--operator torchelastic``, added by ``cli``
unless a test names an operator or a stack); the default `job` operator's batch/v1 path is
test_jobs_cluster_batch.py."""

import json
from datetime import UTC, datetime, timedelta
from unittest import mock

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from torchfleet.cli import main
from torchfleet.jobs import pod_template

NOW = datetime.now(UTC)
EJ = ("elastic.pytorch.org", "v1alpha1", "elastic-job", "elasticjobs")
PJ = ("kubeflow.org", "v1", "elastic-job", "pytorchjobs")
TIMEOUT = (10, 60)
SUBMIT = ["submit", "resnet", "--gpu", "t4", "--nodes", "2:4", "--image", "r/t:1", "--", "python", "train.py"]


@pytest.fixture(autouse=True)
def frozen_now():
    with mock.patch("torchfleet.jobs.commands._now", return_value=NOW):
        yield


@pytest.fixture
def kubeconfig(tmp_path):
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "test",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:9"}}],  # port 9: nothing listens
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "test", "context": {"cluster": "c", "user": "u"}}],
    }))
    return path


@pytest.fixture
def api():
    """Every API method the commands use, mocked (autospec: a wrong argument name fails)."""
    names = {
        client.CustomObjectsApi: ["create_namespaced_custom_object", "get_namespaced_custom_object",
                                  "list_namespaced_custom_object", "delete_namespaced_custom_object"],
        client.CoreV1Api: ["list_namespaced_pod", "list_namespaced_event", "read_node", "read_namespaced_pod_log"],
        client.NetworkingV1Api: ["create_namespaced_network_policy", "patch_namespaced_network_policy",
                                 "delete_namespaced_network_policy"],
        client.BatchV1Api: ["create_namespaced_job", "read_namespaced_job", "list_namespaced_job",
                            "delete_namespaced_job"],
        client.AppsV1Api: ["create_namespaced_deployment"],
    }
    names[client.CoreV1Api].append("create_namespaced_service")
    patches = {n: mock.patch.object(cls, n, autospec=True) for cls, ns in names.items() for n in ns}
    mocks = {n: p.start() for n, p in patches.items()}
    # No in-place (batch/v1) jobs unless a test says otherwise.
    mocks["read_namespaced_job"].side_effect = not_found()
    mocks["list_namespaced_job"].return_value = client.V1JobList(items=[])
    yield mock.Mock(**mocks)
    for p in patches.values():
        p.stop()


def cli(argv, kubeconfig, capsys, operator="torchelastic"):
    named = any(a.startswith(("--operator", "--stack")) for a in argv)
    code = main([argv[0], "--kubeconfig", str(kubeconfig), *([] if named or not operator else ["--operator", operator]),
                 *argv[1:]])
    out, err = capsys.readouterr()
    return code, out, err


def not_found():
    return ApiException(status=404, reason="Not Found")


def pod(name, job="resnet", phase="Running", node="node-a", restarts=0, age_s=300):
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels={"torchfleet.io/job": job, "torchfleet.io/role": "training"},
                                     creation_timestamp=NOW - timedelta(seconds=age_s)),
        spec=client.V1PodSpec(containers=[client.V1Container(name="elasticjob-worker")], node_name=node),
        status=client.V1PodStatus(phase=phase, container_statuses=[client.V1ContainerStatus(
            name="elasticjob-worker", image="r/t:1", image_id="", ready=True, restart_count=restarts)]),
    )


def job_object(name="resnet", kind="ElasticJob", conditions=(), failed=0, age_s=3600, zone=""):
    container = {"name": pod_template.CONTAINER_NAME["kubeflow" if kind == "PyTorchJob" else "torchelastic"],
                 "image": "r/t:1", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    worker = {"Worker": {"template": {"spec": {"containers": [container]}}}}
    if kind == "PyTorchJob":
        spec = {"elasticPolicy": {"minReplicas": 2, "maxReplicas": 4}, "pytorchReplicaSpecs": worker}
    else:
        spec = {"minReplicas": 2, "maxReplicas": 4, "replicaSpecs": worker}
    return {
        "apiVersion": "elastic.pytorch.org/v1alpha1", "kind": kind,
        "metadata": {"name": name, "namespace": "elastic-job", "uid": f"uid-{name}",
                     "creationTimestamp": (NOW - timedelta(seconds=age_s)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                     "labels": {"torchfleet.io/gpu": "t4"},
                     "annotations": {pod_template.ANNOTATION_ZONE: zone, pod_template.ANNOTATION_MACHINE: "g4dn.xlarge",
                                     pod_template.ANNOTATION_CHECKPOINTS: f"/mnt/shared/{name}/checkpoints"}},
        "spec": spec,
        "status": {"conditions": list(conditions), "replicaStatuses": {"Worker": {"failed": failed}}},
    }


def cond(type_, minutes_ago):
    when = (NOW - timedelta(minutes=minutes_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"type": type_, "status": "True", "lastTransitionTime": when}


def node(name, zone):
    return client.V1Node(metadata=client.V1ObjectMeta(name=name, labels={
        "topology.kubernetes.io/zone": zone, "node.kubernetes.io/instance-type": "g4dn.xlarge",
        "torchfleet.io/capacity": "spot"}))


# ---------------------------------------------------------------- submit


def test_submit_creates_the_network_policy_then_the_validated_job_which_then_owns_it(api, kubeconfig, capsys):
    # Regression (issue 19): the policy was created after the job, so a pod could start before it (and a
    # submit that died in between left a job whose pods could reach none of their peers).
    api.get_namespaced_custom_object.side_effect = not_found()
    order = mock.Mock()
    order.attach_mock(api.create_namespaced_network_policy, "policy")
    order.attach_mock(api.create_namespaced_custom_object, "job")
    order.attach_mock(api.patch_namespaced_network_policy, "adopt")
    api.create_namespaced_custom_object.side_effect = lambda self, *a, body, **k: {**body, "metadata": {
        **body["metadata"], "uid": "1234"}}
    code, out, err = cli(SUBMIT, kubeconfig, capsys)
    assert code == 0, err
    assert [c[0] for c in order.mock_calls] == ["policy", "job", "adopt"]
    (create,) = api.create_namespaced_custom_object.call_args_list
    _, *positional = create.args
    assert positional == list(EJ)
    body = create.kwargs["body"]
    assert body["kind"] == "ElasticJob" and body["metadata"]["name"] == "resnet"
    assert create.kwargs["field_validation"] == "Strict" and create.kwargs["field_manager"] == "torchfleet"
    assert create.kwargs["_request_timeout"] == TIMEOUT
    (policy_call,) = api.create_namespaced_network_policy.call_args_list
    _, namespace, policy = policy_call.args
    assert namespace == "elastic-job" and policy["metadata"]["name"] == "job-resnet"
    assert "ownerReferences" not in policy["metadata"]  # its owner does not exist yet
    api.patch_namespaced_network_policy.assert_called_once_with(
        mock.ANY, "job-resnet", "elastic-job", {"metadata": {"ownerReferences": [{
            "apiVersion": "elastic.pytorch.org/v1alpha1", "kind": "ElasticJob", "name": "resnet", "uid": "1234",
            "blockOwnerDeletion": False}]}}, field_manager="torchfleet", _content_type="application/merge-patch+json",
        _request_timeout=TIMEOUT)
    assert "submitted ElasticJob resnet to namespace elastic-job" in out


def test_submit_allow_egress_creates_both_policies_owned_by_the_job(api, kubeconfig, capsys):
    api.get_namespaced_custom_object.side_effect = not_found()
    api.create_namespaced_custom_object.side_effect = lambda self, *a, body, **k: {**body, "metadata": {
        **body["metadata"], "uid": "1234"}}
    code, _, err = cli([*SUBMIT[:2], "--allow-egress", "0.0.0.0/0", *SUBMIT[2:]], kubeconfig, capsys)
    assert code == 0, err
    calls = api.create_namespaced_network_policy.call_args_list
    assert [c.args[2]["metadata"]["name"] for c in calls] == ["job-resnet", "job-resnet-egress"]
    assert all(c.args[1] == "elastic-job" for c in calls)
    adopted = api.patch_namespaced_network_policy.call_args_list
    assert [c.args[1] for c in adopted] == ["job-resnet", "job-resnet-egress"]
    for c in adopted:
        assert [o["uid"] for o in c.args[3]["metadata"]["ownerReferences"]] == ["1234"]
    assert calls[1].args[2]["spec"]["policyTypes"] == ["Egress"]


def test_submit_egress_policy_failure_creates_no_job_and_removes_the_first_policy(api, kubeconfig, capsys):
    api.get_namespaced_custom_object.side_effect = not_found()
    api.create_namespaced_network_policy.side_effect = [None, ApiException(status=403, reason="Forbidden")]
    code, _, err = cli([*SUBMIT[:2], "--allow-egress", "10.0.0.0/8", *SUBMIT[2:]], kubeconfig, capsys)
    assert code == 1 and "403" in err
    api.create_namespaced_custom_object.assert_not_called()
    api.delete_namespaced_network_policy.assert_called_once_with(mock.ANY, "job-resnet", "elastic-job",
                                                                 _request_timeout=TIMEOUT)


def test_submit_kubeflow_goes_to_pytorchjobs(api, kubeconfig, capsys):
    api.get_namespaced_custom_object.side_effect = not_found()
    api.create_namespaced_custom_object.side_effect = lambda self, *a, body, **k: {**body, "metadata": {
        **body["metadata"], "uid": "1"}}
    code, _, err = cli([*SUBMIT[:2], "--operator", "kubeflow", *SUBMIT[2:]], kubeconfig, capsys)
    assert code == 0, err
    _, *positional = api.create_namespaced_custom_object.call_args.args
    assert positional == list(PJ)


def test_submit_taken_name_exits_2_and_creates_nothing(api, kubeconfig, capsys):
    api.get_namespaced_custom_object.return_value = job_object()
    code, out, err = cli(SUBMIT, kubeconfig, capsys)
    assert out == ""
    assert code == 2
    assert "NAME: job(s) resnet already exist in namespace elastic-job" in err
    api.create_namespaced_custom_object.assert_not_called()
    api.get_namespaced_custom_object.assert_called_once_with(mock.ANY, *EJ, "resnet", _request_timeout=TIMEOUT)


def test_submit_name_taken_in_a_race_exits_2_and_removes_the_policy_it_made(api, kubeconfig, capsys):
    api.get_namespaced_custom_object.side_effect = not_found()
    api.create_namespaced_custom_object.side_effect = ApiException(status=409, reason="Conflict")
    code, _, err = cli(SUBMIT, kubeconfig, capsys)
    assert code == 2 and "a job named 'resnet' already exists" in err
    api.delete_namespaced_network_policy.assert_called_once_with(mock.ANY, "job-resnet", "elastic-job",
                                                                 _request_timeout=TIMEOUT)
    api.patch_namespaced_network_policy.assert_not_called()


def test_sweep_refuses_all_when_one_name_is_taken(api, kubeconfig, capsys):
    api.get_namespaced_custom_object.side_effect = lambda self, *a, **k: (
        job_object("s-1") if a[-1] == "s-1" else (_ for _ in ()).throw(not_found()))
    code, _, err = cli(["sweep", "s", "--gpu", "t4", "--image", "r/t:1", "--param", "lr=1,2,3",
                        "--", "python", "t.py"], kubeconfig, capsys)
    assert code == 2 and "s-1 already exist" in err
    api.create_namespaced_custom_object.assert_not_called()


def test_submit_policy_failure_creates_no_job_and_exits_1(api, kubeconfig, capsys):
    api.get_namespaced_custom_object.side_effect = not_found()
    api.create_namespaced_network_policy.side_effect = ApiException(status=403, reason="Forbidden")
    code, _, err = cli(SUBMIT, kubeconfig, capsys)
    assert code == 1 and "403" in err
    api.create_namespaced_custom_object.assert_not_called()


def test_submit_adoption_failure_removes_the_job_and_its_policy_and_exits_1(api, kubeconfig, capsys):
    api.get_namespaced_custom_object.side_effect = not_found()
    api.create_namespaced_custom_object.side_effect = lambda self, *a, body, **k: {**body, "metadata": {
        **body["metadata"], "uid": "1"}}
    api.patch_namespaced_network_policy.side_effect = ApiException(status=403, reason="Forbidden")
    code, _, err = cli(SUBMIT, kubeconfig, capsys)
    assert code == 1 and "403" in err
    api.delete_namespaced_custom_object.assert_called_once_with(
        mock.ANY, *EJ, "resnet", propagation_policy="Background", _request_timeout=TIMEOUT)
    api.delete_namespaced_network_policy.assert_called_once_with(mock.ANY, "job-resnet", "elastic-job",
                                                                 _request_timeout=TIMEOUT)


def test_missing_crd_is_a_cluster_error(api, kubeconfig, capsys):
    api.get_namespaced_custom_object.side_effect = not_found()
    api.create_namespaced_custom_object.side_effect = not_found()  # no such resource type
    code, _, err = cli(SUBMIT, kubeconfig, capsys)
    assert code == 1
    assert "has no ElasticJob resource (elastic.pytorch.org): is the training layer deployed" in err
    api.delete_namespaced_network_policy.assert_called_once()  # the policy made for it goes too


def test_no_cluster_reachable_exits_1(kubeconfig, capsys):
    # No mocks: the client really connects to 127.0.0.1:9, where nothing listens.
    code, out, err = cli(["list"], kubeconfig, capsys)
    assert code == 1 and "no cluster reachable at https://127.0.0.1:9" in err
    assert out == ""


def test_unknown_context_exits_2(kubeconfig, capsys):
    code, _, err = cli(["list", "--context", "prod"], kubeconfig, capsys)
    assert code == 2 and "--context" in err and "prod" in err


def test_stack_without_pulumi_cli_exits_1(capsys, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")  # the Pulumi CLI is not installed on test machines anyway
    code = main(["list", "--stack", "aws-usw2"])
    err = capsys.readouterr().err
    assert code == 1 and "needs the Pulumi CLI" in err and "--kubeconfig" in err


def test_stack_outputs_give_kubeconfig_and_namespace(api, kubeconfig, capsys):
    outputs = {"kubeconfig": kubeconfig.read_text(), "namespace": "team-a", "etcdEndpoint": "etcd.team-a.svc:2379"}
    api.list_namespaced_custom_object.return_value = {"items": []}
    api.list_namespaced_pod.return_value = client.V1PodList(items=[])
    with mock.patch("torchfleet.jobs.target.read_stack_outputs", return_value=outputs) as read:
        code = main(["list", "--stack", "aws-usw2", "--operator", "torchelastic"])
    out, err = capsys.readouterr()
    assert code == 0, err
    read.assert_called_once_with("aws-usw2")
    api.list_namespaced_custom_object.assert_called_once_with(
        mock.ANY, "elastic.pytorch.org", "v1alpha1", "team-a", "elasticjobs", _request_timeout=TIMEOUT)
    assert "no ElasticJobs in namespace team-a" in out


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


def test_submit_with_stack_uses_the_deployed_outputs(api, kubeconfig, capsys):
    outputs = {"kubeconfig": kubeconfig.read_text(), "namespace": "team-a", "sharedClaim": "team-store",
               "etcdEndpoint": "etcd.team-a.svc:2379", "operator": "kubeflow"}
    api.get_namespaced_custom_object.side_effect = not_found()
    api.create_namespaced_custom_object.side_effect = lambda self, *a, body, **k: {**body, "metadata": {
        **body["metadata"], "uid": "1"}}
    with mock.patch("torchfleet.jobs.target.read_stack_outputs", return_value=outputs) as read:
        code = main(["submit", "resnet", "--stack", "aws-usw2", "--gpu", "t4", "--nodes", "2:8", "--image", "r/t:1",
                     "--", "python", "train.py"])
    out, err = capsys.readouterr()
    assert code == 0, err
    read.assert_called_once_with("aws-usw2")
    _, *positional = api.create_namespaced_custom_object.call_args.args
    assert positional == ["kubeflow.org", "v1", "team-a", "pytorchjobs"]
    body = api.create_namespaced_custom_object.call_args.kwargs["body"]
    pod = body["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    assert pod["volumes"][0]["persistentVolumeClaim"]["claimName"] == "team-store"
    assert body["spec"]["elasticPolicy"]["rdzvHost"] == "etcd.team-a.svc"
    assert "to namespace team-a" in out


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
