"""The real node (node.py, issue 31 item 1): a pod of a small image made here runs as uid 10001 on a
read-only root, its logs, `kubectl exec` and port-forward come through the API server, it finds a
Service by name through CoreDNS and reaches the pod behind its ClusterIP through kube-proxy, it
reaches the API server through the `kubernetes` Service with its own token, and deleting it sends
SIGTERM, which it gets within the grace period. The node start and the image import are timed
(printed; the figures go in docs/benchmarks.md, asserted nowhere).
"""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from components.spec import GPU_RESOURCE, GPU_TAINT, TRAINING_UID
from tests.controlplane import node_images
from tests.controlplane.cluster import binary, free_port

NS = "node-smoke"
GRACE_S = 30


@pytest.fixture(scope="module")
def smoke(real_node):
    image = node_images.smoke()
    names, seconds = real_node.import_archive(image.archive, image.name.rsplit(":", 1)[0])
    print(f"[node] imported {names} ({image.archive.stat().st_size / 2**20:.1f} MiB) in {seconds:.1f} s")
    assert image.name in names
    real_node.kubectl("create", "namespace", NS)
    yield image.name
    real_node.kubectl("delete", "namespace", NS, "--wait=false")


def pod(name: str, image: str, node: str, script: str, labels: dict | None = None, volumes=()) -> dict:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": labels or {}},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "tolerations": [{"key": GPU_TAINT["key"], "operator": "Exists", "effect": "NoSchedule"}],
            "terminationGracePeriodSeconds": GRACE_S,
            "enableServiceLinks": False,
            "securityContext": {"runAsUser": TRAINING_UID, "runAsGroup": TRAINING_UID, "runAsNonRoot": True,
                                "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{
                "name": "main", "image": image, "imagePullPolicy": "Never", "args": ["-c", script],
                "securityContext": {"readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False,
                                    "capabilities": {"drop": ["ALL"]}},
                "volumeMounts": [{"name": v["name"], "mountPath": f"/{v['name']}"} for v in volumes],
            }],
            "volumes": list(volumes),
        },
    }  # fmt: skip


def wait_running(node, name: str, timeout: float = 180) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = json.loads(node.kubectl("get", "pod", "-n", NS, name, "-o", "json"))
        if got["status"].get("phase") == "Running" and all(
            s.get("ready") for s in got["status"].get("containerStatuses", [])
        ):
            return got
        assert got["status"].get("phase") not in ("Failed", "Succeeded"), got["status"]
        time.sleep(1)
    raise AssertionError(
        f"pod {name} not running after {timeout} s: {got['status']}\n"
        + node.kubectl("describe", "pod", "-n", NS, name, check=False)
    )


HTTP_GET = 'exec 3<>/dev/tcp/web/80; printf "GET / HTTP/1.0\\r\\nHost: web\\r\\n\\r\\n" >&3; cat <&3'
API_PLAIN_GET = 'exec 3<>/dev/tcp/10.96.0.1/443; printf "GET / HTTP/1.0\\r\\n\\r\\n" >&3; cat <&3'
MAIN = """
trap 'date +%s.%N > /out/sigterm; echo got SIGTERM; exit 143' TERM
echo "uid=$(id -u) gid=$(id -g)"
if touch /probe 2>/dev/null; then echo "root writable"; else echo "root read-only"; fi
echo ready
while true; do sleep 1 & wait $!; done
"""


