"""A real node beside the kwok nodes (issue 31): kubelet, containerd and runc, a CNI bridge,
kube-proxy in nftables mode, in a network namespace of its own, and CoreDNS as a kube-system pod on it.

    with RealNode.start(control_plane, workdir) as node:
        node.name              # 'gpu-real-0': labelled and tainted as the GPU pool's nodes are
        node.import_archive(path, base_name)   # an OCI archive into containerd (k8s.io namespace)

Network (the tier touches only loopback and namespaces it makes): the node lives in netns
tfnode-<hex>. Inside it are a bridge tfnode0 (10.244.255.1/24, the pods' CIDR, private to the
namespace; a node on a fabric gets its own CIDR, fabric.py; its Node's spec.podCIDR says which),
containerd with the CNI bridge plugin (Debian's containernetworking-plugins) giving
each pod a veth on it, kube-proxy's nftables tables, and a CoreDNS pod behind the kube-dns Service
(10.96.0.10), as EKS, GKE and AKS run the cluster DNS (a DaemonSet's pod on each real node:
_rbac_and_dns; its image from platform_images.coredns).
Two relays over Unix sockets, which cross network namespaces, join it to the host's loopback:
- the namespace's 127.0.0.1:<api port> -> the API server on the host's 127.0.0.1:<api port>, so
  the kubelet and kube-proxy use the API server's own address and certificate;
- the host's 127.0.0.N:<kubelet port> -> the kubelet on the namespace's 127.0.0.1. The API server
  dials a node's first address of --kubelet-preferred-address-types (default Hostname, InternalDNS,
  InternalIP, ...: pkg/kubelet/client/kubelet_client.go, NodeConnectionInfoGetter). The kubelet
  refuses a loopback --node-ip (kubelet_node_status.go validateNodeIP), so it runs with
  --cloud-provider=external and no --node-ip, which leaves the addresses to a cloud controller
  (nodestatus/setters.go NodeAddress: 'wait for the external cloud-provider to set the node
  addresses', and an address once set is kept): this fixture is that controller. It sets one
  InternalIP, 127.0.0.N, and removes the node.cloudprovider.kubernetes.io/uninitialized taint.
  So logs, exec and port-forward go API server -> relay -> kubelet -> containerd's stream server.
- pods -> the `kubernetes` Service (10.96.0.1:443) -> an EndpointSlice naming the bridge address's
  port 443, where the API relay listens too: the API server cannot publish its loopback address itself.
- Two or more nodes (fabric.py): their namespaces joined by a bridge in a namespace of its own, each
  routing the others' pod CIDRs, so a pod reaches a pod or a Service endpoint on another node. The
  `kubernetes` and kube-dns Services have internalTrafficPolicy Local (kube-proxy sends a node's
  traffic only to the endpoints named with its nodeName): each node's relay and CoreDNS pod serve its
  own pods, as a node-local DNS cache does, and a lost node's endpoints (RealNode.lose) are never
  tried by the others.

Mounts: containerd and the kubelet share a mount namespace of their own (`unshare --mount
--propagation slave`), so the containers' overlay roots and the kubelet's volume mounts never
appear in the host's mount table and vanish with the last process in it. Its /run/netns is a tmpfs
of its own: the pod network namespaces containerd makes there are files of that node alone (in the
host's /run/netns they were left behind by a killed node, and indistinguishable from another live
node's there, as bind mounts private to each node's namespace).
cgroups (v1 here; failCgroupV1: false, cgroupDriver cgroupfs): every pod's cgroup lies under
/tfnode-<hex> in each hierarchy (the kubelet's cgroupRoot), removed at the end. containerd's root,
state and runc's root, the kubelet's root and pod logs, host-local's IP leases: under one temp folder.

Identities (certificates signed by the tier's CA): the kubelet as system:node:<name> (group
system:nodes, the Node authorizer), kube-proxy as system:kube-proxy (bound to system:node-proxier
by the API server), CoreDNS as its pod's service account with kubeadm's ClusterRole; the API server reaches
the kubelet as kube-apiserver-kubelet-client (cluster.py), bound to system:kubelet-api-admin, and
the kubelet authenticates it by the CA and authorizes it by SubjectAccessReview (no anonymous).

Losing a node (RealNode.lose), as a spot reclaim does: its containers frozen (the freezer
cgroup), then the kubelet, containerd, its shims, kube-proxy, the relays and the containers (CoreDNS's too)
SIGKILLed, and its link to the fabric cut, with nothing told to the API server: the Node object stays,
its Lease stops being renewed, and the control plane finds out as it would (stop() cleans up after).

Failures: a missing tool or binary, or a component not up in time, raise NodeError with the reason
and the component's last log lines; the fixture fails the test with it (never skips).
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import tarfile
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from components.spec import GPU_RESOURCE, GPU_TAINT, LABEL_ZONE
from tests.controlplane import node_images, platform_images
from tests.controlplane.cluster import (
    KUBELET_CLIENT,
    SERVICE_CIDR,
    ControlPlane,
    binary,
    openssl,
    spawn_group,
    stop_groups,
)
from tests.controlplane.cluster import POD_CIDR as CLUSTER_POD_CIDR
from tests.controlplane.fabric import Fabric

POD_CIDR = "10.244.255.0/24"  # inside the node's netns only; kwok's fake pod IPs stay far below it
BRIDGE, BRIDGE_IP = "tfnode0", "10.244.255.1"  # a single node's; fabric.py numbers each node's
DNS_SERVICE_IP = "10.96.0.10"  # kube-dns, in cluster.py's SERVICE_CIDR, as kubeadm numbers it
API_PORT_FOR_PODS = 443  # where the API relay listens for pods, behind the `kubernetes` Service's 443
CLUSTER_DOMAIN = "cluster.local"
CNI_BIN = Path("/usr/lib/cni")  # Debian's containernetworking-plugins
START_TIMEOUT_S = 180
APT = "apt-get install containerd runc containernetworking-plugins nftables socat util-linux iproute2"
UNINITIALIZED = "node.cloudprovider.kubernetes.io/uninitialized"
GPU_STACK = "aws-usw2"  # the pool whose node this is (layer.GPU_STACK, the kwok nodes' stack)


class NodeError(RuntimeError):
    """The real node cannot start here; the fixture fails with it."""


def _run(argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)
    if done.returncode != 0:
        raise NodeError(f"{' '.join(map(str, argv))} exited {done.returncode}: {(done.stderr or done.stdout)[-2000:]}")
    return done


def require() -> None:
    """Every tool the node needs, or a NodeError naming what is missing and how to install it."""
    missing = [
        t for t in ("containerd", "ctr", "runc", "nft", "socat", "unshare", "nsenter", "ip") if shutil.which(t) is None
    ]
    missing += [str(CNI_BIN / p) for p in ("bridge", "host-local", "loopback") if not (CNI_BIN / p).exists()]
    if missing:
        raise NodeError(f"missing {', '.join(missing)}: {APT} (.ci/setup does)")
    if os.geteuid() != 0:
        raise NodeError(f"the real node needs root (network namespace, cgroups, containerd): uid {os.geteuid()}")
    for name in ("kubelet", "kube-proxy", "coredns"):
        binary(name)  # a ControlPlaneError naming the build command


def gpu_pool_identity() -> tuple[dict[str, str], list[dict[str, str]]]:
    """The labels and taints of the first GPU pool of GPU_STACK, as the kwok nodes carry them
    (nodes.gpu_nodes), without the GPUs: this node has none (RealNode.start's fake_gpus aside)."""
    from tests.controlplane import nodes

    pool = nodes.stack_spec(GPU_STACK).gpu_pools[0]
    labels = {**pool.labels, LABEL_ZONE: pool.zone, "torchfleet.test/node": "real"}
    return labels, [dict(GPU_TAINT)]


def tag_only_refs(archive: Path) -> list[str]:
    """The refs an OCI archive's index.json names by tag only (org.opencontainers.image.ref.name
    without a repository, and no io.containerd.image.name): what umoci writes ('cpu')."""
    with tarfile.open(archive) as tar:
        member = next((m for m in tar if m.name.removeprefix("./") == "index.json"), None)
        if member is None:  # a docker-save archive: its manifest.json names full references
            return []
        index = json.load(tar.extractfile(member))
    refs = []
    for manifest in index.get("manifests", []):
        annotations = manifest.get("annotations") or {}
        ref = annotations.get("org.opencontainers.image.ref.name", "")
        if ref and "io.containerd.image.name" not in annotations and "/" not in ref and ":" not in ref:
            refs.append(ref)
    return refs


def _loopback_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _pick_loopback() -> str:
    """A 127.0.0.N of the host (2..254) with nothing listening yet on it."""
    for _ in range(50):
        host = f"127.0.0.{random.randint(2, 254)}"
        with contextlib.suppress(OSError):
            _loopback_port(host)
            return host
    raise NodeError("no free 127.0.0.N address to give the node")


def _cert(pki: Path, name: str, subject: str) -> None:
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
            "-subj", subject, cwd=pki)  # fmt: skip
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", f"{name}.crt", "-days", "2", cwd=pki)  # fmt: skip


