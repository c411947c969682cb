"""The commands through the *real* kubernetes client methods, with only the HTTP layer faked.

test_jobs_cluster.py mocks the API methods themselves, which skips the client's own argument
validation (kubernetes 37 validates every argument with pydantic) and its URL and body encoding.
A regression this file pins: `logs -f` passed a read timeout of None, which the mocked method
accepted and the real one refuses with a ValidationError. Here the request reaches
RESTClientObject.request, which records it and answers like an API server would.
"""

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml
from kubernetes.client import rest

from tests.harness import REPO
from torchfleet.cli import main as cli_main

NS = "elastic-job"


def main(argv):
    """The CLI with the ElasticJob operator, which most of these tests are about, unless one is named (the
    default `job` operator's path: the tests at the end)."""
    named = any(a.startswith("--operator") for a in argv) or "--recovery" in argv
    return cli_main([argv[0], *([] if named else ["--operator", "torchelastic"]), *argv[1:]])

JOBS = f"/apis/elastic.pytorch.org/v1alpha1/namespaces/{NS}/elasticjobs"
BATCH = f"/apis/batch/v1/namespaces/{NS}/jobs"  # --recovery inplace jobs
POLICIES = f"/apis/networking.k8s.io/v1/namespaces/{NS}/networkpolicies"
PODS = f"/api/v1/namespaces/{NS}/pods"
WHOAMI = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
USER = "alice@example.org"
NOW = datetime.now(UTC)
STAMP = (NOW - timedelta(minutes=90)).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Call:
    method: str
    path: str
    query: dict
    body: object
    timeout: object
    content_type: str | None = None
    host: str = ""  # the API server the client was pointed at


class FakeUrllib3Response:
    def __init__(self, status, data: bytes, content_type, chunks=None):
        self.status = status
        self.reason = {200: "OK", 201: "Created", 404: "Not Found", 409: "Conflict"}.get(status, "Error")
        self.data = data
        self.headers = {"content-type": content_type}
        self._chunks = chunks

    def stream(self, amt=2**16, decode_content=None):
        yield from self._chunks or [self.data]

    def release_conn(self):
        pass


class FakeApiServer:
    def __init__(self):
        self.routes = {}
        self.calls: list[Call] = []
        self.whoami = 0  # SelfSubjectReviews answered (not in calls)

    def on(self, method, path, status=200, payload=None, text=None, chunks=None):
        self.routes[method, path] = (status, payload, text, chunks)

    def request(self, _rest, method, url, headers=None, body=None, post_params=None, _request_timeout=None):
        parts = urlsplit(url)
        if (method, parts.path) == ("POST", WHOAMI):  # who the CLI is, asked once by a command that creates
            self.whoami += 1
            return rest.RESTResponse(FakeUrllib3Response(201, json.dumps({
                "apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview",
                "status": {"userInfo": {"username": USER}}}).encode(), "application/json"))
        self.calls.append(Call(method, parts.path, parse_qs(parts.query), body, _request_timeout,
                               (headers or {}).get("Content-Type"), parts.netloc))
        status, payload, text, chunks = self.routes.get(
            (method, parts.path), (404, {"kind": "Status", "message": f"{parts.path} not found"}, None, None))
        if callable(payload):  # an answer that depends on the query (a label selector)
            payload = payload(parse_qs(parts.query))
        if text is not None:
            return rest.RESTResponse(FakeUrllib3Response(status, text.encode(), "text/plain", chunks))
        return rest.RESTResponse(FakeUrllib3Response(status, json.dumps(payload).encode(), "application/json"))

    def paths(self):
        return [(c.method, c.path) for c in self.calls]


@pytest.fixture
def server(monkeypatch):
    fake = FakeApiServer()
    monkeypatch.setattr(rest.RESTClientObject, "request", lambda client, *a, **k: fake.request(client, *a, **k))
    return fake


@pytest.fixture
def kubeconfig(tmp_path):
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "test",
        "clusters": [{"name": "c", "cluster": {"server": "https://k8s.example.test:6443"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "test", "context": {"cluster": "c", "user": "u"}}],
    }))
    return str(path)


