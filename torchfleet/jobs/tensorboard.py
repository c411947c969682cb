"""`torchfleet tensorboard NAME`: TensorBoard for a job's folder on the shared store, inside the cluster.

The trainer writes its scalars to the shared store (``--tensorboard-dir``, rank 0:
training-image/elastic_trainer/events.py), which only the cluster can read. So this starts one pod
on the CPU pool (never beside etcd on the manager pool: pod_template.cpu_pool) running the job's own image, which
is built on the training image and so has TensorBoard installed at a pinned version
(training-image/requirements.txt), with only the job's folder of the shared claim mounted read-only
(pod_template.shared_mount); forwards a local port
to it; and deletes the pod on exit (Ctrl-C included). ``--dry-run`` prints the pod and touches nothing.

The pod serves on 127.0.0.1 inside its own network namespace: a port-forward reaches it there through
the kubelet, and nothing else can, so the namespace's default-deny policy needs no exception
(https://kubernetes.io/docs/tasks/access-application-cluster/port-forward-access-application-cluster/).
It meets the `restricted` Pod Security level the namespace enforces, as the job pods do.
"""

from __future__ import annotations

import argparse
import contextlib
import select
import socket
import sys
import threading
import time
from typing import Any

from torchfleet.jobs import commands, flag_checks, manifests, pod_template, store_folder, store_pod
from torchfleet.jobs import spec as jobspec
from torchfleet.jobs.errors import EXIT_OK, ClusterError, UsageError
from torchfleet.jobs.image_ref import EXAMPLE as IMAGE_EXAMPLE
from torchfleet.jobs.session import EXIT_DOC, cluster_options, job_client, resolve_target
from torchfleet.jobs.target import require_cpu_pool

PORT = 6006  # TensorBoard's default
LABEL_TENSORBOARD = "torchfleet.io/tensorboard"
# A pod left behind when the CLI could not delete it (killed with SIGKILL, the laptop closed) ends
# by itself after this long.
MAX_LIFETIME_S = 12 * 3600
READY_TIMEOUT_S = 300
SCRATCH = "/tmp"  # noqa: S108 (an emptyDir volume: TensorBoard's and Python's scratch files)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tensorboard", help="TensorBoard for a job's folder on the shared store, forwarded here",
                       description=f"Start TensorBoard in the cluster for a job and forward a local port to it; "
                                   f"the pod is deleted on exit. {EXIT_DOC}")
    p.add_argument("name", metavar="NAME", help="the job whose folder (<mount>/NAME) TensorBoard reads")
    p.add_argument("--port", type=int, default=PORT, help=f"the local port (default {PORT})")
    p.add_argument("--image", default=None,
                   help="an image with TensorBoard (default: the job's own image, built on the training image); "
                        "required with --dry-run")
    p.add_argument("--mount", default=None,
                   help=f"where the job's pods mount the shared claim (default: the job's, else "
                        f"{jobspec.DEFAULT_MOUNT})")
    p.add_argument("--dry-run", action="store_true", help="print the pod; touches no cluster")
    cluster_options(p)
    p.set_defaults(func=run)


def pod_name(job: str) -> str:
    return f"{job}-tensorboard"


def build_pod(job: str, job_dir: str, mount: str, image: str, target, port: int = PORT) -> dict[str, Any]:
    """The TensorBoard pod for ``job``: a pure function of its inputs, like the job builders."""
    local = target.cloud == "local"
    serve = (f"import urllib.request; urllib.request.urlopen('http://127.0.0.1:{port}/', timeout=5)")
    probe = {"exec": {"command": ["python", "-c", serve]}, "periodSeconds": 10, "timeoutSeconds": 8}
    container = {
        "name": "tensorboard",
        "image": image,
        "imagePullPolicy": "IfNotPresent" if local else "Always",  # as the job pods (pod_template.pod_template)
        "command": ["python", "-m", "tensorboard.main", "--logdir", job_dir, "--host", "127.0.0.1",
                    "--port", str(port)],
        "env": [{"name": "HOME", "value": SCRATCH}, {"name": "TMPDIR", "value": SCRATCH}],
        "ports": [{"name": "tensorboard", "containerPort": port, "protocol": "TCP"}],
        "readinessProbe": {**probe, "initialDelaySeconds": 3},
        "livenessProbe": {**probe, "initialDelaySeconds": 60, "failureThreshold": 6},
        "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"cpu": "2", "memory": "2Gi"}},
        **store_pod.container_fields(mount, job, SCRATCH),
    }
    # It reads the store only: the reader account, never training-job with the datasets' cloud identity.
    spec = store_pod.spec(target, container, lifetime_s=MAX_LIFETIME_S, scratch_limit="1Gi", local=local)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(job),
            "namespace": target.namespace,
            "labels": {LABEL_TENSORBOARD: job, pod_template.MANAGED_BY: "torchfleet"},
        },
        "spec": spec,
    }


def _check(args: argparse.Namespace) -> None:
    flag_checks.check_lookup_name(args.name)
    if not 1 <= args.port <= 65535:
        raise UsageError(f"--port: a TCP port from 1 to 65535, got {args.port}")
    if args.mount is not None:
        from torchfleet.jobs.mounts import normalize_mount

        args.mount = normalize_mount(args.mount)
    if args.image is not None or args.dry_run:
        if args.image is None:
            raise UsageError(f"--image: required with --dry-run (the job's image is read from the cluster "
                             f"otherwise), e.g. --image {IMAGE_EXAMPLE}")
        flag_checks.check_image(args.image)