def _kubeconfig(path: Path, server: str, pki: Path, name: str) -> None:
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "controlplane",
        "clusters": [{"name": "controlplane", "cluster": {"server": server,
                                                          "certificate-authority": str(pki / "ca.crt")}}],
        "users": [{"name": name, "user": {"client-certificate": str(pki / f"{name}.crt"),
                                          "client-key": str(pki / f"{name}.key")}}],
        "contexts": [{"name": "controlplane", "context": {"cluster": "controlplane", "user": name}}],
    }  # fmt: skip
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)


def _api_slice(name: str, api_port: int, bridge_ip: str) -> dict:
    return {
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
        "metadata": {"name": f"kubernetes-{name}", "namespace": "default",
                     "labels": {"kubernetes.io/service-name": "kubernetes",
                                "endpointslice.kubernetes.io/managed-by": "torchfleet-tests"}},
        "endpoints": [{"addresses": [bridge_ip], "conditions": {"ready": True}, "nodeName": name}],
        "ports": [{"name": "https", "port": api_port, "protocol": "TCP"}],
    }  # fmt: skip


COREDNS_LABELS = {"k8s-app": "kube-dns"}  # kubeadm's, which the kube-dns Service selects
# The Corefile: the cluster domain from the API (in-cluster: the pod's service account), no upstream (the
# tier has no outside), `ready` for the readiness probe, so the Service names the pod once CoreDNS has synced.
COREFILE = f""".:53 {{
    errors
    ready :8181
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }}
    cache 5
}}
"""


