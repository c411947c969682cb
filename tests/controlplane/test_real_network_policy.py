"""The project's NetworkPolicies on real traffic (issue 30, every way out closed): until now they were
checked as objects (tests/k8s/netpol.py's model, the API server's admission) on nodes whose CNI, the
bridge plugin, enforces none. Here the real node runs kube-router's policy controller (node.py's
network_policy), the local stack's policies are applied as `torchfleet synth` renders them (the
training namespace's and the etcd/gate ones), with what `torchfleet submit` creates for a job
(torchfleet/jobs/manifests.py network_policies, inplace_job.py's Lighthouse policy), and pods of the
smoke image open real TCP connections (bash's /dev/tcp) to pods that listen on the platform's ports.

Every refusal has its allowed twin on the same path (same source or same destination, same port), so
a refused connection is the policy's, not a broken network; and every row of the training namespace
is also what tests/k8s/netpol.py's model says, so the model the admission tests lean on is the one
the node enforces. The platform's pods are stand-ins carrying the rendered templates' labels and
ports (etcd's StatefulSet, the gate's Deployment) behind the rendered Services, listening with
busybox httpd: what is checked is who may connect, not what answers.

Addresses: only pods and Services of the node's own network namespace, and two link-local addresses
this test puts on that namespace's loopback (169.254.169.254, the clouds' metadata address, and
169.254.169.253 beside it) to show that a job's `--allow-egress 0.0.0.0/0` keeps the metadata
address closed (torchfleet/jobs/egress.py). DNS's rows use a stand-in pod of kube-system listening on 53
and 5353 (allow-dns admits pods of kube-system on 53, as the NetworkPolicy docs define a namespaceSelector
peer), not the node's CoreDNS pod, which answers on 53 only; it carries no kube-dns label, so the kube-dns
Service never sends a query to it.
"""

from __future__ import annotations

import json
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from components.spec import GPU_TAINT, TRAINING_UID
from tests.controlplane import node_images
from tests.k8s.netpol import can_connect
from tests.k8s.rendered import render
from torchfleet.jobs import inplace_job, manifests
from torchfleet.jobs import target as targets
from torchfleet.jobs.spec import build_request

ELSEWHERE = "netpol-elsewhere"  # a namespace of no policy: what lies beyond the training namespace
METADATA, BESIDE = "169.254.169.254", "169.254.169.253"
WORKER_PORT = 29500  # any port: a job's own pods talk on ports chosen at run time
OPEN_S = 8  # a connect that is allowed completes in milliseconds; a dropped one waits this long
SETTLE_S = 180  # kube-router syncs a change in about a second alone; the machine is shared


def _rendered(tmp: Path) -> list[dict]:
    return [d for p in render("local", tmp) for d in yaml.safe_load_all(p.read_text()) if d]


def _template_labels(objs: list[dict], kind: str, name: str) -> dict[str, str]:
    (obj,) = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    return obj["spec"]["template"]["metadata"]["labels"]