def recorded(document: dict) -> dict:
    """DOCUMENT as the CLI sends it: its maker recorded on it and its pod templates, its store mounts in the
    maker's folder (cluster.py JobClient.stamped)."""
    from torchfleet.jobs import store_folder
    from torchfleet.jobs.cluster import CREATED_BY, pod_templates

    document = json.loads(json.dumps(document))
    for metadata in [document["metadata"], *(t.setdefault("metadata", {}) for t in pod_templates(document))]:
        metadata.setdefault("annotations", {})[CREATED_BY] = USER
    return store_folder.place(document, USER)


def pod_json(name, phase="Running", node="node-a"):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "creationTimestamp": STAMP,
                         "labels": {"torchfleet.io/job": "resnet", "torchfleet.io/role": "training"}},
            "spec": {"nodeName": node, "containers": [{"name": "elasticjob-worker", "image": "r/t:1"}]},
            "status": {"phase": phase, "containerStatuses": [{"name": "elasticjob-worker", "image": "r/t:1",
                                                              "imageID": "", "ready": True, "restartCount": 1}]}}


def job_json(name="resnet"):
    return {"apiVersion": "elastic.pytorch.org/v1alpha1", "kind": "ElasticJob",
            "metadata": {"name": name, "namespace": NS, "uid": "u-1", "creationTimestamp": STAMP,
                         "labels": {"torchfleet.io/gpu": "t4"}, "annotations": {"torchfleet.io/zone": ""}},
            "spec": {"minReplicas": 2, "maxReplicas": 4, "replicaSpecs": {"Worker": {"template": {}}}},
            "status": {"conditions": [{"type": "Running", "status": "True", "lastTransitionTime": STAMP}]}}


def test_submit_sends_the_dry_run_documents(server, kubeconfig, capsys, monkeypatch):
    monkeypatch.setattr("torchfleet.jobs.spec.new_rdzv_id", lambda name: f"{name}-0000")  # new per submission
    flags = ["resnet", "--gpu", "t4", "--nodes", "2:4", "--image", "r/t:1", "--", "python", "train.py"]
    assert main(["submit", "--dry-run", *flags]) == 0
    job, policy = yaml.safe_load_all(capsys.readouterr().out)
    server.on("POST", JOBS, 201, {**job, "metadata": {**job["metadata"], "uid": "u-1"}})
    server.on("POST", POLICIES, 201, policy)
    server.on("PATCH", f"{POLICIES}/job-resnet", 200, policy)
    assert main(["submit", "--kubeconfig", kubeconfig, *flags]) == 0
    # the name is free as neither an ElasticJob nor a torchfleet Indexed Job; the policy first, then the job
    assert server.paths() == [("GET", f"{JOBS}/resnet"), ("GET", f"{BATCH}/resnet"), ("POST", POLICIES),
                              ("POST", JOBS), ("PATCH", f"{POLICIES}/job-resnet")]
    get, _, netpol, create, adopt = server.calls
    assert get.timeout == (10, 60)  # a dead endpoint fails fast
    assert create.body == recorded(job) and server.whoami == 1  # what the dry run printed, with its maker
    assert create.query == {"fieldManager": ["torchfleet"], "fieldValidation": ["Strict"]}
    assert "ownerReferences" not in netpol.body["metadata"]
    assert {k: v for k, v in netpol.body.items() if k != "metadata"} == {k: v for k, v in policy.items()
                                                                         if k != "metadata"}
    assert adopt.content_type == "application/merge-patch+json" and adopt.query == {"fieldManager": ["torchfleet"]}
    assert adopt.body == {"metadata": {"ownerReferences": [{
        "apiVersion": "elastic.pytorch.org/v1alpha1", "kind": "ElasticJob", "name": "resnet", "uid": "u-1",
        "blockOwnerDeletion": False}]}}


