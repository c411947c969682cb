"""The training image's CPU variant as real containers (tests/containers, issue 31): what it costs.

    python bench/container.py            # warm: the cached image; container figures, 3 repeats
    python bench/container.py --cold     # also a cold build in a new cache (the wheelhouse reused)
    python bench/container.py --json

Figures:
- ``build_cold_s``: mmdebstrap + pip install from the wheelhouse + umoci layers + unpack, in an
  empty cache directory (only --cold; the wheel download is not in it: ``wheels_mib`` says how
  much it fetches once, at this machine's PyPI speed);
- ``build_warm_s``: the second run, which finds the stamp (what a test session pays);
- ``rootfs_mib`` (unpacked) and ``layers_mib`` (the OCI layout's gzip layers);
- ``start_to_first_step_s``: `runc run` until the first `step` event of examples/train.py through
  the image's entrypoint (etcd rendezvous in the container's netns), median of --repeats;
- ``sigterm_to_exit_s``: `runc kill TERM` until `runc run` returns 143, the checkpoint committed.

Needs root, runc, umoci, mmdebstrap, etcd and ip, like the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.containers import image as image_build
from tests.containers import runtime


def cold_build() -> float:
    with tempfile.TemporaryDirectory(prefix="tf-image-cold-", dir=image_build.CACHE.parent) as tmp:
        cache = Path(tmp)
        (cache / "wheels").symlink_to(image_build.WHEELS)
        saved = image_build.CACHE, image_build.WHEELS
        image_build.CACHE, image_build.WHEELS = cache, cache / "wheels"
        try:
            started = time.monotonic()
            image_build.build(log=lambda line: print(line, file=sys.stderr))
            return time.monotonic() - started
        finally:
            image_build.CACHE, image_build.WHEELS = saved


def one_run(image: image_build.Image, work: Path) -> tuple[float, float]:
    store = work / "store"
    runtime.give_store_to_trainer(store)
    with runtime.netns() as ns:
        (work / "etcd").mkdir()
        with runtime.etcd_in(ns, work / "etcd" / "data") as endpoint:
            args = ["--nnodes=1:1", "--nproc_per_node=1", f"--rdzv_endpoint={endpoint}", "--rdzv_id=bench",
                    "/workspace/examples/train.py", f"--checkpoint-dir={runtime.STORE_MOUNT}/ckpt",
                    "--total-steps=100000", "--global-batch-size=64", "--checkpoint-every=100000"]
            c = runtime.start(runtime.spec(image, args, store, ns), work)
            try:
                c.events(600, lambda e: e["ev"] == "step")
                first_step = c.seen["step"] - c.started
                c.events(600, lambda e: e["ev"] == "step" and e["step"] >= 20)
                killed = time.monotonic()
                c.kill("TERM")
                code = c.wait(600)
                to_exit = time.monotonic() - killed
            finally:
                c.delete()
            if code != 143 or not any(e["ev"] == "ckpt" for e in c.all_events()):
                raise SystemExit(f"the container exited {code} without a checkpoint:\n{c.log()}")
            return first_step, to_exit


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cold", action="store_true", help="also build once in an empty cache")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    runtime.require_tier()
    figures: dict[str, float] = {}
    if args.cold:
        figures["build_cold_s"] = round(cold_build(), 1)
    started = time.monotonic()
    image = image_build.build(log=lambda line: print(line, file=sys.stderr))
    figures["build_warm_s"] = round(time.monotonic() - started, 2)
    figures["rootfs_mib"] = round(image_build.size_mib(image.rootfs))
    figures["layers_mib"] = round(sum(layer["size"] for layer in image.layers()) / 2**20)
    figures["wheels_mib"] = round(image_build.size_mib(image_build.WHEELS))
    starts, exits = [], []
    for i in range(args.repeats):
        with tempfile.TemporaryDirectory(prefix=f"tf-bench-{i}-") as tmp:
            first, to_exit = one_run(image, Path(tmp))
            starts.append(first)
            exits.append(to_exit)
    figures["start_to_first_step_s"] = round(statistics.median(starts), 1)
    figures["start_to_first_step_max_s"] = round(max(starts), 1)
    figures["sigterm_to_exit_s"] = round(statistics.median(exits), 1)
    figures["sigterm_to_exit_max_s"] = round(max(exits), 1)
    figures["load_1m"] = round(os.getloadavg()[0], 1)
    if args.json:
        print(json.dumps(figures))
    else:
        for key, value in figures.items():
            print(f"{key:28} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
