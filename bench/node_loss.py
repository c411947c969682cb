"""How long until an index on a node that stops reporting is replaced, on the real control plane.

    python bench/node_loss.py [--runs N] [--json]

Starts the test tier (tests/controlplane: kube-apiserver, controller-manager, scheduler and kwok
nodes, Kubernetes 1.35.4 with default controller settings), applies the local stack's training layer,
submits a two-node restart-mode job and silences the node of one of its pods
(tests/controlplane/node_loss.py). Each run prints, in seconds since the node went silent: when the
node was seen not ready, when the pod was evicted (terminating), that no replacement came for
--quiet-s seconds after that, and, once the remedy is applied (the out-of-service taint, or the
Node object deleted), how long until the old pod is gone and the index has a new pod. Seconds are
polled every 0.5 s through kubectl, on a machine that may be loaded: read them as upper bounds.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.controlplane.cluster import ControlPlane
from tests.controlplane.layer import TrainingLayer
from tests.controlplane.node_loss import lose_a_node
from torchfleet.cli import main as torchfleet

IMAGE = "registry.example.com/team/train:1.0"


def run(layer, remedy: str, quiet_s: float) -> dict:
    name = f"bench-{remedy[:3]}-{uuid.uuid4().hex[:6]}"
    common = ["--kubeconfig", str(layer.cp.kubeconfig), "--namespace", layer.namespace]
    with contextlib.redirect_stdout(io.StringIO()):
        code = torchfleet(
            ["submit", name, *common, "--gpu", "t4", "--nodes", "2", "--image", IMAGE, "--", "python", "train.py"]
        )
    if code != 0:
        raise SystemExit(f"submit exited {code}")
    try:
        timeline = lose_a_node(layer, name, remedy, quiet_s=quiet_s)
    finally:
        with contextlib.redirect_stdout(io.StringIO()):
            torchfleet(["delete", name, *common])
    return {"remedy": remedy, "node": timeline.node, **timeline.steps}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1, help="runs per remedy (default 1)")
    parser.add_argument(
        "--quiet-s", type=float, default=60, help="seconds to watch for a replacement before the remedy"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.runs < 1 or args.quiet_s < 0:
        parser.error("--runs must be >= 1 and --quiet-s >= 0")
    results = []
    with tempfile.TemporaryDirectory(prefix="tf-node-loss-") as workdir, ControlPlane.start(Path(workdir) / "cp") as cp:
        layer = TrainingLayer.apply(cp, Path(workdir) / "layer")
        for _ in range(args.runs):
            for remedy in ("out-of-service", "delete"):
                results.append(run(layer, remedy, args.quiet_s))
                print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    summary = {
        remedy: {
            key: statistics.median(r[key] for r in results if r["remedy"] == remedy and key in r)
            for key in (
                "node_not_ready",
                "pod_terminating",
                "no_replacement_until",
                "old_pod_gone",
                "replaced",
                "remedy_applied",
                "replaced_after_remedy",
            )
        }
        for remedy in ("out-of-service", "delete")
    }
    print(json.dumps({"runs": results, "median": summary}, indent=None if args.json else 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