def test_submit_conflict_from_the_server_exits_2(server, kubeconfig, capsys):
    server.on("POST", POLICIES, 201, {})
    server.on("POST", JOBS, 409, {"kind": "Status", "reason": "AlreadyExists", "message": "exists"})
    server.on("DELETE", f"{POLICIES}/job-resnet", payload={"kind": "Status", "status": "Success"})
    code = main(["submit", "--kubeconfig", kubeconfig, "resnet", "--gpu", "t4", "--image", "r/t:1",
                 "--", "python", "t.py"])
    assert code == 2 and "already exists" in capsys.readouterr().err
    assert server.paths()[-1] == ("DELETE", f"{POLICIES}/job-resnet")  # the policy made for it goes


def test_list_status_logs_delete(server, kubeconfig, capsys):
    server.on("GET", JOBS, payload={"items": [job_json()]})
    server.on("GET", BATCH, payload={"apiVersion": "batch/v1", "kind": "JobList", "metadata": {}, "items": []})
    server.on("GET", f"{JOBS}/resnet", payload=job_json())
    pods = [pod_json("resnet-worker-0"), pod_json("resnet-worker-1", "Pending", None)]
    server.on("GET", PODS, payload={"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": pods})
    server.on("GET", "/api/v1/nodes/node-a", payload={"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": "node-a", "labels": {"topology.kubernetes.io/zone": "us-west-2b"}}})
    event = {"metadata": {"name": "e1", "namespace": NS}, "involvedObject": {"kind": "Pod", "name": "resnet-worker-1"},
             "reason": "FailedScheduling", "type": "Warning", "message": "0/3 nodes are available",
             "lastTimestamp": STAMP}
    server.on("GET", f"/api/v1/namespaces/{NS}/events", payload={"apiVersion": "v1", "kind": "EventList",
                                                                 "metadata": {}, "items": [event]})
    ckpt = '@@tf {"ev": "ckpt", "step": 3000, "gen": 4}'
    server.on("GET", f"{PODS}/resnet-worker-0/log", text=f"hello\n{ckpt}\n")
    server.on("DELETE", f"{JOBS}/resnet", payload={"kind": "Status", "status": "Success"})

    assert main(["list", "--kubeconfig", kubeconfig]) == 0
    row = capsys.readouterr().out.splitlines()[1].split()
    assert row[:5] == ["resnet", "Running", "1/2/4", "t4", "us-west-2b"] and row[6] == "2"
    pods_call = next(c for c in server.calls if c.path == PODS)
    assert pods_call.query == {"labelSelector": ["torchfleet.io/role=training"]}

    assert main(["status", "--kubeconfig", kubeconfig, "resnet"]) == 0
    status = capsys.readouterr().out
    assert "Last checkpoint: step 3000 (read from resnet-worker-0 log)" in status
    assert "FailedScheduling   resnet-worker-1   0/3 nodes are available" in status
    log_call = next(c for c in server.calls if c.path.endswith("/log"))
    assert log_call.query == {"container": ["elasticjob-worker"], "tailLines": ["2000"]}
    events = [c.query["fieldSelector"] for c in server.calls if c.path.endswith("/events")]
    assert events == [["involvedObject.name=resnet"], ["involvedObject.name=resnet-worker-0"],
                      ["involvedObject.name=resnet-worker-1"]]

    assert main(["logs", "--kubeconfig", kubeconfig, "resnet"]) == 0  # the event as a sentence (issue 22)
    assert capsys.readouterr().out == "hello\n--:--:--  checkpoint of step 3000 committed (generation 4)\n"
    assert main(["logs", "--kubeconfig", kubeconfig, "resnet", "--json"]) == 0  # as the trainer printed it
    assert capsys.readouterr().out == f"hello\n{ckpt}\n"

    assert main(["delete", "--kubeconfig", kubeconfig, "resnet"]) == 0
    delete = server.calls[-1]
    assert (delete.method, delete.path, delete.query) == ("DELETE", f"{JOBS}/resnet",
                                                          {"propagationPolicy": ["Background"]})