def _pod(name: str, namespace: str, image: str, node: str, labels: dict, ports: list[int | tuple[int, str]]) -> dict:
    """A pod listening on PORTS (busybox httpd each), as uid 10001 on a read-only root. A port under 1024
    (DNS's 53) needs net.ipv4.ip_unprivileged_port_start, a sysctl the kubelet allows every pod."""
    named = [p if isinstance(p, tuple) else (p, "") for p in ports]
    serve = "; ".join(f"busybox httpd -p {port} -h /srv" for port, _ in named)
    spec: dict = {
        "nodeSelector": {"kubernetes.io/hostname": node},
        "tolerations": [{"key": GPU_TAINT["key"], "operator": "Exists", "effect": "NoSchedule"}],
        "terminationGracePeriodSeconds": 1,
        "enableServiceLinks": False,
        "automountServiceAccountToken": False,
        "securityContext": {"runAsUser": TRAINING_UID, "runAsGroup": TRAINING_UID, "runAsNonRoot": True,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{
            "name": "main", "image": image, "imagePullPolicy": "Never",
            "args": ["-c", f"{serve}; echo listening; while true; do sleep 3600; done"],
            "ports": [{"containerPort": port, "protocol": "TCP", **({"name": n} if n else {})} for port, n in named],
            "securityContext": {"readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False,
                                "capabilities": {"drop": ["ALL"]}},
        }],
    }  # fmt: skip
    if min((p for p, _ in named), default=1024) < 1024:
        spec["securityContext"]["sysctls"] = [{"name": "net.ipv4.ip_unprivileged_port_start", "value": "0"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": spec}  # fmt: skip


def _wait_running(node, namespace: str, names: list[str], timeout: float = 240) -> dict[str, str]:
    """Each pod Running and ready; their IPs."""
    deadline = time.monotonic() + timeout
    while True:
        got = json.loads(node.kubectl("get", "pods", "-n", namespace, "-o", "json"))["items"]
        ready = {p["metadata"]["name"]: p["status"].get("podIP") for p in got
                 if p["status"].get("phase") == "Running"
                 and all(s.get("ready") for s in p["status"].get("containerStatuses", []))}  # fmt: skip
        if set(names) <= set(ready):
            return {n: ready[n] for n in names}
        if time.monotonic() > deadline:
            raise AssertionError(
                f"pods not running after {timeout} s in {namespace}: {sorted(set(names) - set(ready))}"
            )
        time.sleep(1)


def _probe(node, namespace: str, pod: str, targets_: list[tuple[str, int]]) -> dict[tuple[str, int], bool]:
    """From POD, a TCP connect to each (address, port) at once: which completed."""
    script = "\n".join(
        f'(timeout {OPEN_S} bash -c "exec 3<>/dev/tcp/{host}/{port}" 2>/dev/null '
        f'&& echo "{host} {port} open" || echo "{host} {port} closed") &'
        for host, port in targets_
    )
    out = node.kubectl("exec", "-n", namespace, pod, "--", "bash", "-c", f"{script}\nwait", timeout=120)
    seen = {(h, int(p)): state == "open" for h, p, state in (line.split() for line in out.splitlines() if line)}
    assert set(seen) == set(targets_), out
    return seen


@pytest.fixture(scope="module")
def own_control_plane(tmp_path_factory):
    """A control plane of this module's own: the session's may hold the kwok tier's training layer (its
    namespace elastic-job already there: a CI run's setup failed with AlreadyExists once the real-node
    files shared a worker with the layer's tests)."""
    from tests.controlplane.cluster import ControlPlane

    with ControlPlane.start(tmp_path_factory.mktemp("controlplane-np")) as cp:
        yield cp


@pytest.fixture(scope="module")
def enforcing_node(own_control_plane, tmp_path_factory):
    control_plane = own_control_plane
    from tests.controlplane.cluster import ControlPlaneError
    from tests.controlplane.node import NodeError, RealNode

    try:
        with RealNode.start(control_plane, tmp_path_factory.mktemp("np-node"), name="gpu-real-np",
                            network_policy=True) as node:  # fmt: skip
            print(f"[node] {node.name} Ready with kube-router in {node.started_s:.1f} s")
            yield node
    except (NodeError, ControlPlaneError) as err:
        pytest.fail(f"the real node cannot start: {err}")


@pytest.fixture(scope="module")
def world(enforcing_node, tmp_path_factory):
    """The local stack's training namespace with its rendered policies and Services, stand-ins for etcd
    (two members) and the gate, four jobs' pods with the policies submit makes for them (a, b; c
    in-place with its Lighthouse; w with --allow-egress 0.0.0.0/0), a stray pod of the training
    namespace that no job owns, a DNS stand-in in kube-system, and a pod of a namespace without policies."""
    node = enforcing_node
    image = node_images.smoke()
    node.import_archive(image.archive, image.name.rsplit(":", 1)[0])
    objs = _rendered(tmp_path_factory.mktemp("rendered"))
    target = targets.from_stack("local")
    ns = target.namespace
    layer_policies = [o for o in objs if o["kind"] == "NetworkPolicy" and o["metadata"]["namespace"] == ns]
    services = [o for o in objs if o["kind"] == "Service" and o["metadata"]["name"] in ("etcd", "etcd-gate")]

    def request(name: str, **flags):
        return build_request(target, name=name, image=image.name, gpus_per_node=None, gpu=None, cpu=True,
                             nodes="2", command=["python", "train.py"], **flags)  # fmt: skip

    jobs = {"a": request("a"), "b": request("b"), "c": request("c", recovery="inplace"),
            "w": request("w", allow_egress=["0.0.0.0/0"])}  # fmt: skip
    job_policies = [p for req in jobs.values() for p in manifests.network_policies(req, target)]
    job_policies.append(inplace_job.lighthouse_policy(jobs["c"], target))
    worker = {j: manifests.worker_spec(manifests.build(req, target))["template"]["metadata"]["labels"]
              for j, req in jobs.items()}  # fmt: skip
    (lighthouse,) = [d for d in inplace_job.owned_documents(jobs["c"], target) if d["kind"] == "Deployment"]

    labels = {
        "etcd-0": _template_labels(objs, "StatefulSet", "etcd"),
        "etcd-1": _template_labels(objs, "StatefulSet", "etcd"),
        "gate": _template_labels(objs, "Deployment", "etcd-gate"),
        "a-0": worker["a"], "a-1": worker["a"], "b-0": worker["b"], "c-0": worker["c"], "w-0": worker["w"],
        "c-lighthouse": lighthouse["spec"]["template"]["metadata"]["labels"],
        "stray": {"app": "stray"},
    }  # fmt: skip
    ports = {"etcd-0": [(2379, "client"), (2380, "peer")], "etcd-1": [(2379, "client"), (2380, "peer")],
             "gate": [(2379, "client")], "c-lighthouse": [inplace_job.LIGHTHOUSE_PORT]}  # fmt: skip
    node.kubectl("create", "namespace", ns)
    node.kubectl("create", "namespace", ELSEWHERE)
    pods = [_pod(n, ns, image.name, node.name, labels[n], ports.get(n, [WORKER_PORT])) for n in labels]
    pods.append(_pod("dns", "kube-system", image.name, node.name, {"torchfleet.test/role": "dns-stand-in"}, [53, 5353]))
    pods.append(_pod("elsewhere", ELSEWHERE, image.name, node.name, {"app": "elsewhere"}, [8080]))
    node.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([*services, *pods]))
    ips = _wait_running(node, ns, list(labels))
    ips.update(_wait_running(node, "kube-system", ["dns"]))
    ips.update(_wait_running(node, ELSEWHERE, ["elsewhere"]))
    for namespace, svc in ((ns, "etcd"), (ns, "etcd-gate"), ("default", "kubernetes")):
        got = json.loads(node.kubectl("get", "svc", "-n", namespace, svc, "-o", "json"))
        ips[f"svc/{svc}"] = got["spec"]["clusterIP"]

    # The metadata address and one beside it, on the node namespace's loopback, each with a listener.
    nsx = ["ip", "netns", "exec", node.netns]
    listeners = []
    for address in (METADATA, BESIDE):
        subprocess.run([*nsx, "ip", "addr", "add", f"{address}/32", "dev", "lo"], check=True)
        listeners.append(subprocess.Popen([*nsx, "socat", f"TCP-LISTEN:80,bind={address},reuseaddr,fork",
                                           "SYSTEM:echo metadata"], stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL))  # fmt: skip
        ips[address] = address

    node.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([*layer_policies, *job_policies]))
    yield {"node": node, "ns": ns, "ips": ips, "labels": labels, "policies": [*layer_policies, *job_policies]}
    for listener in listeners:
        listener.terminate()
        listener.wait(10)
    for namespace in (ns, ELSEWHERE):
        node.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
    node.kubectl("delete", "pod", "-n", "kube-system", "dns", "--wait=false", check=False)


