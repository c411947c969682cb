"""The platform images of the real node, built here without a registry (issue 31 item 3): the rendezvous
etcd's, and CoreDNS's (the cluster DNS runs as a kube-system pod, as on EKS, GKE and AKS: node.py).

    python -m tests.controlplane.platform_images    # build or find it; one timed line

The platform's StatefulSet runs registry.k8s.io/etcd (`/bin/sh /etc/etcd-bootstrap/bootstrap.sh`,
a script that needs bash's arrays and ${!name}, then `exec etcd`; etcdctl for a rejoin). No
registry is reachable here, so the image is made from what the tier already has: the smoke
image's Debian minbase root (node_images.smoke, bash included) with /usr/bin/sh pointing at bash,
and the tier's own etcd and etcdctl (tests/controlplane/build.py, go.etcd.io/etcd v3.5) in
/usr/local/bin, user 65532 as the StatefulSet runs it. One layer, cached as node_images' are,
keyed by the two binaries and the smoke image.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.controlplane import node_images
from tests.controlplane.cluster import binary

ETCD_RECIPE = "1"
COREDNS_RECIPE = "1"


def etcd(log=print) -> node_images.NodeImage:
    smoke = node_images.smoke(log=lambda line: None)
    etcd_bin, etcdctl_bin = Path(binary("etcd")), Path(binary("etcdctl"))

    def make(work: Path, tag: str) -> None:
        with tempfile.TemporaryDirectory(dir=work) as scratch:
            layout, bundle = Path(scratch) / "layout", Path(scratch) / "bundle"
            layout.mkdir()
            node_images._run(["tar", "-C", str(layout), "-xf", str(smoke.archive)])
            node_images._run(["umoci", "unpack", "--image", f"{layout}:{smoke.name.rsplit(':', 1)[1]}", str(bundle)])
            rootfs = bundle / "rootfs"
            for source in (etcd_bin, etcdctl_bin):
                target = rootfs / "usr/local/bin" / source.name
                node_images._run(["cp", str(source), str(target)])
                target.chmod(0o755)
            # bootstrap.sh is bash (arrays, ${!name}) run as /bin/sh: the etcd image's /bin/sh is bash.
            sh = rootfs / "usr/bin/sh"
            sh.unlink(missing_ok=True)
            os.symlink("bash", sh)
            node_images._layout(rootfs, work / "image.tar", tag, ["/usr/local/bin/etcd"], "65532:65532",
                                "smoke image + etcd, etcdctl from tests/controlplane/build.py")  # fmt: skip

    key = node_images._key(etcd_bin.read_bytes(), etcdctl_bin.read_bytes(), smoke.name.encode(), ETCD_RECIPE.encode())
    return node_images._cached("etcd", key, make, log)


def coredns(log=print) -> node_images.NodeImage:
    """The tier's CoreDNS (build.py: v1.15.0 with the node's plugins, static) alone in one layer, as
    registry.k8s.io/coredns/coredns is the binary on a distroless base; the Corefile comes from a
    ConfigMap (node.py). User 0: it binds port 53 with only NET_BIND_SERVICE kept (its pod drops the rest)."""
    coredns_bin = Path(binary("coredns"))

    def make(work: Path, tag: str) -> None:
        tree = work / "tree"
        tree.mkdir()
        node_images._run(["cp", str(coredns_bin), str(tree / "coredns")])
        (tree / "coredns").chmod(0o755)
        node_images._layout(
            tree, work / "image.tar", tag, ["/coredns"], "0:0", "coredns from tests/controlplane/build.py"
        )

    return node_images._cached(
        "coredns", node_images._key(coredns_bin.read_bytes(), COREDNS_RECIPE.encode()), make, log
    )


def main() -> int:
    try:
        etcd()
        coredns()
    except (node_images.NodeImageError, subprocess.CalledProcessError) as err:
        print(f"[node-image] {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