def test_logs_follow_through_the_real_client(server, kubeconfig, capsys):
    server.on("GET", f"{JOBS}/resnet", payload=job_json())
    server.on("GET", PODS, payload={"apiVersion": "v1", "kind": "PodList", "metadata": {},
                                    "items": [pod_json("resnet-worker-0")]})
    server.on("GET", f"{PODS}/resnet-worker-0/log", text="", chunks=[b"step 1\nste", b"p 2\n"])
    assert main(["logs", "--kubeconfig", kubeconfig, "resnet", "-f"]) == 0
    assert capsys.readouterr().out == "step 1\nstep 2\n"
    follow = server.calls[-1]
    assert follow.query == {"container": ["elasticjob-worker"], "follow": ["true"]}
    assert follow.timeout[0] > 0 and follow.timeout[1] >= 24 * 3600


def test_missing_job_from_the_server_exits_2(server, kubeconfig, capsys):
    assert main(["status", "--kubeconfig", kubeconfig, "ghost"]) == 2
    assert "NAME: no ElasticJob 'ghost'" in capsys.readouterr().err
    assert server.paths() == [("GET", f"{JOBS}/ghost"), ("GET", f"{BATCH}/ghost")]


# ---------------------------------------------------------------- --recovery inplace (issue 14)

INPLACE = ["pair", "--gpu", "t4", "--nodes", "2:3", "--image", "r/t:1", "--recovery", "inplace", "--",
           "python", "train.py"]
DEPLOYMENTS = f"/apis/apps/v1/namespaces/{NS}/deployments"
SERVICES = f"/api/v1/namespaces/{NS}/services"


def indexed_job_json(name="pair", labels=None):
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": NS, "uid": "u-2", "creationTimestamp": STAMP,
                         "labels": {"torchfleet.io/recovery": "inplace", "torchfleet.io/gpu": "t4"}
                         if labels is None else labels,
                         "annotations": {"torchfleet.io/min-nodes": "2", "torchfleet.io/zone": ""}},
            "spec": {"completions": 3, "parallelism": 3, "completionMode": "Indexed",
                     "template": {"spec": {"containers": [{"name": "worker", "image": "r/t:1"}]}}},
            "status": {"active": 2, "failed": 1}}


def indexed_pod_json(index, suffix, phase="Running"):
    pod = pod_json(f"pair-{index}-{suffix}", phase)
    pod["metadata"]["labels"] = {"torchfleet.io/job": "pair", "torchfleet.io/role": "training",
                                 "batch.kubernetes.io/job-completion-index": str(index)}
    pod["metadata"]["creationTimestamp"] = STAMP
    pod["spec"]["containers"][0]["name"] = "worker"
    pod["status"]["containerStatuses"][0]["name"] = "worker"
    return pod


