"""Who is asking: a connection's source address to the rendezvous id its pod may use.

- ``Static``: a fixed table (local runs, where every node is a loopback address of its own).
- ``Pods``: in a cluster, the Running pod of the namespace that holds the address, if it is a
  training pod (label torchfleet.io/role=training) with a torchfleet.io/rdzv-id annotation, on
  itself (the CLI writes it on every operator's pod template: torchfleet/jobs/pod_template.py; an
  ElasticJob's or PyTorchJob's pods have no batch/v1 Job) or on the batch/v1 Job that controls it
  (Jobs submitted before the pods carried it). Its Role: list pods, get jobs (k8s/base/etcd-gate/role.yaml),
  and get elasticjobs or pytorchjobs where that operator is installed (role-elasticjobs.yaml, kubeflow/).
  Training pods run with no API token (k8s/base/cluster/validatingadmissionpolicy-researcher-limits.yaml),
  so a pod's code cannot change what it resolves to; pod IPs are the CNI's, not the pod's to choose
  (hostNetwork pods are refused by Pod Security "restricted"). An address held by no such pod, or by
  pods that disagree, resolves to nothing and is refused everything. Answers are kept ``cache_s``:
  a pod that ends and whose IP goes to another pod within that time is the one window.
  The id must be its controlling job's: the pod's controller ownerReference (set by the Job controller
  or the operator, never by a researcher: the admission policy refuses training-labelled pods and
  rdzv-id annotations on pods researchers make) names a Job, ElasticJob or PyTorchJob, and the id is
  ``<that name>-<8 hex>`` (torchfleet/jobs/spec.py new_rdzv_id) or, for an ElasticJob only, the name
  itself (the controller's own --rdzv_id, as k8s/examples use it). The owning object is read, whatever
  its kind, and its uid compared with the reference's, and its torchfleet.io/created-by with the pod's
  (the template's copy). A job's name is one name across the three kinds: if an object of another kind
  holds the same name, the id is not this pod's alone (an ElasticJob named after another user's batch
  Job, with that Job's id copied, would otherwise join its rendezvous) and the address resolves to
  nothing. A kind the API server does not serve (its group's discovery answers 404) holds no name; a
  kind served but not readable (403) refuses. So an annotation naming another job's id resolves to
  nothing even where admission let it through (k8s/base/cluster/validatingadmissionpolicy-researcher-limits.yaml
  checks the same form; validatingadmissionpolicy-job-names*.yaml keeps a name to one kind).
"""

from __future__ import annotations

import json
import re
import ssl
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import quote

ANNOTATION = "torchfleet.io/rdzv-id"  # torchfleet/jobs/pod_template.py ANNOTATION_RDZV_ID
ROLE = ("torchfleet.io/role", "training")  # components/kube/manifests.py training_pod_labels
SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
# The kinds whose pods train, by the ownerReference their controller writes (apiVersion's group).
JOB_OWNERS = {("batch", "Job"), ("elastic.pytorch.org", "ElasticJob"), ("kubeflow.org", "PyTorchJob")}
SUFFIX = re.compile(r"-[0-9a-f]{8}")
CREATED_BY = "torchfleet.io/created-by"  # torchfleet/jobs/cluster.py CREATED_BY
# Where each kind is read: (group, kind) -> (group/version path, plural). The ElasticJob CRD
# (k8s/base/crds/elasticjob.yaml) and Kubeflow's PyTorchJob (kubeflow.org/v1) serve one version each.
KINDS = {
    ("batch", "Job"): ("/apis/batch/v1", "jobs"),
    ("elastic.pytorch.org", "ElasticJob"): ("/apis/elastic.pytorch.org/v1alpha1", "elasticjobs"),
    ("kubeflow.org", "PyTorchJob"): ("/apis/kubeflow.org/v1", "pytorchjobs"),
}
assert set(KINDS) == JOB_OWNERS


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
            annotations = meta.get("annotations") or {}
            run_id = annotations.get(ANNOTATION)
            job = self.job_of(owner)
            if job is None or (job.get("annotations") or {}).get(CREATED_BY) != annotations.get(CREATED_BY):
                found.add(None)  # not this pod's owner, its name held by another kind, or another maker's
                continue
            if run_id is None and owner.get("kind") == "Job":
                run_id = (job.get("annotations") or {}).get(ANNOTATION)
            found.add(run_id if run_id is not None and owns(owner, run_id) else None)
        return found.pop() if len(found) == 1 else None

    def job_of(self, owner: dict) -> dict | None:
        """The owning object's metadata if it is the pod's (same uid) and no other kind holds its name."""
        name = str(owner.get("name", ""))
        if not name:
            return None
        own = (str(owner.get("apiVersion", "")).partition("/")[0], owner.get("kind"))
        found = None
        for kind, (group_version, plural) in KINDS.items():
            obj = self._get_object(group_version, plural, name)
            if kind == own:
                if obj is None or obj["metadata"].get("uid") != owner.get("uid"):
                    return None  # gone, or an object of that name that is not this pod's
                found = obj["metadata"]
            elif obj is not None:
                return None  # the name is held by a job of another kind too: whose id is it?
        return found

    def _get_object(self, group_version: str, plural: str, name: str) -> dict | None:
        """The named object, or None where none is (404), or where its kind is not served.

        The Role grants get only on the kinds the stack installs, and authorization comes before
        routing, so an ungranted kind answers 403 whether served or not: then the group's discovery
        path (readable by every authenticated user, the system:discovery ClusterRole) tells a kind
        that is not served (404: no object can hold the name) from one that is (the 403 is raised:
        the caller refuses, as for any other error)."""
        path = f"{group_version}/namespaces/{quote(self.namespace)}/{plural}/{quote(name)}"
        try:
            return self._get(path)
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return None
            if error.code != 403:
                raise
        try:
            self._get(group_version)
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return None
            raise
        raise PermissionError(f"{plural} is served but the gate may not read it: grant its Role get on {plural}")

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
