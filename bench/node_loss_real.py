"""Node loss to resume on real pods: how long a researcher's job waits when the node under it is lost.

    python bench/node_loss_real.py [--runs N] [--threshold-s 60] [--period-s 10] [--json]

Starts a control plane of the test tier (Kubernetes 1.35.4, the controller manager's defaults:
--node-monitor-grace-period 50 s), two real nodes on a fabric (tests/controlplane/node.py, fabric.py)
with the local stack's training layer, etcd and its gate on node B (tests/controlplane/lost_node.py).
Each run submits a restart-mode job as alice (`torchfleet submit --stack local --cpu`, the CPU
training image, a checkpoint every 10 steps), lets its pod on node A commit a checkpoint, loses node
A as a spot reclaim does (RealNode.lose: every process and container killed at once, the Node object
left), with the node healer running as a process at the layer's defaults (threshold 60 s after not
ready, a pass every 10 s: training-image/elastic_trainer/node_healer.py) unless told otherwise, and
prints, in seconds after the loss: the node seen not ready, the healer's out-of-service taint, the old
pod gone, the replacement running on node B, and the replacement's `resumed` event (the trainer's own
clock, like the loss's: the figure). The others are polled about every second through kubectl on a
machine that may be loaded: read them as upper bounds. Each run has a control plane and two nodes of
its own (the layer's PersistentVolumes are immutable and name a run's store).

Needs root and what the real node needs (.ci/setup), the binaries of tests/controlplane/build.py, and
builds (or reuses) the CPU training image (tests/containers/image.py).
"""

from __future__ import annotations

import argparse
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
from tests.controlplane.lost_node import cli, lose_a, platform, submit_on_a


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


STEPS = ("node_not_ready", "tainted", "old_pod_gone", "replacement_running", "resumed")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1, help="node losses (default 1)")
    parser.add_argument(
        "--threshold-s",
        type=float,
        default=DEFAULT_THRESHOLD_S,
        help=f"the healer's --threshold-s (default {DEFAULT_THRESHOLD_S}, the layer's)",
    )
    parser.add_argument(
        "--period-s",
        type=float,
        default=DEFAULT_PERIOD_S,
        help=f"the healer's --period-s (default {DEFAULT_PERIOD_S}, the layer's)",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()  # fmt: skip
    if args.runs < 1 or args.threshold_s < 0 or args.period_s <= 0:
        parser.error("--runs must be >= 1, --threshold-s >= 0 and --period-s > 0")
    results = []
    for _ in range(args.runs):
        with (
            tempfile.TemporaryDirectory(prefix="tf-node-loss-real-") as tmp,
            ControlPlane.start(Path(tmp) / "cp") as cp,
            platform(cp, Path(tmp), log=say) as p,
        ):
            job = f"bench-lost-{uuid.uuid4().hex[:6]}"
            first = submit_on_a(p, job)
            try:
                loss = lose_a(p, job, first, Path(tmp), args.threshold_s, args.period_s)
            finally:
                cli(p.alice, "delete", job)
            result = {**loss.steps, "resumed_step": loss.resumed_step, "last_ckpt_seen": loss.last_ckpt,
                      "replacement_node": loss.second_node}  # fmt: skip
        results.append(result)
        say(json.dumps(result))
    median = {step: statistics.median(r[step] for r in results if step in r) for step in STEPS}
    figures = {"healer": {"threshold_s": args.threshold_s, "period_s": args.period_s}, "runs": results,
               "median_s": median}  # fmt: skip
    if args.json:
        print(json.dumps(figures))
    else:
        for key, value in figures.items():
            print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