def test_submit_inplace_sends_the_job_then_everything_it_owns(server, kubeconfig, capsys):
    assert main(["submit", "--dry-run", *INPLACE]) == 0
    job, *owned = yaml.safe_load_all(capsys.readouterr().out)
    server.on("POST", BATCH, 201, {**job, "metadata": {**job["metadata"], "uid": "u-2"}})
    for path, answer in zip((POLICIES, SERVICES, DEPLOYMENTS), (owned[0], owned[2], owned[3]), strict=True):
        server.on("POST", path, 201, answer)
    for policy in owned[:2]:
        server.on("PATCH", f"{POLICIES}/{policy['metadata']['name']}", 200, policy)
    assert main(["submit", "--kubeconfig", kubeconfig, *INPLACE]) == 0
    out = capsys.readouterr().out
    assert "submitted Job pair with its Lighthouse (recovery inplace)" in out
    # the policies first (issue 19), then the job, which then owns them, then the Lighthouse owned from the start
    assert server.paths() == [("GET", f"{BATCH}/pair"), ("POST", POLICIES), ("POST", POLICIES), ("POST", BATCH),
                              ("PATCH", f"{POLICIES}/job-pair"), ("PATCH", f"{POLICIES}/job-pair-lighthouse"),
                              ("POST", SERVICES), ("POST", DEPLOYMENTS)]
    policies, (create,), adopted, children = server.calls[1:3], server.calls[3:4], server.calls[4:6], server.calls[6:]
    assert create.body == recorded(job)
    # the store under the maker's folder: a folder named only for the job went to the name's next taker (issue 30)
    mounts = [m for m in create.body["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
              if m["name"] == "shared"]  # fmt: skip
    assert [(m["subPath"], m["mountPath"]) for m in mounts] == [("@alice@example.org/pair", "/mnt/shared/pair")]
    assert create.query == {"fieldManager": ["torchfleet"], "fieldValidation": ["Strict"]}
    owner = [{"apiVersion": "batch/v1", "kind": "Job", "name": "pair", "uid": "u-2", "blockOwnerDeletion": False}]
    for call, document in zip(policies + children, owned, strict=True):
        assert call.body["metadata"].get("ownerReferences", owner) == owner  # deleting the job deletes it
        assert call.body["spec"] == recorded(document)["spec"]
        assert call.query == {"fieldManager": ["torchfleet"], "fieldValidation": ["Strict"]}
    assert [c.body["metadata"]["ownerReferences"] for c in adopted] == [owner, owner]


def test_a_lighthouse_the_cluster_refuses_leaves_nothing_behind(server, kubeconfig, capsys):
    assert main(["submit", "--dry-run", *INPLACE]) == 0
    _, policy, _, service, _ = yaml.safe_load_all(capsys.readouterr().out)
    server.on("POST", BATCH, 201, indexed_job_json())
    server.on("POST", POLICIES, 201, policy)
    server.on("PATCH", f"{POLICIES}/job-pair", 200, policy)
    server.on("PATCH", f"{POLICIES}/job-pair-lighthouse", 200, policy)
    server.on("DELETE", f"{POLICIES}/job-pair", payload={"kind": "Status", "status": "Success"})
    server.on("DELETE", f"{POLICIES}/job-pair-lighthouse", payload={"kind": "Status", "status": "Success"})
    server.on("POST", SERVICES, 201, service)
    server.on("POST", DEPLOYMENTS, 403, {"kind": "Status", "message": "deployments.apps is forbidden"})
    server.on("DELETE", f"{BATCH}/pair", payload={"kind": "Status", "status": "Success"})
    assert main(["submit", "--kubeconfig", kubeconfig, *INPLACE]) == 1
    assert "deployments.apps is forbidden" in capsys.readouterr().err
    # the job goes, and with it (owner references) the policies and Service already made; the policies are
    # also removed by name (one not yet adopted would otherwise stay)
    delete = next(c for c in server.calls if c.method == "DELETE" and c.path.startswith(BATCH))
    assert (delete.method, delete.path, delete.query) == ("DELETE", f"{BATCH}/pair",
                                                          {"propagationPolicy": ["Background"]})
    assert [c.path for c in server.calls if c.method == "DELETE" and c.path.startswith(POLICIES)] == [
        f"{POLICIES}/job-pair", f"{POLICIES}/job-pair-lighthouse"]


def test_list_logs_delete_an_inplace_job(server, kubeconfig, capsys):
    server.on("GET", JOBS, payload={"items": []})
    server.on("GET", BATCH, payload={"apiVersion": "batch/v1", "kind": "JobList", "metadata": {},
                                     "items": [indexed_job_json()]})
    server.on("GET", f"{BATCH}/pair", payload=indexed_job_json())
    # index 1's replacement runs beside the pod it replaced
    pods = [indexed_pod_json(0, "abcde"), indexed_pod_json(1, "fghij", "Failed"), indexed_pod_json(1, "klmno")]
    server.on("GET", PODS, payload={"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": pods})
    server.on("GET", "/api/v1/nodes/node-a", payload={"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": "node-a", "labels": {"topology.kubernetes.io/zone": "us-west-2b"}}})
    server.on("GET", f"{PODS}/pair-1-klmno/log", text="group 1 trains\n")
    server.on("DELETE", f"{BATCH}/pair", payload={"kind": "Status", "status": "Success"})

    assert main(["list", "--kubeconfig", kubeconfig]) == 0
    row = capsys.readouterr().out.splitlines()[1].split()
    assert row[:5] == ["pair", "Running", "2/2/3", "t4", "us-west-2b"]
    list_call = next(c for c in server.calls if c.path == BATCH)
    assert list_call.query == {"labelSelector": ["torchfleet.io/recovery in (restart,inplace)"]}

    assert main(["logs", "--kubeconfig", kubeconfig, "pair", "--rank", "1"]) == 0
    assert capsys.readouterr().out == "group 1 trains\n"
    log_call = next(c for c in server.calls if c.path.endswith("/log"))
    assert log_call.query["container"] == ["worker"]

    assert main(["delete", "--kubeconfig", kubeconfig, "pair"]) == 0
    assert "deleted Job pair" in capsys.readouterr().out
    delete = server.calls[-1]
    # Background: a batch Job's API orphans its pods unless told otherwise
    assert (delete.method, delete.path, delete.query) == ("DELETE", f"{BATCH}/pair",
                                                          {"propagationPolicy": ["Background"]})


