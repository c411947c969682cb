"""The short-lived pod through which `checkpoints` and `cp` read a job's folder on a cluster's shared store.

The store is an NFS claim only the cluster can mount, so each command starts one pod that mounts the job's
folder of it (subPath, pod_template.shared_mount) read-only, runs store_script.py in it through the API
server's exec subresource (the websocket `kubectl cp` uses, here through the kubernetes client's stream
module, binary), and deletes it on the way out, Ctrl-C included. The pod:

- meets the `restricted` Pod Security level the namespace enforces (non-root as the training image's
  user, whose group can read the store; no privilege escalation, every capability dropped,
  RuntimeDefault seccomp) and has a read-only root, the claim and its mount read-only, and no
  service-account token: it can read the store and nothing else;
- needs no network: exec reaches it through the kubelet, so the namespace's default-deny policy needs
  no exception, and it carries none of the job's role labels, so the job's policies do not admit it;
- runs the platform's reader image (READER_IMAGE, pinned by digest; a mirror of it through
  `--reader-image`, $TORCHFLEET_READER_IMAGE or the config file's reader_image), never the job's: the
  job's owner would control what everyone who downloads the job receives. Its Python starts with -I
  (isolated: no user site-packages, no PYTHON* variables, neither the working folder nor the script's on
  sys.path; https://docs.python.org/3/using/cmdline.html#cmdoption-I) and HOME is a folder that does not
  exist on a read-only root, so nothing planted in the pod runs before store_script.py;
- runs on the CPU pool (pod_template.cpu_pool), never on the manager pool beside etcd: it reads files a job's
  code wrote, and any researcher could make a pod like it with another image;
- is owned by the job when the job still exists (deleting the job removes a pod this command could not),
  and ends by itself after MAX_LIFETIME_S in any case (activeDeadlineSeconds).
"""

from __future__ import annotations

import contextlib
import secrets
import sys
import time
from collections.abc import Iterator
from typing import Any

import yaml

from torchfleet.jobs import pod_template, store_pod
from torchfleet.jobs.errors import ClusterError

LABEL_READER = "torchfleet.io/reader"
# Who made the pod, as the API server knows them: only they may exec into it, change or delete it
# (k8s/base/cluster/validatingadmissionpolicy-reader-owner.yaml and -reader-exec.yaml).
CREATED_BY = "torchfleet.io/created-by"
CONTAINER = "reader"
SERVICE_ACCOUNT = store_pod.SERVICE_ACCOUNT  # no cloud identity: it only reads the shared store
# Long enough for a large download at NFS speeds (a few TB at 100-300 MiB/s); a pod the CLI could not
# delete (killed with SIGKILL, the laptop closed) is stopped by the kubelet after this long.
MAX_LIFETIME_S = 6 * 3600
READY_TIMEOUT_S = 300
SCRATCH = "/tmp"  # noqa: S108 (an emptyDir volume: Python's scratch files)
# Not writable (read-only root, no volume there) and absent: nothing can be planted where a Python or a
# shell would look (the Debian convention for accounts without a home, as nobody's /nonexistent).
HOME = "/nonexistent"
# The reader's image: the Docker official image python:3.13.14-slim-trixie (Debian 13, Python 3.13.14,
# 43 MB amd64), the multi-platform index digest as docker-library/repo-info records it
# (repos/python/remote/3.13-slim-trixie.md at 2986dca3a80cb11b70fc4599941096374ea9e509, built 2026-08-05;
# Dockerfile: docker-library/python 3.13/slim-trixie/Dockerfile). store_script.py needs the standard
# library only (Python >= 3.10). A cluster without Docker Hub access mirrors it and sets reader_image.
READER_IMAGE = ("docker.io/library/python:3.13.14-slim-trixie"
                "@sha256:9662417aace5ae7b8e2609cce472b72a8958e134ba372808abe9cc1a0c0125e6")
# The image's python3 (/usr/local/bin on the official images, /usr/bin on Debian's and distroless), isolated
# (-I) and writing no .pyc (-B: -I ignores PYTHONDONTWRITEBYTECODE).
PYTHON = ("python3", "-I", "-B")
# PID 1 ignores a SIGTERM it has no handler for: exit on it so the deletion is quick.
IDLE = ("import signal, sys, time; signal.signal(signal.SIGTERM, lambda *_: sys.exit(0)); "
        f"time.sleep({MAX_LIFETIME_S})")


def pod_name(job: str) -> str:
    # a random suffix: two downloads of one job at once are fine
    return f"{job}-reader-{secrets.token_hex(3)}"


def whoami(jobs) -> str:
    """This CLI's username as the API server authenticates it: a SelfSubjectReview (authentication.k8s.io/v1,
    GA in Kubernetes 1.28; every authenticated user may create one through system:basic-user), as
    `kubectl auth whoami` asks. The reader-owner policy refuses a reader recording anyone else."""
    import urllib3
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    try:
        answer = client.AuthenticationV1Api(jobs.api).create_self_subject_review(review, _request_timeout=(10, 60))
    except (ApiException, urllib3.exceptions.HTTPError, OSError) as error:
        reason = " ".join(str(getattr(error, "reason", None) or error).split())[:300]
        raise ClusterError(f"could not ask the cluster who you are (SelfSubjectReview, Kubernetes 1.28+): {reason}") \
            from None
    name = answer.status and answer.status.user_info and answer.status.user_info.username
    if not name:
        raise ClusterError("the cluster's SelfSubjectReview named no user; the reader pod records its creator")
    return name


