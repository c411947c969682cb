"""The node healer (training-image/elastic_trainer/node_healer.py) as a process against the tier.

Shared by tests/controlplane/test_node_healer.py and bench/node_loss.py. The healer runs with its
ServiceAccount's token (`kubectl create token`, signed by the tier's sa.key), so the API server's RBAC
authorizer sees it exactly as in a cluster: bound to the ClusterRole the layer renders
(components/kube/node_healer.py), get/list/watch/patch on nodes and nothing else.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import yaml
from elastic_trainer.node_healer import OUT_OF_SERVICE

from components.kube import node_healer
from tests.controlplane.layer import get, kubectl

REPO = Path(__file__).resolve().parents[2]


def healer_token(layer) -> str:
    objects = [node_healer.namespace(), node_healer.service_account(), node_healer.cluster_role(),
               node_healer.cluster_role_binding()]  # fmt: skip
    kubectl(layer.cp, "apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(objects))
    return kubectl(layer.cp, "create", "token", node_healer.NAME, "-n", node_healer.NAMESPACE, "--duration=2h").strip()


@contextlib.contextmanager
def running_healer(layer, workdir: Path, threshold_s: float, period_s: float = 2) -> Iterator[Path]:
    """The healer process while the block runs; yields its log file."""
    token = workdir / "healer-token"
    token.write_text(healer_token(layer))
    log = workdir / "healer.log"
    env = {**os.environ, "PYTHONPATH": str(REPO / "training-image")}
    args = [sys.executable, "-m", "elastic_trainer.node_healer", f"--server={layer.cp.server}",
            f"--token-file={token}", f"--ca-file={layer.cp.workdir / 'pki' / 'ca.crt'}",
            f"--threshold-s={threshold_s}", f"--period-s={period_s}"]  # fmt: skip
    with log.open("w") as out:
        process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        yield log
    finally:
        process.terminate()
        process.wait(timeout=30)


def taints(layer, node: str) -> list[dict]:
    return get(layer.cp, "node", node)["spec"].get("taints") or []


def out_of_service(layer, node: str) -> bool:
    return any(t["key"] == OUT_OF_SERVICE["key"] for t in taints(layer, node))
