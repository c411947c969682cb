"""etcd-gate's Pods resolver (elastic_trainer/etcd_gate/resolvers.py) against a small API of its own on
127.0.0.1 that answers the paths the resolver asks with the objects a test puts there, 404 for the rest, and
403 for the kinds a test withholds (RBAC answers before routing, served or not). The real API server and the
gate's real Role: tests/controlplane/test_etcd_gate_resolver.py.

What it must hold: a pod resolves to its job's id only when the owning object, whatever its kind, is the
pod's (uid), has the pod's maker, and no job of another kind holds its name (a review found an ElasticJob
named after another user's batch Job, with her id copied, resolving to her rendezvous: the old resolver
read the owner only for batch Jobs).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest
from elastic_trainer.etcd_gate.resolvers import ANNOTATION, CREATED_BY, KINDS, Pods

NS = "jobs"
IP = "10.1.0.7"  # data only: the resolver's fieldSelector value, never dialled
VERSIONS = {"Job": "batch/v1", "ElasticJob": "elastic.pytorch.org/v1alpha1", "PyTorchJob": "kubeflow.org/v1"}
PLURAL = {kind: plural for (_, kind), (_, plural) in KINDS.items()}
GROUP_VERSION = {kind: gv for (_, kind), (gv, _) in KINDS.items()}


class Api:
    def __init__(self):
        self.objects: dict[str, dict] = {}  # path -> object
        self.pods: list[dict] = []
        self.forbidden: set[str] = set()  # kinds whose reads answer 403
        self.served = set(VERSIONS)  # kinds whose group's discovery answers 200

    def job(self, kind: str, name: str, uid: str, maker: str | None = "alice", rdzv: str | None = None) -> dict:
        annotations = {**({CREATED_BY: maker} if maker else {}), **({ANNOTATION: rdzv} if rdzv else {})}
        obj = {"metadata": {"name": name, "uid": uid, "annotations": annotations}}
        self.objects[f"{GROUP_VERSION[kind]}/namespaces/{NS}/{PLURAL[kind]}/{name}"] = obj
        return obj

    def pod(self, kind: str, name: str, uid: str, rdzv: str | None, maker: str | None = "alice") -> dict:
        annotations = {**({CREATED_BY: maker} if maker else {}), **({ANNOTATION: rdzv} if rdzv else {})}
        pod = {"metadata": {"name": f"{name}-0", "labels": {"torchfleet.io/role": "training"},
                            "annotations": annotations,
                            "ownerReferences": [{"apiVersion": VERSIONS[kind], "kind": kind, "name": name,
                                                 "uid": uid, "controller": True}]},
               "status": {"phase": "Running", "podIP": IP}}  # fmt: skip
        self.pods.append(pod)
        return pod

    def answer(self, path: str, query: dict) -> tuple[int, dict]:
        if path == f"/api/v1/namespaces/{NS}/pods":
            wanted = query.get("fieldSelector", [""])[0].removeprefix("status.podIP=")
            return 200, {"items": [p for p in self.pods if p["status"]["podIP"] == wanted]}
        for kind in VERSIONS:
            if path == GROUP_VERSION[kind]:
                return (200, {"kind": "APIResourceList"}) if kind in self.served else (404, {})
            if path.startswith(f"{GROUP_VERSION[kind]}/namespaces/"):
                if kind in self.forbidden:
                    return 403, {}
                if kind not in self.served:
                    return 404, {}
        return (200, self.objects[path]) if path in self.objects else (404, {})


@pytest.fixture
def api():
    state = Api()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            url = urlparse(self.path)
            code, body = state.answer(url.path, parse_qs(url.query))
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield state
    server.shutdown()
    server.server_close()


def gate(api: Api) -> Pods:
    return Pods(api.url, NS, cache_s=0)


@pytest.mark.parametrize("kind", list(VERSIONS))
def test_a_pod_resolves_to_its_own_jobs_id_for_every_kind(api, kind):
    api.job(kind, "hx-alice", "uid-a")
    api.pod(kind, "hx-alice", "uid-a", "hx-alice-0123abcd")
    assert gate(api)(IP) == "hx-alice-0123abcd"


@pytest.mark.parametrize("kind", ["ElasticJob", "PyTorchJob"])
def test_another_kinds_job_under_her_jobs_name_resolves_to_nothing(api, kind):
    """The review's attack: alice's batch Job runs; bob's ElasticJob (or PyTorchJob) of the same name carries her
    id. Before: bob's pod resolved to her id (the owner was read only for a batch Job). Now the name is held by
    two kinds, so neither pod gets the id (admission keeps a name to one kind: the job-names policies)."""
    api.job("Job", "hx-alice-52a2", "uid-alice", rdzv="hx-alice-52a2-0123abcd")
    api.job(kind, "hx-alice-52a2", "uid-bob", maker="bob")
    api.pod(kind, "hx-alice-52a2", "uid-bob", "hx-alice-52a2-0123abcd", maker="bob")
    assert gate(api)(IP) is None


def test_a_pod_whose_owner_is_gone_or_another_object_resolves_to_nothing(api):
    api.pod("ElasticJob", "ej", "uid-old", "ej-0123abcd")
    assert gate(api)(IP) is None  # no such ElasticJob
    api.job("ElasticJob", "ej", "uid-new")  # same name, another object
    assert gate(api)(IP) is None


def test_a_pod_of_another_maker_than_its_job_resolves_to_nothing(api):
    api.job("PyTorchJob", "pt", "uid-p", maker="alice")
    api.pod("PyTorchJob", "pt", "uid-p", "pt-0123abcd", maker="bob")
    assert gate(api)(IP) is None


def test_a_kind_not_served_holds_no_name_but_one_served_and_unreadable_refuses(api):
    api.job("Job", "j", "uid-j")
    api.pod("Job", "j", "uid-j", "j-0123abcd")
    api.served -= {"PyTorchJob"}
    api.forbidden |= {"PyTorchJob"}  # a kubeflow-less stack's Role has no pytorchjobs: 403, discovery 404
    assert gate(api)(IP) == "j-0123abcd"
    api.served |= {"PyTorchJob"}  # served, but the gate may not read it: it cannot tell, so it refuses
    assert gate(api)(IP) is None
    with pytest.raises(PermissionError, match="grant its Role get on pytorchjobs"):
        gate(api).resolve(IP)


def test_a_batch_job_pod_without_its_own_annotation_takes_the_jobs(api):
    api.job("Job", "j", "uid-j", rdzv="j-0123abcd")
    api.pod("Job", "j", "uid-j", None)
    assert gate(api)(IP) == "j-0123abcd"
    # Not for the operators' kinds: their pods carry it themselves (pod_template.py writes it on the template).
    api.pods.clear()
    api.job("ElasticJob", "e", "uid-e", rdzv="e-0123abcd")
    api.pod("ElasticJob", "e", "uid-e", None)
    assert gate(api)(IP) is None
