"""The training image's CPU variant as real containers (tests/containers, issue 31): what it costs.

    python bench/container.py            # warm: the cached image; container figures, 3 repeats
    python bench/container.py --cold     # also a cold build in a new cache, and a code-only rebuild
    python bench/container.py --json

Figures:
- ``build_cold_s``: in an empty cache directory, what a CI machine pays after .ci/setup: mmdebstrap,
  pip's resolution against the venv, the venv's packages hard-linked and the wheels it lacks
  downloaded (``wheels_mib``), the three layers' tar + zstd, the bundle (only --cold);
- ``build_code_only_s``: training-image/ changed (a copy of it with one line added), the Debian and
  packages layers cached: the code layer, the layout and the bundle (only --cold);
- ``build_warm_s``: the second run, which finds the stamp (what a test session pays);
- ``rootfs_mib`` (unpacked), ``layers_mib`` (the zstd layers: the OCI archive's size) and
  ``cache_own_mib`` (the cache's disk use beyond the venv's files it links);
- ``import_s``: `ctr -n k8s.io images import` of the archive into a containerd of its own
  (tests/containers/containerd.py), unpacking included; ``import_code_only_s``: the same
  containerd importing the code-only image (only --cold);
- ``start_to_first_step_s``: `runc run` until the first `step` event of examples/train.py through
  the image's entrypoint (etcd rendezvous in the container's netns), median of --repeats;
- ``sigterm_to_exit_s``: `runc kill TERM` until `runc run` returns 143, the checkpoint committed.

Needs root, runc, umoci, mmdebstrap, etcd and ip, like the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.containers import containerd, runtime
from tests.containers import image as image_build


def _log(line: str) -> None:
    print(line, file=sys.stderr)


def cold_build(figures: dict) -> None:
    """A build in an empty cache, then a code-only one, each imported into one throwaway containerd."""
    with tempfile.TemporaryDirectory(prefix="tf-image-cold-", dir=image_build.CACHE.parent) as tmp:
        cache = Path(tmp) / "cache"
        saved = {k: getattr(image_build, k) for k in ("CACHE", "WHEELS", "IMAGE_DIR", "DOCKERFILE", "REQUIREMENTS")}
        image_build.CACHE, image_build.WHEELS = cache, cache / "wheels"
        try:
            started = time.monotonic()
            image = image_build.build(log=_log)
            figures["build_cold_s"] = round(time.monotonic() - started, 1)
            figures["wheels_mib"] = round(image_build.size_mib(image_build.WHEELS), 1)
            # training-image/ edited: a copy with one comment added to an example, nothing else
            code = Path(tmp) / "training-image"
            shutil.copytree(saved["IMAGE_DIR"], code, ignore=shutil.ignore_patterns("__pycache__"))
            with open(code / "examples" / "train.py", "a") as f:
                f.write("# bench/container.py: a code-only change\n")
            image_build.IMAGE_DIR, image_build.DOCKERFILE = code, code / "Dockerfile"
            image_build.REQUIREMENTS = code / "requirements.txt"
            started = time.monotonic()
            edited = image_build.build(log=_log)
            figures["build_code_only_s"] = round(time.monotonic() - started, 1)
            (Path(tmp) / "containerd").mkdir()
            with containerd.throwaway(Path(tmp) / "containerd") as ctrd:
                figures["import_s"] = round(ctrd.import_image(image), 1)
                figures["import_code_only_s"] = round(ctrd.import_image(edited), 1)
                figures["containerd_mib"] = round(image_build.size_mib(Path(tmp) / "containerd" / "root"))
        finally:
            for key, value in saved.items():
                setattr(image_build, key, value)


def cache_own_mib() -> float:
    """The cache's disk use beyond the venv's files it links: du counts an inode once per call, at
    its first path, so with the venv's site-packages first the cache's line leaves them out."""
    out = subprocess.run(["du", "-sb", str(image_build.VENV_SITE), str(image_build.CACHE)],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    return int(out[1].split()[0]) / 2**20


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
        cold_build(figures)
    image_build.build(log=_log)
    started = time.monotonic()
    image = image_build.build(log=_log)
    figures["build_warm_s"] = round(time.monotonic() - started, 2)
    figures["rootfs_mib"] = round(image_build.size_mib(image.rootfs))
    figures["layers_mib"] = round(sum(layer["size"] for layer in image.layers()) / 2**20)
    figures["cache_own_mib"] = round(cache_own_mib())
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