# (source pod, destination, port, allowed, why). A destination is a pod of the training namespace, or
# svc/NAME (its ClusterIP, through kube-proxy: etcd, etcd-gate, and default's kubernetes, the API server), dns
# (kube-system), elsewhere (another namespace), or an address.
ROWS = [
    # A job's own pods reach each other on any port; no other job's pod, no stray pod, reaches them.
    ("a-0", "a-1", WORKER_PORT, True, "a job's pods talk to each other (job-a)"),
    ("a-0", "b-0", WORKER_PORT, False, "a job reaches no other job's pod"),
    ("b-0", "a-1", WORKER_PORT, False, "a job reaches no other job's pod"),
    ("stray", "a-1", WORKER_PORT, False, "a pod of no job reaches no job (default-deny)"),
    # Rendezvous: training pods reach the gate, never etcd; the gate reaches etcd's client port only.
    ("a-0", "gate", 2379, True, "training -> the gate (training-to-etcd-gate, etcd-gate-ingress)"),
    ("a-0", "svc/etcd-gate", 2379, True, "training -> the gate's Service"),
    ("a-0", "etcd-0", 2379, False, "training never reaches etcd's client port directly"),
    ("a-0", "svc/etcd", 2379, False, "nor through etcd's Service"),
    ("a-0", "etcd-1", 2380, False, "nor etcd's peer port"),
    ("gate", "etcd-0", 2379, True, "the gate -> etcd (etcd-gate-egress, etcd-ingress)"),
    ("gate", "etcd-0", 2380, False, "the gate reaches etcd's client port only"),
    ("gate", "a-0", WORKER_PORT, False, "the gate reaches no training pod"),
    ("etcd-0", "etcd-1", 2380, True, "etcd's members reach each other's peer port (etcd-egress)"),
    ("etcd-0", "etcd-1", 2379, True, "and client port"),
    ("etcd-0", "a-0", WORKER_PORT, False, "etcd reaches no training pod"),
    ("stray", "gate", 2379, False, "a pod outside the training role cannot reach the gate"),
    ("stray", "etcd-0", 2379, False, "nor etcd"),
    ("elsewhere", "gate", 2379, False, "a pod of another namespace cannot reach the gate"),
    ("elsewhere", "etcd-0", 2379, False, "nor etcd"),
    ("elsewhere", "a-0", WORKER_PORT, False, "nor a job's pod"),
    # DNS: port 53 of kube-system's pods only.
    ("a-0", "dns", 53, True, "DNS to kube-system (allow-dns)"),
    ("a-0", "dns", 5353, False, "kube-system on another port"),
    # Egress beyond the namespace: only what --allow-egress opens, never the metadata address.
    ("a-0", "elsewhere", 8080, False, "no egress beyond the namespace without --allow-egress"),
    ("w-0", "elsewhere", 8080, True, "--allow-egress 0.0.0.0/0 opens it (job-w-egress)"),
    ("w-0", BESIDE, 80, True, "and a link-local address beside the metadata one"),
    ("w-0", METADATA, 80, False, "but never the metadata address (its except)"),
    ("a-0", BESIDE, 80, False, "a job without --allow-egress reaches neither"),
    # The API server (the `kubernetes` Service): no rule of a job's opens it.
    ("a-0", "svc/kubernetes", 443, False, "job code never reaches the API server (default-deny egress)"),
    ("elsewhere", "svc/kubernetes", 443, True, "a pod of a namespace without policies does"),
    # An in-place job's Lighthouse: its own job's pods reach its port; it reaches nothing.
    ("c-0", "c-lighthouse", inplace_job.LIGHTHOUSE_PORT, True, "a job's pods -> its Lighthouse (job-c-lighthouse)"),
    ("a-0", "c-lighthouse", inplace_job.LIGHTHOUSE_PORT, False, "another job's pods never reach it"),
    ("c-lighthouse", "c-0", WORKER_PORT, False, "the Lighthouse reaches nothing"),
]