def build_pod(name: str, job: str, mount: str, image: str, target, owner: dict[str, Any] | None,
              creator: str | None = None) -> dict[str, Any]:
    """The reader pod: a pure function of its inputs, like the job builders. ``image`` is the platform's
    (READER_IMAGE or the configured mirror), never the job's."""
    local = target.cloud == "local"
    container = {
        "name": CONTAINER,
        "image": image,
        "imagePullPolicy": "IfNotPresent" if local else "Always",  # as the job pods (pod_template.pod_template)
        "command": [*PYTHON, "-c", IDLE],
        "workingDir": "/",
        "env": [{"name": "HOME", "value": HOME}, {"name": "TMPDIR", "value": SCRATCH}],
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
        **store_pod.container_fields(mount, job, SCRATCH),
    }
    spec = store_pod.spec(target, container, lifetime_s=MAX_LIFETIME_S, scratch_limit="256Mi", local=local)
    spec["terminationGracePeriodSeconds"] = 5
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": target.namespace,
        "labels": {LABEL_READER: job, pod_template.MANAGED_BY: "torchfleet"},
    }
    if creator is not None:
        metadata["annotations"] = {CREATED_BY: creator}
    if owner is not None:
        meta = owner["metadata"]
        metadata["ownerReferences"] = [{"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": meta["name"],
                                        "uid": meta["uid"], "blockOwnerDeletion": False}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


@contextlib.contextmanager
def running(jobs, pod: dict[str, Any], timeout: float = READY_TIMEOUT_S) -> Iterator[str]:
    """Create the pod, wait until it runs, yield its name; delete it however the block ends."""
    name = pod["metadata"]["name"]
    jobs.create_pod(pod)
    try:
        _wait_running(jobs, name, timeout)
        yield name
    finally:
        jobs.delete_pod(name)
        print(f"deleted reader pod {name}", file=sys.stderr)


def _wait_running(jobs, name: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        pod = jobs.read_pod(name)
        phase = (pod.status and pod.status.phase) or "Pending"
        if phase in ("Failed", "Succeeded"):
            raise ClusterError(f"the reader pod {name} ended ({phase}) before it could read; "
                               f"`kubectl describe pod {name}` shows why")
        if phase == "Running":
            return
        waiting = [s.state.waiting.reason for s in (pod.status and pod.status.container_statuses) or []
                   if s.state and s.state.waiting and s.state.waiting.reason]
        if time.monotonic() > deadline:
            why = f", waiting: {', '.join(waiting)}" if waiting else ""
            raise ClusterError(f"the reader pod {name} was not running within {timeout:.0f} s (phase {phase}{why}); "
                               f"`kubectl describe pod {name}` shows why")
        time.sleep(1)


def exec_chunks(jobs, pod: str, command: list[str], stderr: list[bytes], stdin: bytes = b"") -> Iterator[bytes]:
    """``command``'s stdout in the pod, as it comes (binary), ``stdin`` written to it first; its stderr appended
    to ``stderr``; finally its exit code as the generator's return value (``StopIteration.value``)."""
    from kubernetes.client.exceptions import ApiException
    from kubernetes.stream import stream, ws_client

    try:
        ws = stream(jobs.core.connect_get_namespaced_pod_exec, pod, jobs.namespace, container=CONTAINER,
                    command=command, stdin=bool(stdin), stdout=True, stderr=True, tty=False,
                    _preload_content=False, binary=True)
    except ApiException as error:
        reason = " ".join(str(error.reason).split())[:300]
        raise ClusterError(f"exec in the reader pod {pod} failed: {reason}") from None
    # stream() does not pass capture_all on (kubernetes 37.0.2, stream/stream.py), and the client then keeps a
    # copy of every byte received (WSClient._all) for read_all(): a download would grow in memory. This is
    # what WSClient(capture_all=False) sets.
    if hasattr(ws_client, "_IgnoredIO"):
        ws._all = ws_client._IgnoredIO()
    from websocket import WebSocketException

    try:
        if stdin:
            with contextlib.suppress(WebSocketException, OSError):  # closed already: the status channel says why
                ws.write_stdin(stdin)
        while ws.is_open():
            try:
                ws.update(timeout=5)
            except (WebSocketException, OSError):  # broken off: no exit status, a ClusterError below
                break
            if out := ws.read_stdout(timeout=0):
                yield out
            if err := ws.read_stderr(timeout=0):
                stderr.append(err)
        status = b""
        with contextlib.suppress(WebSocketException, OSError):  # what arrived before the end
            if out := ws.read_stdout(timeout=0):
                yield out
            if err := ws.read_stderr(timeout=0):
                stderr.append(err)
            status = ws.read_channel(ws_client.ERROR_CHANNEL)
        return exit_code(status, pod)
    finally:
        ws.close()


def exit_code(raw: bytes | str, pod: str) -> int:
    """The command's exit code from the exec's status channel (a metav1.Status), or a ClusterError saying why
    the command did not run. The client's own ``returncode`` raised ValueError on a Status without an exit
    code, e.g. the API server failing to reach the node's kubelet (found by tests/controlplane)."""
    try:
        status = yaml.safe_load(raw) if raw else None
    except yaml.YAMLError:
        status = None
    if not isinstance(status, dict):
        raise ClusterError(f"exec in the reader pod {pod} ended without an exit status (the connection broke?)")
    if status.get("status") == "Success":
        return 0
    causes = (status.get("details") or {}).get("causes") or []
    code = next((c.get("message") for c in causes if isinstance(c, dict) and c.get("reason") == "ExitCode"), None)
    if code is not None and str(code).isdigit():
        return int(code)
    message = " ".join(str(status.get("message") or status).split())[:300]
    raise ClusterError(f"exec in the reader pod {pod} failed: {message}")
