"""submit and sweep against the fake API (fake_cluster.py: a real ApiClient, the API methods mocked and their
calls asserted exactly), and how a command reaches the cluster or says why it cannot.

These tests are about the ElasticJob's custom-resource path (``--operator torchelastic``, added by ``cli``
unless a test names an operator or a stack); the default `job` operator's batch/v1 path is
test_jobs_cluster_batch.py; list/status/logs/delete are test_jobs_cluster.py."""

from unittest import mock

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.torchfleet.fake_cluster import EJ, PJ, TIMEOUT, cli, frozen_now, job_object, not_found  # noqa: F401 (frozen_now)
from torchfleet.cli import main

SUBMIT = ["submit", "resnet", "--gpu", "t4", "--nodes", "2:4", "--image", "r/t:1", "--", "python", "train.py"]


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


def test_stack_without_pulumi_cli_exits_2(capsys, monkeypatch):
    """This machine's setup, as a missing kubeconfig is: exit 2 (issue 32; it was 1, a cluster's failure)."""
    monkeypatch.setenv("PATH", "/nonexistent")  # the Pulumi CLI is not installed on test machines anyway
    code = main(["list", "--stack", "aws-usw2"])
    err = capsys.readouterr().err
    assert code == 2 and "needs the Pulumi CLI" in err and "--kubeconfig" in err


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
