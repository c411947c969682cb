"""The real node of the control-plane tier (tests/controlplane/node.py, issue 31): what it costs.

    python bench/node.py                     # 3 node starts, the smoke image imported each time
    python bench/node.py --archive X.tar --base-name torchfleet.local/trainer   # and this archive
    python bench/node.py --json

Figures:
- ``node_start_s``: RealNode.start until the Node is Ready with kube-proxy's nftables table and
  CoreDNS answering on the kube-dns Service (netns, certificates, relays, containerd with the pause
  image imported, kubelet, the cloud controller's addresses), per repeat, on one control plane;
- ``import_s``: `ctr -n k8s.io images import` of the smoke image's OCI archive (and --archive's), per
  repeat, into a fresh containerd (each node's state is new);
- ``archive_mib``: each archive's size (a layout folder's files, summed).

Needs root and what the node needs (.ci/setup), and the binaries of tests/controlplane/build.py.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.controlplane import node_images
from tests.controlplane.cluster import ControlPlane
from tests.controlplane.node import RealNode


def size_mib(path: Path) -> float:
    """An archive's size, or an OCI layout folder's (import_archive tars it first)."""
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files) / 2**20


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--archive", type=Path, help="an OCI archive or layout folder to import as well")
    parser.add_argument("--base-name", default="", help="the repository a tag-only archive's images get")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    smoke = node_images.smoke(log=lambda line: print(line, file=sys.stderr))
    archives = [(smoke.archive, smoke.name.rsplit(":", 1)[0])]
    if args.archive:
        archives.append((args.archive, args.base_name))
    starts: list[float] = []
    imports: dict[str, list[float]] = {str(a): [] for a, _ in archives}
    with tempfile.TemporaryDirectory(prefix="tf-bench-node-") as tmp, ControlPlane.start(Path(tmp) / "cp") as cp:
        for repeat in range(args.repeats):
            with RealNode.start(cp, Path(tmp) / f"node-{repeat}") as node:
                starts.append(node.started_s)
                for archive, base in archives:
                    imports[str(archive)].append(node.import_archive(archive, base)[1])
            # the next node registers under the same name: wait until this one is deleted
            deadline = time.monotonic() + 60
            while "gpu-real-0" in node.kubectl("get", "nodes", "-o", "name") and time.monotonic() < deadline:
                time.sleep(1)
    figures = {
        "node_start_s": [round(s, 1) for s in starts],
        "node_start_median_s": round(statistics.median(starts), 1),
        "import_s": {
            Path(a).name if a != str(smoke.archive) else "smoke": [round(s, 1) for s in v] for a, v in imports.items()
        },
        "archive_mib": {("smoke" if a == smoke.archive else a.name): round(size_mib(a), 1) for a, _ in archives},
    }
    if args.json:
        print(json.dumps(figures, indent=1))
    else:
        for key, value in figures.items():
            print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