def _from_job(job: dict[str, Any]) -> tuple[str | None, str | None]:
    """(the job's image, where its pods mount the shared claim)."""
    spec = (manifests.worker_spec(job).get("template") or {}).get("spec") or {}
    container = (spec.get("containers") or [{}])[0]
    shared = next((m for m in container.get("volumeMounts") or [] if m.get("name") == pod_template.SHARED_VOLUME), None)
    return container.get("image"), pod_template.store_root(shared) if shared else None


def owned_by(pod: dict[str, Any], job: dict[str, Any]) -> dict[str, Any]:
    """The pod with the job as its owner: deleting the job removes it, and on EKS the VPC CNI applies
    network policies only to pods with an owner ("Standalone Pods that don't have a
    metadata.ownerReferences set can't have network policies applied to them", EKS user guide,
    cni-network-policy; AWS review m6): owned, it gets the namespace's default deny like every job pod.
    A job object without a uid (none read) leaves the pod as it was."""
    meta = job.get("metadata") or {}
    if not (meta.get("uid") and job.get("apiVersion") and job.get("kind")):
        return pod
    owner = {"apiVersion": job["apiVersion"], "kind": job["kind"], "name": meta["name"], "uid": meta["uid"],
             "blockOwnerDeletion": False}
    return {**pod, "metadata": {**pod["metadata"], "ownerReferences": [owner]}}


def run(args: argparse.Namespace) -> int:
    _check(args)
    if args.dry_run:
        session = resolve_target(args, need_cluster=False)
        require_cpu_pool(session.target, "tensorboard")
        mount = args.mount or jobspec.DEFAULT_MOUNT
        commands._print_yaml([build_pod(args.name, f"{mount.rstrip('/')}/{args.name}", mount, args.image,
                                        session.target, PORT)])
        return EXIT_OK
    session = resolve_target(args, need_cluster=True)
    require_cpu_pool(session.target, "tensorboard")  # before anything is made (issue 30)
    jobs = job_client(args, session)
    job = jobs.get(args.name)
    image, mount = _from_job(job)
    image, mount = args.image or image, args.mount or mount or jobspec.DEFAULT_MOUNT
    if not image:
        raise UsageError(f"--image: job {args.name} names no image; give one with TensorBoard installed")
    pod = owned_by(build_pod(args.name, f"{mount.rstrip('/')}/{args.name}", mount, image, session.target, PORT), job)
    store_folder.follow(pod, job)  # the maker's folder of the job, as its pods mount it
    listener = _listen(args.port)  # before the pod: a taken port is the user's to fix, with nothing made
    jobs.create_pod(pod)
    try:
        _wait_ready(jobs, pod_name(args.name))
        print(f"TensorBoard for {args.name} ({mount.rstrip('/')}/{args.name}) on http://localhost:{args.port}/ "
              "- Ctrl-C stops it and deletes its pod", flush=True)
        serve(listener, lambda: jobs.port_forward(pod_name(args.name), PORT))
    finally:
        listener.close()
        jobs.delete_pod(pod_name(args.name))
        print(f"deleted pod {pod_name(args.name)}", file=sys.stderr)
    return EXIT_OK


def _listen(port: int) -> socket.socket:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        server.bind(("127.0.0.1", port))
    except OSError as error:
        server.close()
        raise UsageError(f"--port: cannot listen on 127.0.0.1:{port} ({error.strerror}); choose another port") from None
    server.listen(16)
    return server


def _wait_ready(jobs, name: str, timeout: float = READY_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while True:
        pod = jobs.read_pod(name)
        phase = (pod.status and pod.status.phase) or "Pending"
        if phase in ("Failed", "Succeeded"):
            raise ClusterError(f"the TensorBoard pod {name} ended ({phase}) before it served; "
                               f"`kubectl logs {name}` shows why")
        ready = any(c.type == "Ready" and c.status == "True" for c in (pod.status and pod.status.conditions) or [])
        if ready:
            return
        if time.monotonic() > deadline:
            raise ClusterError(f"the TensorBoard pod {name} was not ready within {timeout:.0f} s (phase {phase}); "
                               f"`kubectl describe pod {name}` shows why")
        time.sleep(1)


def serve(listener: socket.socket, connect, stop: threading.Event | None = None) -> None:
    """Accept local connections and pipe each to a new forwarded stream (``connect()`` returns a
    socket-like object), until ``stop`` is set or Ctrl-C."""
    listener.settimeout(0.5)
    while stop is None or not stop.is_set():
        try:
            local, _ = listener.accept()
        except TimeoutError:
            continue
        try:
            remote = connect()
        except Exception:
            local.close()
            raise
        threading.Thread(target=_pipe, args=(local, remote), daemon=True, name="tensorboard-forward").start()


def _pipe(a, b) -> None:
    """Copy bytes both ways until either side closes."""
    with contextlib.closing(a), contextlib.closing(b):
        while True:
            readable, _, _ = select.select([a, b], [], [], 60)
            for source in readable:
                data = source.recv(65536)
                if not data:
                    return
                (b if source is a else a).sendall(data)

