"""Whose objects, on the CLI's side (k8s/base/cluster/validatingadmissionpolicy-owner.yaml, -job-names.yaml):
everything a submit creates records who made it, the owner policy's refusal is passed on as what it is, a
delete of several jobs deletes the caller's and names the others' makers, and a taken name says whose it is.
Against the fake API (fake_cluster.py); the policies themselves: tests/controlplane/test_ownership.py."""

import json
from unittest import mock

from kubernetes.client.exceptions import ApiException

from tests.torchfleet.fake_cluster import EJ, RESEARCHER, TIMEOUT, cli, job_object, not_found
from torchfleet.jobs.cluster import CREATED_BY

SUBMIT = ["submit", "resnet", "--gpu", "t4", "--nodes", "2:4", "--image", "r/t:1", "--", "python", "train.py"]
INPLACE = [*SUBMIT[:-3], "--recovery", "inplace", *SUBMIT[-3:]]


def _refusal(policy: str, message: str) -> ApiException:
    """A 403 as the API server words a ValidatingAdmissionPolicy's denial."""
    error = ApiException(status=403, reason="Forbidden")
    error.body = json.dumps({"kind": "Status", "status": "Failure", "reason": "Forbidden", "code": 403, "message":
                             f"jobs.batch \"x\" is forbidden: ValidatingAdmissionPolicy '{policy}' with binding "
                             f"'{policy}' denied request: {message}"})
    return error


def _made(api) -> None:
    api.create_namespaced_custom_object.side_effect = lambda self, *a, body, **k: {**body, "metadata": {
        **body["metadata"], "uid": "1234"}}
    api.get_namespaced_custom_object.side_effect = not_found()


def test_every_object_a_submit_creates_records_its_maker_and_its_templates_too(api, kubeconfig, capsys):
    _made(api)
    code, _, err = cli(SUBMIT, kubeconfig, capsys)
    assert code == 0, err
    body = api.create_namespaced_custom_object.call_args.kwargs["body"]
    assert body["metadata"]["annotations"][CREATED_BY] == RESEARCHER
    for replica in body["spec"]["replicaSpecs"].values():
        assert replica["template"]["metadata"]["annotations"][CREATED_BY] == RESEARCHER
    (policy,) = [c.args[2] for c in api.create_namespaced_network_policy.call_args_list]
    assert policy["metadata"]["annotations"][CREATED_BY] == RESEARCHER
    api.create_self_subject_review.assert_called_once()  # asked once per command


def test_an_inplace_jobs_lighthouse_and_workdir_record_it_too(api, kubeconfig, capsys, tmp_path):
    (tmp_path / "train.py").write_text("print('hi')\n")
    _made(api)
    api.read_namespaced_job.side_effect = not_found()
    api.create_namespaced_job.side_effect = lambda self, ns, body, **k: {**body, "metadata": {
        **body["metadata"], "uid": "1234"}}
    with mock.patch("kubernetes.client.CoreV1Api.create_namespaced_config_map", autospec=True) as maps, \
            mock.patch("kubernetes.client.CoreV1Api.patch_namespaced_config_map", autospec=True):
        code, _, err = cli([*INPLACE[:-3], "--workdir", str(tmp_path), *INPLACE[-3:]], kubeconfig, capsys,
                           operator="job")
    assert code == 0, err
    made = [c.args[2] for c in maps.call_args_list]
    made += [c.args[2] for c in api.create_namespaced_deployment.call_args_list]
    made += [c.args[2] for c in api.create_namespaced_service.call_args_list]
    job = api.create_namespaced_job.call_args.args[2]
    assert {d["kind"] for d in made} == {"ConfigMap", "Deployment", "Service"}
    for document in [*made, job]:
        assert document["metadata"]["annotations"][CREATED_BY] == RESEARCHER, document["kind"]
    for workload in (job, *[d for d in made if d["kind"] == "Deployment"]):
        assert workload["spec"]["template"]["metadata"]["annotations"][CREATED_BY] == RESEARCHER


def test_another_researchers_job_is_not_deleted_and_says_whose_it_is(api, kubeconfig, capsys):
    why = ("ElasticJob theirs was made by bob: only its maker or an administrator may change or delete it; ask bob "
           "or an administrator")
    api.delete_namespaced_custom_object.side_effect = [_refusal("torchfleet-owner", why), None]
    code, out, err = cli(["delete", "theirs", "mine"], kubeconfig, capsys)
    assert code == 1, err
    assert "deleted ElasticJob mine" in out  # the refusal of one does not stop the rest
    assert f"not deleted: {why}" in err and "ValidatingAdmissionPolicy" not in err, err


def test_a_refusal_of_another_policy_stays_a_cluster_refusal(api, kubeconfig, capsys):
    api.delete_namespaced_custom_object.side_effect = _refusal("torchfleet-researcher-limits", "only objects ...")
    code, _, err = cli(["delete", "resnet"], kubeconfig, capsys)
    assert code == 1 and "403 Forbidden" in err and "torchfleet-researcher-limits" in err, err


def test_a_taken_job_name_names_its_maker(api, kubeconfig, capsys):
    taken = job_object()
    taken["metadata"]["annotations"][CREATED_BY] = "bob"
    api.get_namespaced_custom_object.return_value = taken
    code, _, err = cli(SUBMIT, kubeconfig, capsys)
    assert code == 2 and "NAME: job(s) resnet (made by bob) already exist" in err, err
    api.create_namespaced_custom_object.assert_not_called()


def test_a_squatted_derived_name_exits_2_naming_it_and_leaves_nothing(api, kubeconfig, capsys):
    """Someone made job-resnet (this job's network policy) first: the submit stops before its job, saying so."""
    api.get_namespaced_custom_object.side_effect = not_found()
    api.create_namespaced_network_policy.side_effect = ApiException(status=409, reason="Conflict")
    code, _, err = cli(SUBMIT, kubeconfig, capsys)
    assert code == 2, err
    assert "NAME: a NetworkPolicy named 'job-resnet' already exists" in err and "choose another job name" in err
    api.create_namespaced_custom_object.assert_not_called()


def test_a_derived_name_of_anothers_job_is_passed_on(api, kubeconfig, capsys):
    why = "resnet-lighthouse is a name of job resnet's own objects (made by bob): only its maker or an administrator"
    _made(api)
    api.read_namespaced_job.side_effect = not_found()
    api.create_namespaced_job.side_effect = lambda self, ns, body, **k: {**body, "metadata": {
        **body["metadata"], "uid": "1234"}}
    api.create_namespaced_service.side_effect = _refusal("torchfleet-job-names", why)
    code, _, err = cli(INPLACE, kubeconfig, capsys, operator="job")
    assert code == 1 and why in err, err
    api.delete_namespaced_job.assert_called_once_with(mock.ANY, "resnet", "elastic-job",
                                                      propagation_policy="Background", _request_timeout=TIMEOUT)
    assert EJ  # the ElasticJob path is the other tests'