def _source_ns(world, pod: str) -> str:
    return ELSEWHERE if pod == "elsewhere" else world["ns"]


def _measure(world) -> dict[tuple, bool]:
    """Every row's connection, each source's at once, the sources side by side."""
    by_source: dict[str, list[tuple[str, int]]] = {}
    for source, dest, port, _, _ in ROWS:
        by_source.setdefault(source, []).append((world["ips"][dest], port))

    def one(source: str):
        return source, _probe(world["node"], _source_ns(world, source), source, by_source[source])

    with ThreadPoolExecutor(len(by_source)) as pool:
        seen = dict(pool.map(one, by_source))
    return {row: seen[row[0]][(world["ips"][row[1]], row[2])] for row in ROWS}


def test_every_row_holds_on_real_connections(world):
    """Each allowed row connects and each refused one does not, measured together; kube-router applies
    a change within seconds, so the rows are measured again until they hold or SETTLE_S passes (a row
    that never holds fails with what it did)."""
    deadline = time.monotonic() + SETTLE_S
    started = time.monotonic()
    while True:
        seen = _measure(world)
        wrong = [row for row, connected in seen.items() if connected != row[3]]
        if not wrong or time.monotonic() > deadline:
            break
        time.sleep(2)
    if not wrong:
        print(f"[netpol] {len(ROWS)} rows held, {time.monotonic() - started:.1f} s after the policies were applied")
    assert wrong == [], "\n".join(
        f"{s} -> {d}:{p} {'connected' if not allowed else 'did not connect'} ({why})" for s, d, p, allowed, why in wrong
    )


def test_the_model_says_the_same_of_the_training_namespace(world):
    """tests/k8s/netpol.py, which the policy tests read the policies with, predicts every row between two
    pods of the training namespace as the node enforced it (the test above)."""
    ns_pods = world["labels"]
    policies = [p for p in world["policies"] if p["metadata"]["namespace"] == world["ns"]]
    for source, dest, port, allowed, why in ROWS:
        if source in ns_pods and dest in ns_pods:
            assert can_connect(policies, ns_pods[source], ns_pods[dest], port) == allowed, (source, dest, port, why)
