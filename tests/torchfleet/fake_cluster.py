"""The fake cluster the command tests share: a real kubernetes ApiClient built from a real kubeconfig, with the
API methods the commands call mocked (autospec: a wrong argument name fails) and their calls asserted by the
tests; no API server is needed (the kubeconfig points at a closed local port). Also the API objects those tests
return (pods, ElasticJobs, conditions, nodes) and ``cli``, which runs a command against it.

conftest.py makes ``api`` and ``kubeconfig`` every test's fixtures here; a module that wants the frozen clock
imports ``frozen_now`` (autouse where it is imported).
"""

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
RESEARCHER = "alice@example.org"  # the username the fake cluster authenticates the CLI as


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
    # Who the CLI is (the SelfSubjectReview every created object records: cluster.py JobClient.creator).
    names[client.AuthenticationV1Api] = ["create_self_subject_review"]
    patches = {n: mock.patch.object(cls, n, autospec=True) for cls, ns in names.items() for n in ns}
    mocks = {n: p.start() for n, p in patches.items()}
    # No in-place (batch/v1) jobs unless a test says otherwise.
    mocks["read_namespaced_job"].side_effect = not_found()
    mocks["list_namespaced_job"].return_value = client.V1JobList(items=[])
    mocks["create_self_subject_review"].return_value = client.V1SelfSubjectReview(
        status=client.V1SelfSubjectReviewStatus(user_info=client.V1UserInfo(username=RESEARCHER)))
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