def test_a_batch_job_torchfleet_did_not_submit_is_not_deleted(server, kubeconfig, capsys):
    # the platform's own store-owner Job lives in the namespace too
    server.on("GET", f"{BATCH}/store-owner", payload=indexed_job_json("store-owner", labels={"app": "store-owner"}))
    assert main(["delete", "--kubeconfig", kubeconfig, "store-owner"]) == 2
    assert "no ElasticJob 'store-owner'" in capsys.readouterr().err
    assert not [c for c in server.calls if c.method == "DELETE" and c.path.startswith(BATCH)]


def test_status_of_an_inplace_job_shows_its_lighthouse(server, kubeconfig, capsys):
    server.on("GET", f"{BATCH}/pair", payload=indexed_job_json())
    lighthouse = pod_json("pair-lighthouse-5d8f7-x2x9z", node="manager-1")
    lighthouse["metadata"]["labels"] = {"torchfleet.io/lighthouse": "pair"}
    lighthouse["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    pods = {"torchfleet.io/job=pair": [indexed_pod_json(0, "abcde"), indexed_pod_json(1, "fghij")],
            "torchfleet.io/lighthouse=pair": [lighthouse]}
    server.on("GET", PODS, payload=lambda query: {"apiVersion": "v1", "kind": "PodList", "metadata": {},
                                                  "items": pods[query["labelSelector"][0]]})
    server.on("GET", f"/api/v1/namespaces/{NS}/events", payload={"apiVersion": "v1", "kind": "EventList",
                                                                 "metadata": {}, "items": []})
    for name in ("pair-0-abcde", "pair-1-fghij"):
        server.on("GET", f"{PODS}/{name}/log", text="")
    assert main(["status", "--kubeconfig", kubeconfig, "pair"]) == 0
    out = capsys.readouterr().out
    assert ("Recovery:        inplace (survivors keep training); Lighthouse: pair-lighthouse-5d8f7-x2x9z Running, "
            "ready on manager-1") in out
    assert "Nodes:           2 running (min 2, max 3)" in out  # the Lighthouse is not a node of the job
    events = [c.query["fieldSelector"][0] for c in server.calls if c.path.endswith("/events")]
    assert "involvedObject.name=pair-lighthouse-5d8f7-x2x9z" in events  # e.g. it cannot be scheduled

    pods["torchfleet.io/lighthouse=pair"] = []
    assert main(["status", "--kubeconfig", kubeconfig, "pair", "-o", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["recovery"], shown["lighthouse"], shown["kind"]) == ("inplace", [], "Job")


# ---------------------------------------------------------------- the local stack (issue 22)


@pytest.mark.parametrize("context", [None, "other"])
def test_list_of_the_local_stack_needs_no_pulumi_cli(server, tmp_path, capsys, monkeypatch, context):
    """Regression (issue 22): `list --stack local` read the kubeconfig from the stack's outputs through the
    Pulumi CLI, absent on a researcher's laptop, although the local stack deploys to the kubeconfig's current
    context (components/clouds/local.py), or to the context its kubernetes:context names."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "kind",
        "clusters": [{"name": "kind", "cluster": {"server": "https://kind.example.test:6443"}},
                     {"name": "other", "cluster": {"server": "https://other.example.test:6443"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "kind", "context": {"cluster": "kind", "user": "u"}},
                     {"name": "other", "context": {"cluster": "other", "user": "u"}}],
    }))
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    # the client reads $KUBECONFIG once, when it is imported: as it would have in a new process
    monkeypatch.setattr("kubernetes.config.kube_config.KUBE_CONFIG_DEFAULT_LOCATION", str(kubeconfig))
    monkeypatch.delenv("TORCHFLEET_CONTEXT", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")  # no Pulumi CLI
    stack = "local"
    if context:
        stack = str(tmp_path / "Pulumi.local.yaml")
        Path(stack).write_text((REPO / "stacks" / "Pulumi.local.yaml").read_text()
                               + f"  kubernetes:context: {context}\n")
    server.on("GET", BATCH, payload={"apiVersion": "batch/v1", "kind": "JobList", "metadata": {}, "items": []})
    server.on("GET", PODS, payload={"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": []})
    code = cli_main(["list", "--stack", stack])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.strip() == "no Jobs in namespace elastic-job"
    assert {c.host for c in server.calls} == {f"{context or 'kind'}.example.test:6443"}


def test_logs_prints_progress_events_as_readable_lines_and_json_behind_a_flag(server, kubeconfig, capsys):
    """Regression (issue 22): `logs` showed one JSON line per step. Readable by default: each step with its
    loss, speed and world size, each lifecycle event as a sentence; the script's own lines unchanged."""
    events = [{"ev": "start", "wall": 1000.0, "world": 2, "gen": 1, "device": "cpu"},
              {"ev": "step", "wall": 1001.0, "step": 1, "loss": 2.5, "world": 2, "gen": 1},
              {"ev": "step", "wall": 1003.0, "step": 5, "loss": 1.25, "world": 2, "gen": 1},
              {"ev": "ckpt_writing", "wall": 1003.1, "step": 5},
              {"ev": "ckpt", "wall": 1003.2, "step": 5, "gen": 1, "reason": "periodic"},
              {"ev": "resumed", "wall": 1010.0, "step": 5, "world": 1, "gen": 2, "from_gen": 1},
              {"ev": "step", "wall": 1011.0, "step": 6, "loss": None, "world": 1, "gen": 2}]
    text = "epoch 0 from the script\n" + "".join(f"@@tf {json.dumps(e)}\n" for e in events)
    server.on("GET", f"{JOBS}/resnet", payload=job_json())
    server.on("GET", PODS, payload={"apiVersion": "v1", "kind": "PodList", "metadata": {},
                                    "items": [pod_json("resnet-worker-0")]})
    server.on("GET", f"{PODS}/resnet-worker-0/log", text=text)
    assert main(["logs", "--kubeconfig", kubeconfig, "resnet"]) == 0
    lines = capsys.readouterr().out.splitlines()
    clock = [datetime.fromtimestamp(e["wall"]).strftime("%H:%M:%S") for e in events]
    assert lines == [
        "epoch 0 from the script",
        f"{clock[0]}  started from scratch, world size 2 on cpu",
        f"{clock[1]}  step 1   loss 2.5   world 2",
        f"{clock[2]}  step 5   loss 1.25   2.00 steps/s   world 2",  # 4 steps in 2 s
        f"{clock[4]}  checkpoint of step 5 committed (generation 1, periodic)",  # no line for ckpt_writing
        f"{clock[5]}  resumed from the checkpoint of step 5, world size 1",
        f"{clock[6]}  step 6   loss -   world 1",  # a new group: no speed across the restart
    ]
    assert main(["logs", "--kubeconfig", kubeconfig, "resnet", "--json"]) == 0
    assert capsys.readouterr().out == text
