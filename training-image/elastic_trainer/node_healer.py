"""Node healer: taint a GPU node that stopped reporting out of service, so its index is replaced.

Why (docs/jobs.md, "A node that stops reporting"): the pod of a node whose kubelet went silent is
evicted but stays Terminating while the Node object exists, and an Indexed Job
(podReplacementPolicy: Failed) replaces it only once PodGC fails it, which PodGC does only for a
deleted Node or a not-ready Node tainted node.kubernetes.io/out-of-service
(k8s.io/kubernetes v1.35.4 pkg/controller/podgc/gc_controller.go gcTerminating). The cloud deletes
the Node of a terminated instance; a partitioned node, a hung kubelet or a stopped instance keeps it,
and its index would wait for an administrator. This loop is that administrator, for GPU pools only:

- a node labelled torchfleet.io/pool=gpu whose Ready condition has been False or Unknown for
  ``threshold_s`` seconds (from the condition's lastTransitionTime) gets
  node.kubernetes.io/out-of-service=nodeshutdown:NoExecute, the taint of Kubernetes'
  non-graceful node shutdown
  (https://kubernetes.io/docs/concepts/cluster-administration/node-shutdown/#non-graceful-node-shutdown),
  and the annotation ``ANNOTATION`` saying the healer put it there;
- once that node is Ready again, the healer removes its own taint (an administrator's, without the
  annotation, is left alone); a deleted node needs nothing;
- any other node (the manager pool, where etcd and the controllers run; a node without the label)
  is never written, even if the API answers it to the label selector.

Why the taint is safe on these pools and nowhere else: a training pod there mounts no volume but the
shared store (ReadWriteMany NFS, no attachment to move: the docs' concern is volumes a dead node
still holds), its checkpoint commits are fenced by rendezvous round
(elastic_trainer/store/fence.py), so a pod that is still alive behind a partition cannot overwrite
the group that replaced it, and when the node reports again its kubelet finds the pod deleted from
the API and kills it. Each write is a JSON patch that first tests the Node's resourceVersion, so a
concurrent change (the node controller's own taints) makes it fail and the next pass re-reads.

Run in a cluster with its ServiceAccount (get/list/watch/patch nodes, nothing else):
``python -m elastic_trainer.node_healer --threshold-s 60``. Standard library only, the API
access pattern of etcd_gate/resolvers.py.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import ssl
import sys
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

OUT_OF_SERVICE = {"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"}
ANNOTATION = "torchfleet.io/out-of-service-by"
ANNOTATION_VALUE = "node-healer"
POOL_LABEL, GPU_POOL = "torchfleet.io/pool", "gpu"  # components/spec/model.py LABEL_POOL, GpuPool labels
# 60 s after the node controller's NotReady (itself 50 s after the last heartbeat): longer than a
# kubelet restart or a short network blip takes to heal, shorter than PodGC's and the Job's own
# delays combined; a spot reclaim's Node is deleted by the cloud in any case.
DEFAULT_THRESHOLD_S = 60
DEFAULT_PERIOD_S = 10
SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
log = logging.getLogger("node_healer")


class Api:
    def __init__(
        self, server: str, token: str | None = None, ca_file: str | None = None, token_file: Path | None = None
    ):
        if not server.startswith(("https://", "http://")):
            raise ValueError(f"server must be an http(s):// URL of the API server, got {server!r}")
        self.server, self.token, self.token_file = server.rstrip("/"), token, token_file
        self.context = ssl.create_default_context(cafile=ca_file) if server.startswith("https") else None

    @classmethod
    def in_cluster(cls) -> Api:
        host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"]
        server = f"https://{host}:{port}"
        return cls(server, ca_file=str(SERVICE_ACCOUNT / "ca.crt"), token_file=SERVICE_ACCOUNT / "token")

    def request(self, method: str, path: str, body: object = None, content_type: str = "application/json") -> dict:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.server + path, data=data, method=method)  # noqa: S310 (http(s) only)
        # Re-read each time in a cluster: projected tokens rotate (the kubelet refreshes the file).
        token = self.token_file.read_text().strip() if self.token_file else self.token
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        if data is not None:
            request.add_header("Content-Type", content_type)
        with urllib.request.urlopen(request, timeout=10, context=self.context) as response:  # noqa: S310
            return json.load(response)


def _ready(node: dict) -> tuple[str, datetime | None]:
    for condition in node.get("status", {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            since = condition.get("lastTransitionTime")
            when = datetime.strptime(since, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC) if since else None
            return condition.get("status", "Unknown"), when
    return "Unknown", None  # no condition yet: a node still registering, never tainted (no time to count from)


def _ours(node: dict) -> bool:
    return (node["metadata"].get("annotations") or {}).get(ANNOTATION) == ANNOTATION_VALUE


def _tainted(node: dict) -> bool:
    return any(t.get("key") == OUT_OF_SERVICE["key"] for t in node.get("spec", {}).get("taints") or [])


def decide(node: dict, now: datetime, threshold_s: float) -> str | None:
    """"taint", "untaint" or None for one Node object."""
    if (node["metadata"].get("labels") or {}).get(POOL_LABEL) != GPU_POOL:
        return None
    status, since = _ready(node)
    if status == "True":
        return "untaint" if _ours(node) else None
    if since is None or _tainted(node):
        return None
    return "taint" if (now - since).total_seconds() >= threshold_s else None


def _patch(node: dict, action: str) -> list[dict]:
    meta, taints = node["metadata"], list(node.get("spec", {}).get("taints") or [])
    ops: list[dict] = [{"op": "test", "path": "/metadata/resourceVersion", "value": meta["resourceVersion"]}]
    escaped = "/metadata/annotations/" + ANNOTATION.replace("~", "~0").replace("/", "~1")
    if action == "taint":
        taint = {**OUT_OF_SERVICE, "timeAdded": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
        ops.append({"op": "add", "path": "/spec/taints", "value": [*taints, taint]})
        if meta.get("annotations"):
            ops.append({"op": "add", "path": escaped, "value": ANNOTATION_VALUE})
        else:
            ops.append({"op": "add", "path": "/metadata/annotations", "value": {ANNOTATION: ANNOTATION_VALUE}})
    else:
        kept = [t for t in taints if t.get("key") != OUT_OF_SERVICE["key"]]
        ops.append({"op": "add", "path": "/spec/taints", "value": kept})
        ops.append({"op": "remove", "path": escaped})
    return ops


def heal_once(api: Api, threshold_s: float, now: datetime | None = None) -> list[tuple[str, str]]:
    """One pass over the GPU pools' nodes; returns (action, node name) for each write that succeeded."""
    now = now or datetime.now(UTC)
    nodes = api.request("GET", "/api/v1/nodes?labelSelector=" + quote(f"{POOL_LABEL}={GPU_POOL}"))["items"]
    done = []
    for node in nodes:
        action = decide(node, now, threshold_s)
        if action is None:
            continue
        name = node["metadata"]["name"]
        try:
            api.request("PATCH", f"/api/v1/nodes/{quote(name)}", _patch(node, action), "application/json-patch+json")
        except urllib.error.HTTPError as error:
            # 409/422: the node changed since the list (its test op failed) or is gone: the next pass re-reads.
            log.warning("%s %s: %s %s", action, name, error.code, error.reason)
            continue
        log.info("%s %s", action, name)
        done.append((action, name))
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m elastic_trainer.node_healer", description=__doc__.splitlines()[0])
    parser.add_argument("--threshold-s", type=float, default=DEFAULT_THRESHOLD_S,
                        help=f"seconds a GPU node stays not ready before it is tainted (default {DEFAULT_THRESHOLD_S})")
    parser.add_argument("--period-s", type=float, default=DEFAULT_PERIOD_S, help="seconds between passes")
    parser.add_argument("--server", help="API server URL (default: in-cluster); with --token-file and --ca-file")
    parser.add_argument("--token-file", type=Path)
    parser.add_argument("--ca-file")
    args = parser.parse_args(argv)
    if args.threshold_s < 0 or args.period_s <= 0:
        parser.error("--threshold-s must be >= 0 and --period-s > 0")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    api = Api(args.server, ca_file=args.ca_file, token_file=args.token_file) if args.server else Api.in_cluster()
    while True:
        try:
            heal_once(api, args.threshold_s)
        except (OSError, ValueError, KeyError) as error:  # API unreachable or an odd answer: try again next pass
            log.warning("pass failed: %s", error)
        time.sleep(args.period_s)


if __name__ == "__main__":
    sys.exit(main())
