"""Who is asking: a connection's source address to the rendezvous id its pod may use.

- ``Static``: a fixed table (local runs, where every node is a loopback address of its own).
- ``Pods``: in a cluster, the Running pod of the namespace that holds the address, if it is a
  training pod (label torchfleet.io/role=training) with a torchfleet.io/rdzv-id annotation, on
  itself (the CLI writes it on every operator's pod template: torchfleet/jobs/pod_template.py; an
  ElasticJob's or PyTorchJob's pods have no batch/v1 Job) or on the batch/v1 Job that controls it
  (job_metadata; Jobs submitted before the pods carried it). Its Role: list pods, get jobs
  (k8s/base/etcd-gate/role.yaml).
  Training pods run with no API token (k8s/base/cluster/validatingadmissionpolicy-researcher-limits.yaml),
  so a pod's code cannot change what it resolves to; pod IPs are the CNI's, not the pod's to choose
  (hostNetwork pods are refused by Pod Security "restricted"). An address held by no such pod, or by
  pods that disagree, resolves to nothing and is refused everything. Answers are kept ``cache_s``:
  a pod that ends and whose IP goes to another pod within that time is the one window.
  The id must be its controlling job's: the pod's controller ownerReference (set by the Job controller
  or the operator, never by a researcher: the admission policy refuses training-labelled pods and
  rdzv-id annotations on pods researchers make) names a Job, ElasticJob or PyTorchJob, and the id is
  ``<that name>-<8 hex>`` (torchfleet/jobs/spec.py new_rdzv_id) or, for an ElasticJob only, the name
  itself (the controller's own --rdzv_id, as k8s/examples use it). A batch/v1 Job is read and its uid
  compared with the reference's. So an annotation naming another job's id resolves to nothing even
  where admission let it through (k8s/base/cluster/validatingadmissionpolicy-researcher-limits.yaml
  checks the same form).
"""

from __future__ import annotations

import json
import re
import ssl
import threading
import time
import urllib.request
from pathlib import Path
from urllib.parse import quote

ANNOTATION = "torchfleet.io/rdzv-id"  # torchfleet/jobs/pod_template.py ANNOTATION_RDZV_ID
ROLE = ("torchfleet.io/role", "training")  # components/kube/manifests.py training_pod_labels
SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
# The kinds whose pods train, by the ownerReference their controller writes (apiVersion's group).
JOB_OWNERS = {("batch", "Job"), ("elastic.pytorch.org", "ElasticJob"), ("kubeflow.org", "PyTorchJob")}
SUFFIX = re.compile(r"-[0-9a-f]{8}")


def controller(meta: dict) -> dict | None:
    """The pod's controller ownerReference if it is a training job's (a Job, ElasticJob or PyTorchJob)."""
    for owner in meta.get("ownerReferences") or []:
        group = str(owner.get("apiVersion", "")).partition("/")[0]
        if owner.get("controller") and (group, owner.get("kind")) in JOB_OWNERS:
            return owner
    return None


def owns(owner: dict, run_id: str) -> bool:
    """Whether run_id is the owning job's own: <name>-<8 hex>, or an ElasticJob's bare name."""
    name = str(owner.get("name", ""))
    if not name:
        return False
    if run_id == name:
        return owner.get("kind") == "ElasticJob"
    return run_id.startswith(name + "-") and SUFFIX.fullmatch(run_id[len(name) :]) is not None


class Static:
    def __init__(self, table: dict[str, str]):
        self.table = dict(table)

    def __call__(self, address: str) -> str | None:
        return self.table.get(address)


class Pods:
    def __init__(
        self, api: str, namespace: str, token: str | None = None, ca_file: str | None = None, cache_s: float = 5.0
    ):
        if not api.startswith(("https://", "http://")):
            raise ValueError(f"api must be an http(s):// URL of the API server, got {api!r}")
        self.api, self.namespace, self.cache_s = api.rstrip("/"), namespace, cache_s
        self.token = token
        self.context = ssl.create_default_context(cafile=ca_file) if api.startswith("https") else None
        self._cache: dict[str, tuple[float, str | None]] = {}
        self._lock = threading.Lock()

    @classmethod
    def in_cluster(cls, namespace: str | None = None) -> Pods:
        import os

        host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"]
        return cls(
            f"https://{host}:{port}",
            namespace or (SERVICE_ACCOUNT / "namespace").read_text().strip(),
            token=(SERVICE_ACCOUNT / "token").read_text().strip(),
            ca_file=str(SERVICE_ACCOUNT / "ca.crt"),
        )

    def _get(self, path: str) -> dict:
        request = urllib.request.Request(self.api + path)  # noqa: S310 (http(s) only: __init__)
        if self.token:
            # Re-read in a cluster: projected tokens rotate (the kubelet refreshes the file).
            token = self.token
            if (SERVICE_ACCOUNT / "token").exists():
                token = (SERVICE_ACCOUNT / "token").read_text().strip()
            request.add_header("Authorization", f"Bearer {token}")
        with urllib.request.urlopen(request, timeout=10, context=self.context) as response:  # noqa: S310 (http(s) only: __init__)
            return json.load(response)

    def resolve(self, address: str) -> str | None:
        ns = quote(self.namespace)
        pods = self._get(f"/api/v1/namespaces/{ns}/pods?fieldSelector=" + quote(f"status.podIP={address}"))["items"]
        found = set()
        for pod in pods:
            meta, status = pod["metadata"], pod.get("status", {})
            if status.get("phase") != "Running" or (meta.get("labels") or {}).get(ROLE[0]) != ROLE[1]:
                continue
            owner = controller(meta)
            if owner is None:
                found.add(None)  # a training-labelled pod no job controls: nothing
                continue
            run_id = (meta.get("annotations") or {}).get(ANNOTATION)
            if owner.get("kind") == "Job":
                job = self._get(f"/apis/batch/v1/namespaces/{ns}/jobs/{quote(str(owner.get('name', '')))}")
                if job["metadata"].get("uid") != owner.get("uid"):
                    found.add(None)  # a Job of that name, not this pod's
                    continue
                if run_id is None:
                    run_id = (job["metadata"].get("annotations") or {}).get(ANNOTATION)
            found.add(run_id if run_id is not None and owns(owner, run_id) else None)
        return found.pop() if len(found) == 1 else None

    def __call__(self, address: str) -> str | None:
        now = time.monotonic()
        with self._lock:
            cached = self._cache.get(address)
        if cached and now - cached[0] < self.cache_s:
            return cached[1]
        try:
            run_id = self.resolve(address)
        except OSError:
            return None  # the API server unreachable: refuse, and ask again next time
        with self._lock:
            self._cache[address] = (now, run_id)
            if len(self._cache) > 10_000:
                self._cache = {a: v for a, v in self._cache.items() if now - v[0] < self.cache_s}
        return run_id