# kubeadm's CoreDNS ClusterRole (cmd/kubeadm/app/phases/addons/dns/manifests.go, CoreDNSClusterRole),
# and the bindings kubeadm makes at init for the API server's kubelet client.
def _rbac_and_dns(coredns_image: str) -> list[dict]:
    """Cluster-wide objects of every real node, applied by each (the same each time): the API server's kubelet
    client's binding, and the cluster DNS as EKS, GKE and AKS run it, CoreDNS pods in kube-system behind the
    kube-dns Service, here one per real node (a DaemonSet on the nodes labelled torchfleet.test/node=real),
    so that NetworkPolicy treats DNS as it does there: allow-dns admits pods of kube-system."""
    labels = dict(COREDNS_LABELS)
    return [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "system:coredns"},
         "rules": [{"apiGroups": [""], "resources": ["endpoints", "services", "pods", "namespaces"],
                    "verbs": ["list", "watch"]},
                   {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]}]},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "coredns", "namespace": "kube-system"}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": "system:coredns"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:coredns"},
         "subjects": [{"kind": "ServiceAccount", "name": "coredns", "namespace": "kube-system"}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": "kubeadm:kube-apiserver-kubelet-client"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": "system:kubelet-api-admin"},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": KUBELET_CLIENT}]},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "coredns", "namespace": "kube-system"},
         "data": {"Corefile": COREFILE}},
        # kubeadm's CoreDNS Deployment's pod (cmd/kubeadm/app/phases/addons/dns/manifests.go), as a DaemonSet.
        {"apiVersion": "apps/v1", "kind": "DaemonSet",
         "metadata": {"name": "coredns", "namespace": "kube-system", "labels": labels},
         "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
             "serviceAccountName": "coredns", "priorityClassName": "system-node-critical",
             "nodeSelector": {"torchfleet.test/node": "real"}, "tolerations": [{"operator": "Exists"}],
             "containers": [{
                 "name": "coredns", "image": coredns_image, "imagePullPolicy": "Never",
                 "args": ["-conf", "/etc/coredns/Corefile"],
                 "ports": [{"name": "dns", "containerPort": 53, "protocol": "UDP"},
                           {"name": "dns-tcp", "containerPort": 53, "protocol": "TCP"}],
                 "readinessProbe": {"httpGet": {"path": "/ready", "port": 8181}, "periodSeconds": 2},
                 "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                     "capabilities": {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]}},
                 "volumeMounts": [{"name": "config", "mountPath": "/etc/coredns", "readOnly": True}],
             }],
             "volumes": [{"name": "config", "configMap": {"name": "coredns"}}],
         }}}},
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": "kube-dns", "namespace": "kube-system", "labels": labels},
         # Local: each node's pods ask the CoreDNS pod of their own node (the module's docstring).
         "spec": {"clusterIP": DNS_SERVICE_IP, "internalTrafficPolicy": "Local", "selector": labels,
                  "ports": [{"name": "dns", "port": 53, "protocol": "UDP"},
                            {"name": "dns-tcp", "port": 53, "protocol": "TCP"}]}},
    ]  # fmt: skip