def test_a_pod_runs_talks_and_ends_on_the_real_node(real_node, smoke, tmp_path):
    node = real_node
    info = json.loads(node.kubectl("get", "node", node.name, "-o", "json"))
    # The GPU pool's identity, no GPU, and the one loopback address the API server dials.
    assert {"key": GPU_TAINT["key"], "value": GPU_TAINT["value"], "effect": "NoSchedule"} in info["spec"]["taints"]
    assert info["metadata"]["labels"]["torchfleet.io/pool"] != "manager"
    assert "nvidia.com/gpu" not in info["status"]["capacity"]
    assert info["status"]["addresses"] == [{"type": "InternalIP", "address": node.host_ip}]

    # A web pod behind a ClusterIP Service.
    node.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([
        pod("web", smoke, node.name, "exec busybox httpd -f -p 8080 -h /srv", labels={"app": "web"}),
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": NS},
         "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}},
    ]))  # fmt: skip
    out = tmp_path / "out"  # where the pod writes when it gets SIGTERM (a hostPath: it outlives the pod)
    out.mkdir()
    os.chown(out, TRAINING_UID, TRAINING_UID)
    node.kubectl(
        "apply",
        "-f",
        "-",
        input=yaml.safe_dump(
            pod(
                "main",
                smoke,
                node.name,
                MAIN,
                volumes=[{"name": "out", "hostPath": {"path": str(out), "type": "Directory"}}],
            )
        ),
    )
    main = wait_running(node, "main")
    wait_running(node, "web")
    assert main["spec"]["nodeName"] == node.name
    assert main["status"]["podIP"].startswith("10.244.255.")

    # Logs through the API server -> kubelet: the user and the read-only root.
    logs = node.kubectl("logs", "-n", NS, "main")
    assert f"uid={TRAINING_UID} gid={TRAINING_UID}" in logs
    assert "root read-only" in logs

    # exec through the API server -> kubelet -> containerd's stream server.
    assert node.kubectl("exec", "-n", NS, "main", "--", "id", "-u").strip() == str(TRAINING_UID)
    # The Service by its short name (the pod's resolv.conf search list, CoreDNS behind kube-dns).
    resolved = node.kubectl("exec", "-n", NS, "main", "--", "getent", "hosts", "web").split()
    cluster_ip = json.loads(node.kubectl("get", "svc", "-n", NS, "web", "-o", "json"))["spec"]["clusterIP"]
    assert resolved[:2] == [cluster_ip, f"web.{NS}.svc.cluster.local"]
    # The pod behind it, through kube-proxy's nftables DNAT (bash's /dev/tcp: glibc's resolver again).
    page = node.kubectl("exec", "-n", NS, "main", "--", "timeout", "20", "bash", "-c", HTTP_GET)
    assert page.startswith("HTTP/1.1 200 OK") and page.endswith("\n\n" + node_images.SMOKE_PAGE), page
    # port-forward: this machine's loopback -> API server -> kubelet -> containerd -> the pod's port.
    port = free_port()
    forward = subprocess.Popen(
        [binary("kubectl"), f"--kubeconfig={node.cp.kubeconfig}", "port-forward", "-n", NS, "pod/web", f"{port}:8080"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert "Forwarding from 127.0.0.1" in forward.stdout.readline()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=20) as answer:
            assert answer.read().decode() == node_images.SMOKE_PAGE
    finally:
        forward.terminate()
        forward.wait(10)

    # The API from the pod, as in-cluster clients reach it: the `kubernetes` Service's ClusterIP on 443
    # answers as the API server's Go TLS listener does to plain HTTP, and the service-account token the
    # kubelet mounted is the pod's identity there.
    answer = node.kubectl("exec", "-n", NS, "main", "--", "timeout", "20", "bash", "-c", API_PLAIN_GET)
    assert "Client sent an HTTP request to an HTTPS server." in answer, answer
    token = node.kubectl("exec", "-n", NS, "main", "--", "cat", "/var/run/secrets/kubernetes.io/serviceaccount/token")
    whoami = subprocess.run(
        [binary("kubectl"), f"--kubeconfig={node.cp.kubeconfig}", f"--token={token}", "--user=", "auth", "whoami",
         "-o", "jsonpath={.status.userInfo.username}"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert whoami.stdout == f"system:serviceaccount:{NS}:default", whoami.stderr

    # Deleting the pod: SIGTERM from the kubelet, within the grace period.
    deleted = time.time()
    node.kubectl("delete", "pod", "-n", NS, "main", "--wait=true", timeout=GRACE_S + 60)
    gone = time.time()
    assert (out / "sigterm").is_file(), "the pod never got SIGTERM"
    signalled = float((out / "sigterm").read_text())
    print(f"[node] SIGTERM {signalled - deleted:.1f} s after the delete, pod gone after {gone - deleted:.1f} s")
    assert deleted - 1 <= signalled <= deleted + GRACE_S


def http_get(host: str, port: int) -> str:
    return (f'exec 3<>/dev/tcp/{host}/{port}; printf "GET / HTTP/1.0\\r\\nHost: {host}\\r\\n\\r\\n" >&3; '
            "cat <&3")  # fmt: skip


def test_pods_on_two_nodes_reach_each_other_by_ip_service_and_name(control_plane, smoke, tmp_path):
    """Two nodes on one fabric (fabric.py): each has a pod CIDR of its own, its Node's spec.podCIDR;
    a pod on node A reaches a pod on node B by its IP and through a ClusterIP Service whose endpoint
    is on B (kube-proxy on A), finds that Service by name (A's CoreDNS), and B's pod finds and reaches
    A's the same way. On one shared CIDR and no link between the nodes (the old node.py) none of it could."""
    from tests.controlplane.fabric import Fabric
    from tests.controlplane.node import RealNode

    with (
        Fabric.start() as fabric,
        RealNode.start(control_plane, tmp_path / "a", name="gpu-real-a", fabric=fabric) as a,
        RealNode.start(control_plane, tmp_path / "b", name="gpu-real-b", fabric=fabric) as b,
    ):
        assert a.pod_cidr != b.pod_cidr
        for node in (a, b):
            node.import_archive(node_images.smoke().archive, smoke.rsplit(":", 1)[0])
            spec = json.loads(node.kubectl("get", "node", node.name, "-o", "json"))["spec"]
            assert (spec["podCIDR"], spec["podCIDRs"]) == (node.pod_cidr, [node.pod_cidr])
        serve = "exec busybox httpd -f -p 8080 -h /srv"
        a.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([
            pod("web-a", smoke, a.name, serve, labels={"app": "web-a"}),
            pod("web-b", smoke, b.name, serve, labels={"app": "web-b"}),
            *({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": NS},
               "spec": {"selector": {"app": name}, "ports": [{"port": 80, "targetPort": 8080}]}}
              for name in ("web-a", "web-b")),
        ]))  # fmt: skip
        ips = {}
        for name, node in (("web-a", a), ("web-b", b)):
            got = wait_running(a, name)
            assert got["spec"]["nodeName"] == node.name
            ips[name] = got["status"]["podIP"]
            assert ipaddress.ip_address(ips[name]) in ipaddress.ip_network(node.pod_cidr), (ips[name], node.pod_cidr)
        for client, other in (("web-a", "web-b"), ("web-b", "web-a")):
            exec_ = ["exec", "-n", NS, client, "--", "timeout", "20", "bash", "-c"]
            direct = a.kubectl(*exec_, http_get(ips[other], 8080))  # pod to pod across the fabric
            assert direct.endswith("\n\n" + node_images.SMOKE_PAGE), (client, direct)
            resolved = a.kubectl("exec", "-n", NS, client, "--", "getent", "hosts", other).split()
            cluster_ip = json.loads(a.kubectl("get", "svc", "-n", NS, other, "-o", "json"))["spec"]["clusterIP"]
            assert resolved[:2] == [cluster_ip, f"{other}.{NS}.svc.cluster.local"], (client, resolved)
            served = a.kubectl(*exec_, http_get(other, 80))  # the Service on this node, its endpoint on the other
            assert served.startswith("HTTP/1.1 200 OK") and served.endswith("\n\n" + node_images.SMOKE_PAGE), served

        # B lost (lose(): a spot reclaim): every process of it dead at once, its Node object kept and
        # still Ready (nothing told the API server), its pod unreachable from A.
        pids = [p.pid for _, p, _ in b._procs] + [b._holder.pid]
        holder_mnt = os.readlink(f"/proc/{b._holder.pid}/ns/mnt")
        shims = [int(pid) for pid in filter(str.isdigit, os.listdir("/proc"))
                 if _mnt(pid) == holder_mnt and b"containerd-shim" in _cmdline(pid)]  # fmt: skip
        tops = [c / b.cgroup.lstrip("/") for c in _cgroup_mounts()]
        in_pods = [int(pid) for top in tops if top.is_dir()
                   for procs in top.rglob("cgroup.procs") for pid in procs.read_text().split()]  # fmt: skip
        assert shims and in_pods, "B's pod's shim and containers, before the loss"
        b.lose()
        assert [pid for pid in [*pids, *shims, *in_pods] if os.path.exists(f"/proc/{pid}") and not _zombie(pid)] == []
        node_b = json.loads(a.kubectl("get", "node", b.name, "-o", "json"))
        assert node_b["metadata"].get("deletionTimestamp") is None
        unreachable = a.kubectl("exec", "-n", NS, "web-a", "--", "timeout", "5", "bash", "-c",
                                http_get(ips["web-b"], 8080), check=False)  # fmt: skip
        assert node_images.SMOKE_PAGE not in unreachable
        assert b._lost_pod_netns, "its pod's network namespace, read before the loss"
        names = (b.netns, b.root, b.cgroup, fabric.netns, b._lost_pod_netns)
        a.kubectl("delete", "pod,service", "-n", NS, "web-a", "web-b", "--wait=false")
    # Stopped after the loss: nothing of B (or of the fabric) is left.
    netns, root, cgroup, fabric_netns, pod_netns = names
    assert [c / cgroup.lstrip("/") for c in _cgroup_mounts() if (c / cgroup.lstrip("/")).exists()] == []
    assert {netns, fabric_netns, *pod_netns} & set(os.listdir("/var/run/netns")) == set()
    assert not root.exists() and str(root) not in Path("/proc/self/mountinfo").read_text()
    assert "node/gpu-real-b" not in nodes_once_gone(control_plane, "gpu-real-b")


def test_the_node_runs_the_control_planes_kubernetes():
    """kubelet and kube-proxy come from their own tools module (so adding them relinked none of the
    control plane's binaries) at the very k8s.io/kubernetes release the API server is built from."""
    from tests.controlplane import build

    api = build.pinned_version(build.BY_NAME["kube-apiserver"])
    assert api.startswith("k8s.io/kubernetes v")
    for name in ("kubelet", "kube-proxy"):
        assert build.pinned_version(build.BY_NAME[name]) == api


def test_a_missing_tool_fails_the_node_naming_the_package(monkeypatch):
    from tests.controlplane import node as node_module

    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(node_module.NodeError, match=r"missing containerd, ctr, runc, nft, socat.*apt-get install"):
        node_module.require()


def test_an_oci_layout_imports_and_a_tag_only_archive_needs_a_repository(real_node, smoke, tmp_path):
    """import_archive, the training image's way onto the node: an OCI layout folder is imported as
    its archive is; an archive whose index names its image by tag only (umoci's) is refused without
    BASE_NAME, with a message saying so, rather than importing nothing silently."""
    from tests.controlplane.node import NodeError

    archive = node_images.smoke().archive
    layout = tmp_path / "layout"
    layout.mkdir()
    subprocess.run(["tar", "-C", str(layout), "-xf", str(archive)], check=True)
    names, _ = real_node.import_archive(layout, "torchfleet.local/from-layout")
    assert names == [f"torchfleet.local/from-layout:{smoke.rsplit(':', 1)[1]}"]
    assert names[0] in real_node.ctr("images", "ls", "-q")
    before = real_node.ctr("images", "ls", "-q")
    with pytest.raises(NodeError, match=f"by tag only \\({smoke.rsplit(':', 1)[1]}\\): pass base_name"):
        real_node.import_archive(archive)
    assert real_node.ctr("images", "ls", "-q") == before  # refused before anything was imported


def test_stopping_a_node_with_a_running_pod_leaves_nothing(control_plane, real_node, smoke, tmp_path):
    """A second node, advertising one fake GPU, a pod asking for it left running on it, then
    stop(): no process of it, no cgroup in any
    hierarchy (the hybrid layout's unified one included), no network namespace (its own or
    containerd's pod netns), no mount under its folder, no folder, no Node; the host's nftables
    untouched (kube-proxy's tables lived in the node's namespace)."""
    from tests.controlplane.node import RealNode

    host_tables = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True).stdout
    netns_before = set(os.listdir("/var/run/netns"))
    with RealNode.start(control_plane, tmp_path / "node", name="gpu-real-stop", fake_gpus=1) as other:
        other.import_archive(node_images.smoke().archive, smoke.rsplit(":", 1)[0])
        left = pod("left", smoke, other.name, MAIN)
        # as a GPU pool's training pod: one GPU requested (fake_gpus advertises it; nothing behind it)
        left["spec"]["containers"][0]["resources"] = {"limits": {GPU_RESOURCE: "1"}}
        other.kubectl("apply", "-f", "-", input=yaml.safe_dump(left))
        wait_running(other, "left")
        pids = [p.pid for _, p, _ in other._procs] + [other._holder.pid]
        holder_mnt = os.readlink(f"/proc/{other._holder.pid}/ns/mnt")
        shims = [int(pid) for pid in filter(str.isdigit, os.listdir("/proc"))
                 if _mnt(pid) == holder_mnt and b"containerd-shim" in _cmdline(pid)]  # fmt: skip
        assert shims, "the running pod's shim, in the node's mount namespace"
        cgroups = [h / other.cgroup.lstrip("/") for h in _cgroup_mounts()]
        names = (other.netns, other.root, other.name)
    netns, root, name = names
    assert [pid for pid in [*pids, *shims] if os.path.exists(f"/proc/{pid}") and not _zombie(pid)] == []
    assert [c for c in cgroups if c.exists()] == []
    assert netns not in os.listdir("/var/run/netns")
    assert {n for n in set(os.listdir("/var/run/netns")) - netns_before if n.startswith("cni-")} == set()
    assert str(root) not in Path("/proc/self/mountinfo").read_text()
    assert not root.exists()
    assert subprocess.run(["nft", "list", "tables"], capture_output=True, text=True).stdout == host_tables
    deadline = time.monotonic() + 60
    while name in real_node.kubectl("get", "nodes", "-o", "name") and time.monotonic() < deadline:
        time.sleep(1)
    assert f"node/{name}" not in real_node.kubectl("get", "nodes", "-o", "name")


def nodes_once_gone(cp, name: str) -> str:
    """`kubectl get nodes -o name`, once NAME's deletion is through (a hang detector: 60 s)."""
    deadline = time.monotonic() + 60
    while True:
        names = subprocess.run([binary("kubectl"), f"--kubeconfig={cp.kubeconfig}", "get", "nodes", "-o", "name"],
                               capture_output=True, text=True, timeout=60).stdout  # fmt: skip
        if f"node/{name}" not in names or time.monotonic() > deadline:
            return names
        time.sleep(1)


def _mnt(pid: str) -> str:
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt")
    except OSError:
        return ""


def _cgroup_mounts() -> list[Path]:
    """Every cgroup hierarchy mounted here, v1 and v2 (read apart from node.py's own list)."""
    mounts = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        if right.split()[0] in ("cgroup", "cgroup2"):
            mounts.append(Path(left.split()[4]))
    return mounts


def _cmdline(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except OSError:
        return True
