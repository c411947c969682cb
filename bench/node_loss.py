"""How long until an index on a node that stops reporting is replaced, on the real control plane.

    python bench/node_loss.py [--runs N] [--remedies healer,out-of-service,delete] [--json]

Starts the test tier (tests/controlplane: kube-apiserver, controller-manager, scheduler and kwok
nodes, Kubernetes 1.35.4 with default controller settings), applies the local stack's training layer,
submits a two-node restart-mode job and silences the node of one of its pods
(tests/controlplane/node_loss.py). Each run prints, in seconds since the node went silent: when the
node was seen not ready, when the pod was evicted (terminating), that no replacement came for
--quiet-s seconds after that, and, once the remedy is applied (the out-of-service taint, or the
Node object deleted), how long until the old pod is gone and the index has a new pod. With the
"healer" remedy nobody acts: the node healer (training-image/elastic_trainer/node_healer.py) runs
against the tier with its ServiceAccount's token and the layer's defaults (threshold 60 s after
not ready, a pass every 10 s), and the run notes when its taint appeared and when the index was
replaced: the bound docs/jobs.md states. Seconds are
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
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "training-image"))

from elastic_trainer.node_healer import DEFAULT_PERIOD_S, DEFAULT_THRESHOLD_S

from tests.controlplane.cluster import ControlPlane
from tests.controlplane.healer import running_healer
from tests.controlplane.layer import TrainingLayer
from tests.controlplane.node_loss import lose_a_node
from torchfleet.cli import main as torchfleet

IMAGE = "registry.example.com/team/train:1.0"


REMEDIES = ("healer", "out-of-service", "delete")


def run(layer, remedy: str, quiet_s: float, workdir: Path) -> dict:
    name = f"bench-{remedy[:3]}-{uuid.uuid4().hex[:6]}"
    common = ["--kubeconfig", str(layer.cp.kubeconfig), "--namespace", layer.namespace]
    with contextlib.redirect_stdout(io.StringIO()):
        code = torchfleet(
            ["submit", name, *common, "--gpu", "t4", "--nodes", "2", "--image", IMAGE, "--", "python", "train.py"]
        )
    if code != 0:
        raise SystemExit(f"submit exited {code}")
    try:
        if remedy == "healer":
            with running_healer(layer, workdir, DEFAULT_THRESHOLD_S, DEFAULT_PERIOD_S):
                timeline = lose_a_node(layer, name, remedy, quiet_s=quiet_s)
        else:
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
    parser.add_argument("--remedies", default=",".join(REMEDIES), help=f"comma-separated, of {', '.join(REMEDIES)}")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.runs < 1 or args.quiet_s < 0:
        parser.error("--runs must be >= 1 and --quiet-s >= 0")
    remedies = tuple(r.strip() for r in args.remedies.split(","))
    if not remedies or any(r not in REMEDIES for r in remedies):
        parser.error(f"--remedies: each of {', '.join(REMEDIES)}, comma-separated; got {args.remedies!r}")
    results = []
    with tempfile.TemporaryDirectory(prefix="tf-node-loss-") as workdir, ControlPlane.start(Path(workdir) / "cp") as cp:
        layer = TrainingLayer.apply(cp, Path(workdir) / "layer")
        for _ in range(args.runs):
            for remedy in remedies:
                results.append(run(layer, remedy, args.quiet_s, Path(workdir)))
                print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    summary = {
        remedy: {
            key: statistics.median(r[key] for r in results if r["remedy"] == remedy and key in r)
            for key in (  # the steps a remedy has (the healer's has no remedy_applied)
                "node_not_ready",
                "pod_terminating",
                "tainted",
                "no_replacement_until",
                "old_pod_gone",
                "replaced",
                "remedy_applied",
                "replaced_after_remedy",
            )
            if any(r["remedy"] == remedy and key in r for r in results)
        }
        for remedy in remedies
    }
    print(json.dumps({"runs": results, "median": summary}, indent=None if args.json else 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