@dataclass
class RealNode:
    cp: ControlPlane
    workdir: Path  # logs
    name: str = "gpu-real-0"
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, str]] = field(default_factory=list)
    host_ip: str = ""  # the node's InternalIP: 127.0.0.N on the host
    kubelet_port: int = 0
    netns: str = ""
    root: Path = field(default_factory=Path)  # /tmp/tfnode-XXXX: sockets, state (short for socket paths)
    cgroup: str = ""
    fake_gpus: int = 0
    network_policy: bool = False  # kube-router enforces NetworkPolicy on its pods (start()'s doc)
    fabric: Fabric | None = None  # the network to other nodes (fabric.py), or None: a node alone
    pod_cidr: str = POD_CIDR
    bridge_ip: str = BRIDGE_IP  # the pods' gateway and the API relay's address for them
    lost: bool = False  # lose() ran: nothing of the node runs; stop() still cleans up
    started_s: float = 0.0  # seconds from start() to the node Ready with kube-proxy and its CoreDNS pod up
    _procs: list[tuple[str, subprocess.Popen, Path]] = field(default_factory=list)
    _holder: subprocess.Popen | None = None
    _lost_pod_netns: set[str] = field(default_factory=set)  # its pods' namespaces, read before lose()

    @classmethod
    @contextlib.contextmanager
    def start(
        cls,
        cp: ControlPlane,
        workdir: Path,
        name: str = "gpu-real-0",
        fake_gpus: int = 0,
        fabric: Fabric | None = None,
        network_policy: bool = False,
    ) -> Iterator[RealNode]:
        """FAKE_GPUS: nvidia.com/gpu the node advertises with no GPU behind it (an extended resource
        set on its status, which the kubelet keeps: no device plugin owns it), so that pods which
        request one in every container, as a GPU pool's training pods must, are placed and run here.
        FABRIC: the network joining this node to the other nodes on it (fabric.py); the node gets
        the fabric's next pod CIDR.
        NETWORK_POLICY: NetworkPolicy enforced on the node's pods (kube-router's policy controller,
        _start_kube_router); off by default: it adds its start and a full sync per change."""
        labels, taints = gpu_pool_identity()
        node = cls(cp, Path(workdir), name, labels, taints, fake_gpus=fake_gpus, fabric=fabric)
        node.network_policy = network_policy
        try:
            node._start()
            yield node
        finally:
            node.stop()

    # ---- helpers -------------------------------------------------------------------------------
    @property
    def containerd_socket(self) -> Path:
        return self.root / "containerd.sock"

    def _in_node(self, argv: list[str]) -> list[str]:
        """ARGV in the node's network namespace and its mount namespace."""
        assert self._holder is not None
        return ["nsenter", f"--mount=/proc/{self._holder.pid}/ns/mnt", f"--net=/var/run/netns/{self.netns}", *argv]

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen:
        log = self.workdir / f"{name}.log"
        popen = spawn_group(argv, log)
        self._procs.append((name, popen, log))
        return popen

    def _tail(self, name: str, lines: int = 30) -> str:
        for proc_name, _, log in self._procs:
            if proc_name == name:
                with contextlib.suppress(OSError):
                    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def _wait(self, what: str, ready, process: str, timeout: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, popen, _ in self._procs:
                if popen.poll() is not None:
                    raise NodeError(f"{name} exited {popen.returncode} while waiting for {what}:\n{self._tail(name)}")
            with contextlib.suppress(Exception):
                if ready():
                    return
            time.sleep(0.5)
        raise NodeError(f"{what} not ready after {timeout:.0f} s; {process} logged:\n{self._tail(process)}")

    def kubectl(self, *args: str, input: str | None = None, check: bool = True, timeout: float = 120) -> str:
        done = subprocess.run(
            [binary("kubectl"), f"--kubeconfig={self.cp.kubeconfig}", *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and done.returncode != 0:
            raise NodeError(f"kubectl {' '.join(args)} exited {done.returncode}: {done.stderr}")
        return done.stdout

    def ctr(self, *args: str, timeout: float = 600) -> str:
        return _run(["ctr", "--address", str(self.containerd_socket), "-n", "k8s.io", *args], timeout=timeout).stdout

    def _ctr_best_effort(self, *args: str) -> None:
        """ctr on this node's containerd, its failure ignored (teardown: the task may be gone already)."""
        subprocess.run(["ctr", "--address", str(self.containerd_socket), "-n", "k8s.io", *args], capture_output=True)

    def import_archive(self, archive: Path, base_name: str = "") -> tuple[list[str], float]:
        """Import an OCI archive (a tar of an OCI image layout, or a docker-save tar; an OCI layout
        folder is tarred first) into this node's containerd, in the k8s.io namespace the CRI reads,
        unpacked for its snapshotter: the image is then on the node, for pods with imagePullPolicy
        Never (or IfNotPresent and a tag).

        BASE_NAME: for an archive whose index names its images by tag only (umoci, `ref.name: cpu`),
        the repository they get ('torchfleet.local/trainer' -> 'torchfleet.local/trainer:cpu'); an
        archive naming full references (io.containerd.image.name) needs none. Returns the names now
        present from this archive and the seconds the import took."""
        started = time.monotonic()
        with tempfile.TemporaryDirectory(dir=self.root) as scratch:
            if Path(archive).is_dir():  # an OCI layout folder (umoci's): ctr reads only archives
                _run(["tar", "-C", str(archive), "-cf", f"{scratch}/image.tar", "."])
                archive = Path(scratch) / "image.tar"
            if not base_name and (tags := tag_only_refs(archive)):
                # ctr would name them import-<date>:<tag>, which no pod's image field resolves to.
                raise NodeError(
                    f"{archive} names its images by tag only ({', '.join(tags)}): pass base_name, "
                    "the repository they get (torchfleet.local/trainer -> torchfleet.local/trainer:TAG)"
                )
            out = self.ctr("images", "import", *(["--base-name", base_name] if base_name else []), str(archive))
        seconds = time.monotonic() - started
        names = [line.split()[1] for line in out.splitlines() if line.startswith("unpacking ")]
        if not names:
            raise NodeError(f"ctr images import {archive} imported nothing: {out}")
        return names, seconds

    # ---- lifecycle -----------------------------------------------------------------------------
    def _start(self) -> None:
        started = time.monotonic()
        require()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.root = Path(tempfile.mkdtemp(prefix="tfnode-", dir="/tmp"))
        hexid = uuid.uuid4().hex[:8]
        self.netns, self.cgroup = f"tfnode-{hexid}", f"/tfnode-{hexid}"
        self.host_ip = _pick_loopback()
        self.kubelet_port = _loopback_port(self.host_ip)
        api_port = int(self.cp.server.rsplit(":", 1)[1])
        node_server = f"https://127.0.0.1:{api_port}"  # the same address inside the netns, by the relay
        fabric_index = 0
        if self.fabric is not None:
            fabric_index, self.pod_cidr = self.fabric.allocate()
            self.bridge_ip = str(next(ipaddress.ip_network(self.pod_cidr).hosts()))

        # The network namespace: loopback, and the pods' bridge with the node's address on it.
        _run(["ip", "netns", "add", self.netns])
        nsx = ["ip", "netns", "exec", self.netns]
        _run([*nsx, "ip", "link", "set", "lo", "up"])
        _run([*nsx, "ip", "link", "add", BRIDGE, "type", "bridge"])
        _run([*nsx, "ip", "addr", "add", f"{self.bridge_ip}/24", "dev", BRIDGE])
        _run([*nsx, "ip", "link", "set", BRIDGE, "up"])
        # The Services' range routed onto the bridge: the node's own processes (the DNS probe,
        # hostNetwork pods) reach ClusterIPs through kube-proxy's output DNAT, as a node's default route
        # lets them; with no route at all the kernel refuses before nftables sees the packet.
        _run([*nsx, "ip", "route", "add", SERVICE_CIDR, "dev", BRIDGE])
        # Routing between pods and Services, and bridged traffic through nftables (br_netfilter), so
        # a reply from a pod behind a ClusterIP to a pod on the same bridge is un-NATed: per netns.
        _run([*nsx, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.bridge.bridge-nf-call-iptables=1"])
        if self.fabric is not None:
            self.fabric.join(self.netns, fabric_index, self.pod_cidr)
        # The mount namespace containerd and the kubelet share (see the module's docstring).
        self._holder = spawn_group(
            ["unshare", "--mount", "--propagation", "slave", "sleep", "infinity"], self.workdir / "holder.log"
        )
        self._wait(
            "the mount namespace",
            lambda: os.readlink(f"/proc/{self._holder.pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt"),
            "holder",
            30,
        )
        # The node's own /run/netns (the module's docstring): nsenter opens the node's netns file
        # (the host's /run/netns/tfnode-*) before it enters the mount namespace, so that still works.
        _run(["nsenter", f"--mount=/proc/{self._holder.pid}/ns/mnt", "mount", "-t", "tmpfs", "-o",
              "mode=0755,size=1m", "tfnode-netns", "/run/netns"])  # fmt: skip
        self._make_cgroup()

        pki = self.root / "pki"
        pki.mkdir()
        cp_pki = self.cp.workdir / "pki"
        for name in ("ca.crt", "ca.key"):
            shutil.copy(cp_pki / name, pki / name)
        _cert(pki, "kubelet", f"/CN=system:node:{self.name}/O=system:nodes")
        _cert(pki, "kube-proxy", "/CN=system:kube-proxy")
        for name in ("kubelet", "kube-proxy"):
            _kubeconfig(self.root / f"{name}.kubeconfig", node_server, pki, name)
        coredns = platform_images.coredns(log=lambda line: None)
        self.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(_rbac_and_dns(coredns.name)))

        # The relays: the netns's 127.0.0.1:<api port> -> the host's API server.
        api_sock = self.root / "api.sock"
        self._spawn("relay-api-host", ["socat", f"UNIX-LISTEN:{api_sock},fork,mode=600", f"TCP:127.0.0.1:{api_port}"])
        self._wait("the API relay socket", api_sock.exists, "relay-api-host", 30)
        self._spawn(
            "relay-api-node",
            [*nsx, "socat", f"TCP-LISTEN:{api_port},bind=127.0.0.1,reuseaddr,fork", f"UNIX-CONNECT:{api_sock}"],
        )
        # Pods reach the API as in a cluster, through the `kubernetes` Service (10.96.0.1:443, in the
        # serving certificate). The API server cannot publish its own endpoint: 127.0.0.1 is refused
        # ('may not be in the loopback range', its log), so that Service has none. This slice gives it
        # the node's bridge address, where the same relay listens for the pods.
        # It listens on 443, the API server's port in a cloud (EKS, GKE, AKS), so that a NetworkPolicy admitting
        # egress to the API by port (the etcd gate's, the node healer's) is tried here as there: policies see
        # the endpoint's port, after kube-proxy's DNAT.
        self._spawn(
            "relay-api-pods",
            [*nsx, "socat", f"TCP-LISTEN:{API_PORT_FOR_PODS},bind={self.bridge_ip},reuseaddr,fork",
             f"UNIX-CONNECT:{api_sock}"],
        )  # fmt: skip
        self.kubectl("apply", "-f", "-", input=yaml.safe_dump(_api_slice(self.name, API_PORT_FOR_PODS, self.bridge_ip)))
        # Each node's pods to its own relay (the module's docstring). The API server keeps the Service's
        # ports and type only (k8s.io/kubernetes v1.35.4 pkg/controlplane/controller/kubernetesservice/
        # controller.go, getMasterServiceUpdateIfNeeded), so the policy set here stays.
        self.kubectl("patch", "service", "kubernetes", "-n", "default", "-p",
                     json.dumps({"spec": {"internalTrafficPolicy": "Local"}}))  # fmt: skip

        self._start_containerd()
        for image in (node_images.pause(log=lambda line: None), coredns):
            self.import_archive(image.archive, image.name.rsplit(":", 1)[0])
        self._start_kubelet(pki)
        self._initialize_node()
        # The host's 127.0.0.N:<port> -> the kubelet on the netns's 127.0.0.1:<port>.
        kubelet_sock = self.root / "kubelet.sock"
        self._spawn(
            "relay-kubelet-node",
            [*nsx, "socat", f"UNIX-LISTEN:{kubelet_sock},fork,mode=600", f"TCP:127.0.0.1:{self.kubelet_port}"],
        )
        self._wait("the kubelet relay socket", kubelet_sock.exists, "relay-kubelet-node", 30)
        self._spawn(
            "relay-kubelet-host",
            [
                "socat",
                f"TCP-LISTEN:{self.kubelet_port},bind={self.host_ip},reuseaddr,fork",
                f"UNIX-CONNECT:{kubelet_sock}",
            ],
        )
        self._start_kube_proxy()
        if self.network_policy:
            self._start_kube_router(pki)
        self._wait(f"node {self.name} Ready", self._ready, "kubelet")
        self._wait_coredns()
        self.started_s = time.monotonic() - started

    def _make_cgroup(self) -> None:
        """The kubelet's cgroupRoot in every v1 hierarchy (it must exist: the kubelet checks), with
        cpuset's cpus and mems copied from the root, as a new cpuset cgroup starts empty."""
        for hierarchy in self._hierarchies():
            folder = hierarchy / self.cgroup.lstrip("/")
            folder.mkdir(exist_ok=True)
            if hierarchy.name == "cpuset":
                for knob in ("cpuset.cpus", "cpuset.mems"):
                    (folder / knob).write_text((hierarchy / knob).read_text())

    @staticmethod
    def _hierarchies() -> list[Path]:
        out = []
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            fields = line.split()
            fstype = fields[fields.index("-") + 1]
            if fstype in ("cgroup", "cgroup2"):  # v1's, and the hybrid layout's unified one
                out.append(Path(fields[4]))
        return out

    def _start_containerd(self) -> None:
        state, croot = self.root / "containerd-state", self.root / "containerd-root"
        cni = self.root / "cni"
        (cni / "net.d").mkdir(parents=True)
        # The CNI bridge: pods on tfnode0, addresses from POD_CIDR by host-local (its leases here, not
        # /var/lib/cni), the bridge's address as their gateway, no masquerade (nothing outside to reach).
        (cni / "net.d" / "10-tfnode.conflist").write_text(json.dumps({
            "cniVersion": "1.0.0", "name": "tfnode",
            "plugins": [{"type": "bridge", "bridge": BRIDGE, "isGateway": True, "ipMasq": False,
                         "hairpinMode": True,
                         "ipam": {"type": "host-local",
                                  "ranges": [[{"subnet": self.pod_cidr, "gateway": self.bridge_ip}]],
                                  "routes": [{"dst": "0.0.0.0/0"}], "dataDir": str(cni / "leases")}}],
        }, indent=1))  # fmt: skip
        pause = node_images.pause(log=lambda line: None)
        config = f"""version = 2
root = "{croot}"
state = "{state}"
# Plugins that would write outside root/state (/opt/containerd) or are unused here.
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "{self.containerd_socket}"
[ttrpc]
  address = "{self.containerd_socket}.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause.name}"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  # The kubelet asks -998 for sandboxes and -997 for Guaranteed pods; lowering an oom_score_adj needs
  # CAP_SYS_RESOURCE, which root here lacks (CapEff of /proc/self/status: bit 24 clear), so runc's
  # nsexec failed ('failed to update /proc/self/oom_score_adj: Permission denied'). This keeps each
  # at least containerd's own (0), as for containerd in a user namespace (docs/cri/config.md).
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "{shutil.which("runc")}"
        Root = "{self.root / "runc"}"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_BIN}"
    conf_dir = "{cni / "net.d"}"
"""
        (self.root / "containerd.toml").write_text(config)
        self._spawn("containerd", self._in_node(["containerd", "--config", str(self.root / "containerd.toml")]))
        self._wait(
            "containerd",
            lambda: _run(["ctr", "--address", str(self.containerd_socket), "version"], timeout=10).returncode == 0,
            "containerd",
        )

    def _start_kubelet(self, pki: Path) -> None:
        kroot = self.root / "kubelet"
        kroot.mkdir()
        (self.root / "resolv.conf").write_text("")  # pods get the cluster DNS only; nothing upstream
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            "address": "127.0.0.1", "port": self.kubelet_port, "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1", "healthzPort": 10248,
            "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                               "x509": {"clientCAFile": str(pki / "ca.crt")}},
            "authorization": {"mode": "Webhook"},
            # cgroup v1 here: the kubelet refuses it unless told (KEP-5573, failCgroupV1 true by default).
            "failCgroupV1": False, "cgroupDriver": "cgroupfs", "cgroupRoot": self.cgroup,
            "failSwapOn": False,
            "containerRuntimeEndpoint": f"unix://{self.containerd_socket}",
            "clusterDNS": [DNS_SERVICE_IP], "clusterDomain": CLUSTER_DOMAIN,
            "resolvConf": str(self.root / "resolv.conf"),
            "podLogsDir": str(self.root / "pod-logs"),
            # A shared, busy disk: no evictions or image GC from the host's usage, which is not ours.
            "evictionHard": {"memory.available": "1Mi", "nodefs.available": "0%", "imagefs.available": "0%",
                             "nodefs.inodesFree": "0%"},
            "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
            "registerWithTaints": self.taints,
            "maxPods": 30, "serializeImagePulls": False,
            "oomScoreAdj": 0,  # its own; -999 by default, which needs CAP_SYS_RESOURCE (see containerd's)
        }  # fmt: skip
        (self.root / "kubelet.yaml").write_text(yaml.safe_dump(config))
        labels = ",".join(f"{k}={v}" for k, v in self.labels.items())
        self._spawn("kubelet", self._in_node([
            binary("kubelet"), f"--config={self.root / 'kubelet.yaml'}",
            f"--kubeconfig={self.root / 'kubelet.kubeconfig'}", f"--root-dir={kroot}",
            f"--hostname-override={self.name}", "--cloud-provider=external", f"--node-labels={labels}", "--v=1",
        ]))  # fmt: skip
        from kubernetes import client

        core = client.CoreV1Api(self.cp.api())
        self._wait(f"node {self.name} registered", lambda: core.read_node(self.name) is not None, "kubelet")

    def _initialize_node(self) -> None:
        """What a cloud controller does for a node of --cloud-provider=external: its addresses, then
        the uninitialized taint off (see the module's docstring)."""
        from kubernetes import client

        core = client.CoreV1Api(self.cp.api())
        # A JSON patch: a strategic merge would keep the kubelet's Hostname address (merge key: type),
        # which the API server prefers and would resolve through the host's DNS.
        core.patch_node_status(
            self.name,
            [
                {
                    "op": "replace",
                    "path": "/status/addresses",
                    "value": [{"type": "InternalIP", "address": self.host_ip}],
                }
            ],
        )
        if self.fake_gpus:
            gpus = {GPU_RESOURCE: str(self.fake_gpus)}
            core.patch_node_status(self.name, {"status": {"capacity": gpus, "allocatable": gpus}})
        taints = [t.to_dict() for t in (core.read_node(self.name).spec.taints or []) if t.key != UNINITIALIZED]
        # The node's pod CIDR, as the controller manager's IPAM (--allocate-node-cidrs) or a cloud's writes
        # it; the API server allows it to be set once, from empty (ValidateNodeUpdate).
        core.patch_node(
            self.name,
            {
                "spec": {
                    "taints": [{k: v for k, v in t.items() if v is not None} for t in taints],
                    "podCIDR": self.pod_cidr,
                    "podCIDRs": [self.pod_cidr],
                }
            },
        )

    def _start_kube_proxy(self) -> None:
        config = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration",
            "mode": "nftables", "clientConnection": {"kubeconfig": str(self.root / "kube-proxy.kubeconfig")},
            # The cluster's pod range (every node's CIDR in it), as kube-proxy's clusterCIDR means: traffic from
            # a pod of any node to a Service is not masqueraded, so an endpoint sees the pod's own address.
            "hostnameOverride": self.name, "clusterCIDR": CLUSTER_POD_CIDR,
            # 0: leave the conntrack sysctls as they are (they are the host's, not the netns's).
            "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
            "healthzBindAddress": "127.0.0.1:10256", "metricsBindAddress": "127.0.0.1:10249",
            "oomScoreAdj": 0,
        }  # fmt: skip
        (self.root / "kube-proxy.yaml").write_text(yaml.safe_dump(config))
        self._spawn(
            "kube-proxy",
            [
                "ip",
                "netns",
                "exec",
                self.netns,
                binary("kube-proxy"),
                f"--config={self.root / 'kube-proxy.yaml'}",
                "--v=1",
            ],
        )
        self._wait(
            "kube-proxy's nftables table",
            lambda: "kube-proxy" in _run(["ip", "netns", "exec", self.netns, "nft", "list", "tables"]).stdout,
            "kube-proxy",
        )

    def _wait_coredns(self) -> None:
        """This node's CoreDNS pod (the DaemonSet's) answering on the kube-dns Service from the node."""
        probe = [
            "ip",
            "netns",
            "exec",
            self.netns,
            "python3",
            "-c",
            "import socket,sys; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2);"
            "q=b'\\x12\\x34\\x01\\x00\\x00\\x01\\x00\\x00\\x00\\x00\\x00\\x00'"
            "+b''.join(bytes([len(p)])+p.encode() for p in 'kubernetes.default.svc.cluster.local'.split('.'))"
            "+b'\\x00\\x00\\x01\\x00\\x01';"
            f"s.sendto(q, ('{DNS_SERVICE_IP}', 53)); r=s.recv(512); sys.exit(0 if r[3] & 15 == 0 else 1)",
        ]
        self._wait(
            "CoreDNS answering on the kube-dns Service",
            lambda: subprocess.run(probe, capture_output=True, timeout=10).returncode == 0,
            "kubelet",
        )

    def _start_kube_router(self, pki: Path) -> None:
        """NetworkPolicy on this node: kube-router's network policy controller alone (modules/kube-router:
        --run-firewall, no router or service proxy, as its daemonset/kube-router-firewall-daemonset.yaml at
        v2.1.0 runs it), in the node's network namespace as a DaemonSet pod on the host network would be.
        It writes iptables filter chains (iptables-nft: a table of its own beside kube-proxy's) and ipsets
        for each pod whose status.hostIP is the node's InternalIP: traffic between two pods on the bridge
        passes them through br_netfilter (bridge-nf-call-iptables, set in _start), pod -> node address
        (the API relay) through INPUT. Its identity is system:kube-router, read-only."""
        missing = [t for t in ("iptables", "iptables-save", "iptables-restore", "ipset") if shutil.which(t) is None]
        if missing:
            raise NodeError(f"missing {', '.join(missing)} for network_policy: apt-get install iptables ipset")
        _cert(pki, "kube-router", "/CN=system:kube-router")
        api_port = self.cp.server.rsplit(":", 1)[1]
        _kubeconfig(self.root / "kube-router.kubeconfig", f"https://127.0.0.1:{api_port}", pki, "kube-router")
        # kube-router's ClusterRole (daemonset/generic-kuberouter.yaml, v2.1.0), its read rules only: the
        # policy controller's process starts informers on these (pkg/cmd/kube-router.go, Run).
        read = ["get", "list", "watch"]
        self.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "kube-router"},
             "rules": [{"apiGroups": [""], "resources": ["namespaces", "pods", "services", "nodes", "endpoints"],
                        "verbs": read},
                       {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"], "verbs": read},
                       {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": read}]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
             "metadata": {"name": "kube-router"},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "kube-router"},
             "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "system:kube-router"}]},
        ]))  # fmt: skip
        # NODE_NAME: it looks its Node up by that, then by the machine's hostname, then --hostname-override
        # (pkg/utils/node.go GetNodeObject). Health and metrics servers off: nothing polls them here.
        self._spawn("kube-router", ["ip", "netns", "exec", self.netns, "env", f"NODE_NAME={self.name}",
                                    binary("kube-router"), "--run-firewall=true", "--run-router=false",
                                    "--run-service-proxy=false", f"--kubeconfig={self.root / 'kube-router.kubeconfig'}",
                                    f"--hostname-override={self.name}", f"--service-cluster-ip-range={SERVICE_CIDR}",
                                    "--health-port=0", "--metrics-port=0", "--v=1"])  # fmt: skip
        log = self.workdir / "kube-router.log"
        self._wait("kube-router's first policy sync", lambda: "sync iptables took" in log.read_text(), "kube-router")

    def _ready(self) -> bool:
        from kubernetes import client

        node = client.CoreV1Api(self.cp.api()).read_node(self.name)
        return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])

    def lose(self) -> None:
        """The node lost as a spot reclaim loses it: every container frozen at one instant (the freezer
        cgroup of the kubelet's cgroupRoot), then everything of the node SIGKILLed (the kubelet,
        containerd and its shims, kube-proxy, the relays, the mount namespace's holder; then
        the containers, whose kill lands when they are thawed), and its link to the other nodes cut.
        No one tells the API server: the Node object, its pods and its EndpointSlices stay as they
        were, and only the Lease the kubelet no longer renews says anything. stop() cleans up after."""
        if self.lost or self._holder is None:
            raise NodeError(f"node {self.name} is not running")
        with contextlib.suppress(Exception):  # containerd's answer, while it still answers (for stop())
            self._lost_pod_netns = self._pod_netns()
        freezers = [h / self.cgroup.lstrip("/") for h in self._hierarchies() if h.name == "freezer"]
        for freezer in freezers:
            (freezer / "freezer.state").write_text("FROZEN")
        deadline = time.monotonic() + 30
        while any((f / "freezer.state").read_text().strip() != "FROZEN" for f in freezers):
            if time.monotonic() > deadline:
                raise NodeError(f"node {self.name}'s containers did not freeze in 30 s")
            time.sleep(0.05)
        for _, popen, _ in self._procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(popen.pid, signal.SIGKILL)
        shims = self._kill_namespace_members(rounds=1)  # containerd's shims (sessions of their own)
        with contextlib.suppress(ProcessLookupError):
            os.kill(self._holder.pid, signal.SIGKILL)
        self._kill_cgroup_members()
        for freezer in freezers:
            (freezer / "freezer.state").write_text("THAWED")
        if self.fabric is not None:
            self.fabric.unplug(self.netns)
        self.lost = True
        for _, popen, _ in self._procs:
            popen.wait()
        self._holder.wait()
        # The kills land asynchronously (a thawed container, a shim): back once none is alive.
        deadline = time.monotonic() + 30
        while left := [pid for pid in [*shims, *self._cgroup_members()] if _alive(pid)]:
            if time.monotonic() > deadline:
                raise NodeError(f"node {self.name}: processes {left} still alive 30 s after the loss")
            self._kill_cgroup_members()
            time.sleep(0.1)

    def stop(self) -> None:
        """Everything the node made, gone: its pods' containers, processes, mounts (with the mount
        namespace), cgroups, netns (and containerd's pod netns), the Node and the temp folder; after
        lose() too."""
        errors = []
        with contextlib.suppress(Exception):
            self.kubectl("delete", "node", self.name, "--ignore-not-found", "--wait=false", timeout=30)
            self.kubectl("delete", "endpointslice", "-n", "default", f"kubernetes-{self.name}", "--ignore-not-found",
                         timeout=30)  # fmt: skip
        if self.containerd_socket.exists() and self._holder is not None and not self.lost:
            for kind in ("tasks", "containers"):
                with contextlib.suppress(Exception):
                    ids = [
                        line.split()[0]
                        for line in self.ctr(kind, "ls", "-q" if kind == "containers" else "").splitlines()[
                            int(kind == "tasks") :
                        ]
                        if line.strip()
                    ]
                    for cid in ids:
                        if kind == "tasks":
                            self._ctr_best_effort("tasks", "kill", "-a", "-s", "SIGKILL", cid)
                            self._ctr_best_effort("tasks", "rm", "-f", cid)
                        else:
                            self._ctr_best_effort("containers", "rm", cid)
        stop_groups([p for _, p, _ in reversed(self._procs)], grace_s=15)
        self._procs.clear()
        if self._holder is not None:
            if self._holder.poll() is None:
                self._kill_namespace_members()
            stop_groups([self._holder], grace_s=5)
            self._holder = None
        hierarchies = self._hierarchies() if self.cgroup else []
        self._kill_cgroup_members()  # a container left by a dead shim still lies in our cgroups
        for hierarchy in hierarchies:
            top = hierarchy / self.cgroup.lstrip("/")
            for folder in sorted((p for p in [top, *top.rglob("*")] if p.is_dir()), key=lambda p: -len(p.parts)):
                with contextlib.suppress(FileNotFoundError):
                    try:
                        _remove_cgroup(folder)
                    except OSError as err:
                        errors.append(f"cgroup {folder}: {err}")
        if self.netns:
            if self.fabric is not None:
                self.fabric.leave(self.netns)
            subprocess.run(["ip", "netns", "delete", self.netns], capture_output=True)
            # containerd's pod network namespaces were files of the node's own /run/netns (a tmpfs in
            # its mount namespace, gone with it): nothing of them is on the host to remove.
            self.netns = ""
        if self.root != Path() and self.root.exists():
            shutil.rmtree(self.root, ignore_errors=True)
        if errors:
            raise NodeError("the node was not cleaned up:\n" + "\n".join(errors))

    def _pod_netns(self) -> set[str]:
        """The names under /var/run/netns of the network namespaces this node's pods run in: each
        container's OCI spec names its sandbox's (`linux.namespaces`, type network)."""
        names = set()
        for cid in self.ctr("containers", "ls", "-q").split():
            with contextlib.suppress(NodeError, json.JSONDecodeError, KeyError, TypeError):
                spec = json.loads(self.ctr("containers", "info", cid, timeout=30))["Spec"]
                for namespace in spec["linux"]["namespaces"]:
                    path = namespace.get("path", "")
                    if namespace.get("type") == "network" and path.rsplit("/", 2)[-2:-1] == ["netns"]:
                        names.add(path.rsplit("/", 1)[1])
        return names

    def _cgroup_members(self) -> set[int]:
        """The processes in the node's cgroups (its pods' containers), in every hierarchy."""
        pids = set()
        for hierarchy in self._hierarchies() if self.cgroup else []:
            top = hierarchy / self.cgroup.lstrip("/")
            for procs in top.rglob("cgroup.procs") if top.is_dir() else []:
                with contextlib.suppress(OSError):
                    pids.update(int(pid) for pid in procs.read_text().split())
        return pids

    def _kill_cgroup_members(self) -> None:
        for pid in self._cgroup_members():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def _kill_namespace_members(self, rounds: int = 3) -> list[int]:
        """SIGKILL what is left in the node's mount namespace (containerd's shims and their
        containers, started by the node's containerd), found by that namespace, one pid at a time.
        Returns the pids killed."""
        mine = os.readlink(f"/proc/{self._holder.pid}/ns/mnt")
        killed: list[int] = []
        for round_ in range(rounds):
            left = []
            for pid in filter(str.isdigit, os.listdir("/proc")):
                if int(pid) == self._holder.pid:
                    continue
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{pid}/ns/mnt") == mine:
                        left.append(int(pid))
            if not left:
                break
            killed += left
            for pid in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, 9)
            if round_ < rounds - 1:
                time.sleep(1)
        return killed


def _alive(pid: int) -> bool:
    """PID exists and is not a zombie (a killed process whose parent has not reaped it yet is dead)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


def _remove_cgroup(folder: Path, within_s: float = 30.0) -> None:
    """rmdir of a cgroup, retried while it is busy: a process SIGKILLed a moment ago still counts in it until
    the kernel has reaped it (EBUSY twice in an end-to-end run with a pod still exiting). The bound is for a
    loaded machine; an emptied cgroup goes in milliseconds."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            folder.rmdir()
            return
        except OSError as err:
            if err.errno != errno.EBUSY or time.monotonic() > deadline:
                raise
            time.sleep(0.2)
