"""A researcher's restart-mode job trains in real pods of the training image on the real node
(issue 31 item 3, the first end-to-end test): submitted with `torchfleet submit --stack local` as
alice (group torchfleet:researchers, nothing else), its pod rendezvouses through the platform's etcd
gate and etcd, trains real steps and commits checkpoints on the shared store, `torchfleet
checkpoints` and `cp` read one back through the reader pod, and a deleted pod (a spot reclaim as
the kubelet sees it) is replaced and the job resumes from its checkpoint with its steps kept.
Beside it, as the same researcher: an in-place job (`--recovery inplace`: its Lighthouse and two
replica groups) heals a deleted pod from its live peer, and `torchfleet delete` leaves none of its
objects; a `--workdir` folder is unpacked onto the store by the init container and its own script runs,
and `kubectl delete job` leaves none of its objects and only expiring etcd keys. Each test submits
and deletes its own job, so their order does not matter.

What runs is the local stack's training layer as `torchfleet synth` renders it (tests/k8s/rendered),
applied with kubectl as layer.py does, on one real node (node.py) and no kwok node, with these
differences, each forced by this machine:
- no registry: the images are imported into the node's containerd (the training image's CPU variant,
  tests/containers/image.py; etcd's, platform_images.py) and the etcd StatefulSet's and the gate's
  `imagePullPolicy: Always` become IfNotPresent (the kubelet would ask a registry; the job's and the
  reader's pods already say IfNotPresent for a local stack);
- the store is a hostPath folder with what the store-owner Job gives the store root: 10001:10001, mode
  2775 (components/kube/store_owner.py), not an NFS export: this machine's kernel (6.18.44-fc-v669) has
  no NFS client or server at all (its /proc/config.gz sets no CONFIG_NFS_FS, CONFIG_NFSD or
  CONFIG_SUNRPC, /proc/filesystems lists no nfs, and it loads no modules), so neither Debian's
  nfs-kernel-server nor the kubelet's `mount -t nfs` of an nfs volume can run here (checked 2026-11-29);
  that Job (busybox) and the node healer are not applied: no busybox image here, and the healer acts on
  nodes, which test_real_node_loss.py tests;
- the node is the local stack's (kind's) node: the GPU taint RealNode registers with is removed, as
  a local stack's node has none and its pods tolerate none (the local stack is CPU-only: `--gpu` is
  refused for it, and a GPU stack's pods pull with Always, which needs a registry).

Found here: the first --workdir pod's init container exited 1 ("this image's Python has no tarfile data
filter"): the CPU image's Debian python3.11 is 3.11.2, without PEP 706's filters, which the real base's
Python has; the image build now takes tarfile.py from its own 3.11.4+ stdlib (tests/containers/image.py,
STDLIB_NEWER). The node enforces NetworkPolicy (kube-router, node.py's network_policy): every policy the
layer and the CLI make holds while the jobs train, the gate reaches the API server on 443 and the pods DNS
on a CoreDNS pod of kube-system, as in a cluster. Not here: the etcd gate's sweep of a deleted run's empty
store directory (every 300 s, once its state's 2 h TTL is gone) is not waited for: the test checks that every
key expires.

Timing: every wait is a hang detector (minutes); the assertions are about steps, checkpoints and objects,
which hold at any load. The figures (import, submit to first step, resume, heal) are printed, for
docs/benchmarks.md. About 6.5 minutes for the three tests on this project's 2-core machine (load 10-15),
the import of the 2.5 GiB image alone 1-2 minutes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from components.spec import GPU_TAINT, LABEL_JOB, TRAINING_UID
from tests.containers import image as training_image
from tests.controlplane import job_leftovers, platform_images
from tests.controlplane.cluster import binary
from tests.controlplane.conftest import researcher_kubeconfig
from tests.controlplane.layer import FIRST, volumes_for
from tests.k8s.rendered import render
from torchfleet.cli import main

# A hang detector, not a measurement: the module's setup builds the training image (cached after), starts its
# node(s) and applies the layer; on a fresh machine beside the Go build it took 443 s (test_real_training,
# docs/ci.md), too close to the suite's 600 s.
pytestmark = pytest.mark.timeout(1200)

NS = "elastic-job"  # the local stack's training namespace
ETCD_UID = 65532  # the etcd StatefulSet's runAsUser
TRAINER = "torchfleet.local/trainer"
STEP_DELAY_S = 0.3  # keeps the job running while the test reads it; any load only slows it further
CHECKPOINT_EVERY = 10
WAIT_S = 600  # hang detector for the slowest wait (a pod start under load)


def _layer(store: Path, etcd_data: Path, etcd_image: str, trainer_image: str, workdir: Path) -> list[dict]:
    """The local stack's rendered layer with this machine's differences (the module's docstring)."""
    objects = [o for p in render("local", workdir) for o in yaml.safe_load_all(p.read_text()) if o]
    out = []
    for obj in objects:
        kind, name = obj["kind"], obj["metadata"]["name"]
        if kind == "Job" or (kind == "Deployment" and name == "node-healer"):
            continue
        if kind == "PersistentVolume":
            obj["spec"]["hostPath"] = {"path": str(store), "type": "Directory"}
        for container in obj.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
            container["image"] = etcd_image if name == "etcd" else trainer_image
            container["imagePullPolicy"] = "IfNotPresent"
        out.append(obj)
    claims = volumes_for(out)
    for volume in claims:
        volume["spec"]["hostPath"] = {"path": str(etcd_data), "type": "Directory"}
    return claims + out


def apply_platform(node, objects: list[dict]) -> float:
    """Apply the layer with NODE's kubectl (namespaces and CRDs first), then wait for etcd and its gate;
    return the seconds from the apply to both ready (hang detectors only)."""
    for first in (True, False):
        part = [o for o in objects if (o["kind"] in FIRST) == first]
        node.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(part))
    started = time.monotonic()
    while time.monotonic() - started < WAIT_S and not node.kubectl("get", "pods", "-n", NS, "-o", "name"):
        time.sleep(1)  # `kubectl wait` on a pod the StatefulSet has not made yet fails at once
    node.kubectl("wait", "-n", NS, "--for=condition=Ready", "pod/etcd-0", f"--timeout={WAIT_S}s",
                 timeout=WAIT_S + 30)  # fmt: skip
    node.kubectl("rollout", "status", "-n", NS, "deployment/etcd-gate", f"--timeout={WAIT_S}s",
                 timeout=WAIT_S + 30)  # fmt: skip
    return time.monotonic() - started


@pytest.fixture(scope="module")
def own_control_plane(tmp_path_factory):
    """A control plane of this module's own. The session's holds the kwok tier's training layer (layer.py):
    the same cluster-scoped PersistentVolume names with other paths (immutable, so the apply fails, as
    it did in CI after the tier's layer tests had run) and kwok manager nodes that etcd's pod could be
    scheduled onto."""
    from tests.controlplane.cluster import ControlPlane

    with ControlPlane.start(tmp_path_factory.mktemp("controlplane-e2e")) as cp:
        yield cp


@pytest.fixture(scope="module")
def platform(own_control_plane, tmp_path_factory):
    from tests.controlplane.cluster import ControlPlaneError
    from tests.controlplane.node import NodeError, RealNode

    work = tmp_path_factory.mktemp("training")
    store, etcd_data = work / "store", work / "etcd-data"
    store.mkdir()
    os.chown(store, TRAINING_UID, TRAINING_UID)  # store_owner's chown and chmod of the root
    store.chmod(0o2775)  # after the chown, which clears setgid
    etcd_data.mkdir(mode=0o700)
    os.chown(etcd_data, ETCD_UID, ETCD_UID)
    try:
        trainer = training_image.build(log=lambda line: None)
        etcd = platform_images.etcd(log=lambda line: None)
        # NetworkPolicy enforced (kube-router): the shipped policies must let a job train, reach its gate and
        # DNS, and the gate the API server, as on a cluster whose CNI enforces them.
        with RealNode.start(own_control_plane, work / "node", name="real-train-0", network_policy=True) as node:
            print(f"[e2e] node Ready in {node.started_s:.1f} s")
            names, seconds = node.import_archive(trainer.layout, TRAINER)
            print(f"[e2e] imported {names} in {seconds:.1f} s")
            (trainer_name,) = names
            # The reader image is named by digest (the CLI refuses a mutable tag for it): the manifest's.
            (manifest,) = json.loads((trainer.layout / "index.json").read_text())["manifests"]
            reader = f"{trainer_name}@{manifest['digest']}"
            # The CRI finds an image by the names containerd holds; a digest reference (which a pull would
            # record) is not one of them after an import, so the kubelet would go to the registry for it.
            node.ctr("images", "tag", trainer_name, f"{trainer_name.rsplit(':', 1)[0]}@{manifest['digest']}")
            (etcd_name,), seconds = node.import_archive(etcd.archive, etcd.name.rsplit(":", 1)[0])
            print(f"[e2e] imported {etcd_name} in {seconds:.1f} s")
            taint = f"{GPU_TAINT['key']}={GPU_TAINT['value']}:{GPU_TAINT['effect']}-"
            node.kubectl("taint", "node", node.name, taint)
            objects = _layer(store, etcd_data, etcd_name, trainer_name, work / "rendered")
            seconds = apply_platform(node, objects)
            print(f"[e2e] etcd and its gate ready {seconds:.1f} s after the apply")
            alice = researcher_kubeconfig(own_control_plane, work)
            yield node, alice, trainer_name, reader, store
    except (NodeError, ControlPlaneError, training_image.ImageError) as err:
        pytest.fail(f"the real node cannot run the training layer: {err}")


def cli(capsys, alice: Path, *argv: str) -> tuple[int, str]:
    """The torchfleet CLI as alice types it, against the local stack on this cluster."""
    capsys.readouterr()
    code = main([argv[0], "--stack", "local", "--kubeconfig", str(alice), *argv[1:]])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def say(line: str) -> None:
    """A figure on the terminal: the CLI's output goes to capsys, which this test reads."""
    print(line, file=sys.__stderr__, flush=True)


def events(node, pod: str, previous: bool = False) -> list[dict]:
    logs = node.kubectl("logs", "-n", NS, pod, "-c", "worker", *(["--previous"] if previous else []), check=False)
    return [json.loads(line.split("@@tf ", 1)[1]) for line in logs.splitlines() if "@@tf {" in line]


def pods(node, job: str) -> list[dict]:
    return json.loads(node.kubectl("get", "pods", "-n", NS, "-l", f"{LABEL_JOB}={job}", "-o", "json"))["items"]


def firewall(node) -> str:
    """The node's iptables filter table, where kube-router writes each pod's NetworkPolicy chains."""
    done = subprocess.run(["ip", "netns", "exec", node.netns, "iptables-save", "-t", "filter"],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def wait(what: str, predicate, node, job: str, timeout_s: float = WAIT_S, failures_expected: bool = False):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if found := predicate():
            return found
        status = json.loads(node.kubectl("get", "job", "-n", NS, job, "-o", "json"))["status"]
        if status.get("failed") and not failures_expected:
            break  # a pod failed (an OOM kill, a refused rendezvous): no need to wait it out
        time.sleep(2)
    described = node.kubectl("describe", "pods", "-n", NS, "-l", f"{LABEL_JOB}={job}", check=False)
    logs = node.kubectl("logs", "-n", NS, "-l", f"{LABEL_JOB}={job}", "--tail=30", check=False)
    raise AssertionError(f"{what}: not seen ({status})\n{described[-5000:]}\n{logs[-3000:]}")


def running_pod(node, job: str, not_named: str = "") -> str:
    return next(
        (p["metadata"]["name"] for p in pods(node, job)
         if p["status"].get("phase") == "Running" and p["metadata"]["name"] != not_named
         and not p["metadata"].get("deletionTimestamp")),
        "",
    )  # fmt: skip


def test_a_restart_job_trains_checkpoints_is_read_back_and_resumes_after_a_pod_is_lost(platform, capsys, tmp_path):
    node, alice, trainer, reader, store = platform
    job = "e2e-restart"
    submitted = time.time()
    code, out = cli(capsys, alice, "submit", job, "--cpu", "--cpus", "500m", "--nodes", "1",
                    "--image", trainer, "--", "python", "examples/train.py", "--total-steps=100000",
                    "--global-batch-size=16", f"--checkpoint-every={CHECKPOINT_EVERY}",
                    f"--step-delay-s={STEP_DELAY_S}")  # fmt: skip
    assert code == 0, out
    try:
        first = wait("a running pod of the job", lambda: running_pod(node, job), node, job)
        steps = wait("a step", lambda: [e for e in events(node, first) if e["ev"] == "step"], node, job)
        say(f"[e2e] submit to first step {steps[0]['wall'] - submitted:.1f} s")
        # It trained with its policies enforced: kube-router keeps a firewall chain for the pod (its rules'
        # comments name it: kube-router v2.1.0 pkg/controllers/netpol/pod.go).
        assert f"POD name:{first} namespace: {NS}" in firewall(node), "kube-router has no chain for the pod"
        ckpts = wait("a committed checkpoint", lambda: [e for e in events(node, first) if e["ev"] == "ckpt"],
                     node, job)  # fmt: skip
        # On the store, as the pod wrote it: the job's folder, the pod's subPath of the claim (the kubelet
        # made it under the setgid root, so the training group owns it).
        spec = json.loads(node.kubectl("get", "pod", "-n", NS, first, "-o", "json"))["spec"]
        (sub_path,) = [m["subPath"] for m in spec["containers"][0]["volumeMounts"] if m["name"] == "shared"]
        job_dir = store / sub_path
        assert job_dir.is_dir(), (sorted(store.iterdir()), node.kubectl("get", "pv", "-o", "yaml"))
        # Each level the kubelet made (the maker's folder, then the job's) has the store root's mode, setgid kept,
        # and the root's group (docs/threat-model.md, boundary 2: read in the kubelet's source, shown here).
        for made in (job_dir.parent, job_dir):
            assert (oct(made.stat().st_mode & 0o7777), made.stat().st_gid) == (oct(0o2775), TRAINING_UID), made

        # checkpoints and cp through the reader pod (the trainer image has the python3 it needs).
        code, out = cli(capsys, alice, "checkpoints", job, "--verify", "--reader-image", reader,
                        "-o", "json")  # fmt: skip
        assert code == 0, out
        say(f"[e2e] checkpoints -o json: {out[:1500]}")
        listing, _ = json.JSONDecoder().raw_decode(out[out.index("{") :])  # then the reader pod's deletion line
        listed = listing["checkpoints"]
        assert listed and max(c["step"] for c in listed) >= ckpts[0]["step"], listing
        newest = max(listed, key=lambda c: c["step"])
        assert newest["verified"] is True and newest["bytes"] > 0, newest  # every file hashed against meta.json
        dest = tmp_path / "fetched"
        code, out = cli(capsys, alice, "cp", f"{job}:checkpoints", str(dest), "--reader-image", reader)
        assert code == 0, out
        say(f"[e2e] cp: {out.strip()[-400:]}")
        fetched = sorted(p.relative_to(dest) for p in dest.rglob("*") if p.is_file())
        assert fetched, out
        assert newest["name"] in {p.parts[0] for p in fetched}, (newest, fetched)

        # A pod lost (deleted, as a spot reclaim's drain does): the job resumes from its checkpoint.
        before = [e for e in events(node, first) if e["ev"] in ("step", "ckpt")]
        last_ckpt = max(e["step"] for e in before if e["ev"] == "ckpt")
        deleted = time.time()
        node.kubectl("delete", "pod", "-n", NS, first, "--wait=false")
        second = wait("a replacement pod running", lambda: running_pod(node, job, not_named=first),
                      node, job, failures_expected=True)  # fmt: skip
        resumed = wait("the replacement resumed", lambda: [e for e in events(node, second) if e["ev"] == "resumed"],
                       node, job, failures_expected=True)  # fmt: skip
        say(f"[e2e] pod delete to resumed at step {resumed[0]['step']}: {resumed[0]['wall'] - deleted:.1f} s "
              f"(last checkpoint seen before the delete: step {last_ckpt})")  # fmt: skip
        assert resumed[0]["step"] >= last_ckpt
        later = wait("a step after the resume",
                     lambda: [e for e in events(node, second) if e["ev"] == "step" and e["step"] > resumed[0]["step"]],
                     node, job, failures_expected=True)  # fmt: skip
        assert later[0]["step"] == resumed[0]["step"] + 1
    finally:
        code, out = cli(capsys, alice, "delete", job)
        assert code == 0, out


INDEX = "batch.kubernetes.io/job-completion-index"  # the Job controller's annotation on an Indexed Job's pods


def by_group(node, job: str) -> dict[int, str]:
    """{replica group (completion index): running pod} of an in-place job, pods being deleted left out."""
    return {
        int(p["metadata"]["annotations"][INDEX]): p["metadata"]["name"] for p in pods(node, job)
        if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
    }  # fmt: skip


def job_uid(node, job: str) -> str:
    return json.loads(node.kubectl("get", "job", "-n", NS, job, "-o", "json"))["metadata"]["uid"]


def gone(node, job: str, uid: str, made: list[str]) -> None:
    """Wait (a hang detector) until nothing of JOB is left; fail naming what stays."""
    deadline = time.monotonic() + WAIT_S
    while (left := job_leftovers.objects(node, NS, job, uid)) and time.monotonic() < deadline:
        time.sleep(2)
    assert not left, f"left after the delete: {left} (the job had made {made})"


def test_an_inplace_job_heals_a_lost_pod_from_its_peer_and_delete_leaves_nothing(platform, capsys):
    """`--recovery inplace` on real pods: the job's Lighthouse (a Deployment running torchft's Rust
    Lighthouse from the job's image, read-only root) and two replica groups train together; one group's
    pod deleted, the survivor goes on without restarting (its committed steps never repeat) and the
    replacement, same index, heals from the survivor's live state (no store read) and trains with it
    again (docs/jobs.md, docs/recovery-modes.md). Then `torchfleet delete`, what docs/jobs.md tells a
    researcher to use, leaves none of the objects submit made (the Lighthouse's Deployment, ReplicaSet,
    pod, Service and policy, the job's policy, the Job and its pods). An in-place job uses no etcd."""
    node, alice, trainer, _, _ = platform
    job = "e2e-inplace"
    submitted = time.time()
    # 1:2: the survivor may train alone (the Lighthouse's --min_replicas=1) while its peer is replaced.
    code, out = cli(capsys, alice, "submit", job, "--cpu", "--cpus", "500m", "--nodes", "1:2", "--recovery", "inplace",
                    "--image", trainer, "--", "python", "examples/train.py", "--total-steps=100000",
                    "--global-batch-size=16", f"--checkpoint-every={CHECKPOINT_EVERY}",
                    f"--step-delay-s={STEP_DELAY_S}")  # fmt: skip
    assert code == 0, out
    deleted = False
    try:
        groups = wait("two replica groups running", lambda: (g := by_group(node, job)) and len(g) == 2 and g,
                      node, job)  # fmt: skip
        survivor, lost = groups[0], groups[1]
        together = wait("a step both groups train together",
                        lambda: [e for e in events(node, lost) if e["ev"] == "step" and e["world"] == 2],
                        node, job)  # fmt: skip
        first = [e for e in events(node, survivor) if e["ev"] == "step"]
        say(f"[e2e] inplace: submit to first step {first[0]['wall'] - submitted:.1f} s, "
            f"to both groups training {together[0]['wall'] - submitted:.1f} s")  # fmt: skip
        lighthouse = json.loads(node.kubectl("get", "pods", "-n", NS, "-l", f"torchfleet.io/lighthouse={job}",
                                             "-o", "json"))["items"]  # fmt: skip
        assert [p["status"]["phase"] for p in lighthouse] == ["Running"], lighthouse

        last = max(e["step"] for e in events(node, survivor) if e["ev"] == "step")
        lost_at = time.time()
        node.kubectl("delete", "pod", "-n", NS, lost, "--wait=false")
        replacement = wait("the lost group's replacement running",
                           lambda: (g := by_group(node, job)).get(1) not in (None, lost) and g[1],
                           node, job, failures_expected=True)  # fmt: skip
        healed = wait("the replacement healed from its peer",
                      lambda: [e for e in events(node, replacement) if e["ev"] == "healed"],
                      node, job, failures_expected=True)  # fmt: skip
        rejoined = wait("the replacement training with the survivor",
                        lambda: [e for e in events(node, replacement)
                                 if e["ev"] == "step" and e["world"] == 2 and e["step"] > healed[0]["step"]],
                        node, job, failures_expected=True)  # fmt: skip
        said = events(node, survivor)
        alone = [e["step"] for e in said if e["ev"] == "step" and e["world"] == 1 and e["wall"] > lost_at]
        (worker,) = json.loads(node.kubectl("get", "pod", "-n", NS, replacement, "-o", "json"))["status"][
            "containerStatuses"]  # fmt: skip
        started = worker["state"].get("running", {}).get("startedAt")  # whole seconds; a figure only
        started = f"{datetime.fromisoformat(started).timestamp() - lost_at:.0f} s" if started else "?"
        say(f"[e2e] inplace: pod delete (at step {last}) to the replacement's container started {started} "
            f"(the Job's backoff for an index's first replacement is 10 s), to healed at step {healed[0]['step']} "
            f"{healed[0]['wall'] - lost_at:.1f} s, to training together again {rejoined[0]['wall'] - lost_at:.1f} s; "
            f"the survivor trained {len(alone)} steps alone meanwhile")  # fmt: skip
        # Progress kept: the replacement took the survivor's step, never the store's older checkpoint.
        assert healed[0]["step"] >= last, (healed, last)
        replacement_events = events(node, replacement)
        assert not [e for e in replacement_events if e["ev"] in ("resumed", "start")], replacement_events
        # The survivor never restarted: one container, no worker (re)start after the delete (it started
        # fresh, or healed from group 1 if that one came first), every committed step once.
        (status,) = json.loads(node.kubectl("get", "pod", "-n", NS, survivor, "-o", "json"))["status"][
            "containerStatuses"]  # fmt: skip
        assert status["restartCount"] == 0, status
        assert len([e for e in said if e["ev"] in ("start", "resumed", "healed")]) == 1, said[:5]
        assert not [e for e in said if e["ev"] in ("start", "resumed", "healed") and e["wall"] >= lost_at], said
        steps = [e["step"] for e in said if e["ev"] == "step"]
        assert steps == sorted(set(steps)) and steps[-1] > last, steps

        uid = job_uid(node, job)
        made = job_leftovers.objects(node, NS, job, uid)
        kinds = {m.split("/")[0] for m in made}
        assert {"Job", "Pod", "Deployment", "ReplicaSet", "Service", "NetworkPolicy"} <= kinds, made
        code, out = cli(capsys, alice, "delete", job)
        deleted = True
        assert code == 0, out
        gone(node, job, uid, made)
    finally:
        if not deleted:
            cli(capsys, alice, "delete", job)


def test_workdir_code_is_unpacked_onto_the_store_runs_and_kubectl_delete_leaves_nothing(platform, capsys, tmp_path):
    """`--workdir`: a researcher's folder with a small script, packed into ConfigMaps, unpacked by the
    job's init container onto the store (docs/workdir.md) and run there; the proof is a file only that
    script writes, with a token made for this run. Then `kubectl delete job` (the Job's owner references
    make the garbage collector take the rest: docs/workdir.md, docs/jobs.md) leaves none of its objects,
    and every etcd key of its run expires (the gate's TTL of at most 2 h; its store directory is the
    gate's sweep's, docs/training-layer.md)."""
    node, alice, trainer, _, store = platform
    job = "e2e-workdir"
    token = uuid.uuid4().hex
    code_dir = tmp_path / "my-code"
    code_dir.mkdir()
    script = code_dir / "train.py"
    script.write_text(
        "import json, os, pathlib\n"
        f"TOKEN = {token!r}\n"
        "out = pathlib.Path(os.environ['TORCHFLEET_OUTPUT_DIR'])\n"
        "out.mkdir(parents=True, exist_ok=True)\n"
        "proof = {'token': TOKEN, 'file': os.path.realpath(__file__), 'cwd': os.getcwd(),\n"
        "         'workdir': os.environ.get('TORCHFLEET_WORKDIR'), 'rank': os.environ.get('RANK')}\n"
        "(out / f'proof-{TOKEN}.json').write_text(json.dumps(proof))\n"
        "print('@@tf ' + json.dumps({'ev': 'proof', 'token': TOKEN}), flush=True)\n"
    )
    (code_dir / "helper.txt").write_text("packed beside the script\n")
    submitted = time.time()
    code, out = cli(capsys, alice, "submit", job, "--cpu", "--cpus", "500m", "--nodes", "1",
                    "--image", trainer, "--workdir", str(code_dir), "--", "python", "train.py")  # fmt: skip
    assert code == 0, out
    deleted = False
    try:
        uid = job_uid(node, job)
        made = job_leftovers.objects(node, NS, job, uid)
        assert [m for m in made if m.startswith("ConfigMap/")], made  # the packed code, made before the Job
        complete = wait("the job complete", lambda: [
            c for c in json.loads(node.kubectl("get", "job", "-n", NS, job, "-o", "json"))["status"].get(
                "conditions", []) if c["type"] == "Complete" and c["status"] == "True"], node, job)  # fmt: skip
        say(f"[e2e] workdir: submit to the job complete {time.time() - submitted:.1f} s")
        (pod,) = pods(node, job)
        spec = pod["spec"]
        assert [c["name"] for c in spec["initContainers"]] == ["workdir"], spec["initContainers"]
        (sub_path,) = [m["subPath"] for m in spec["containers"][0]["volumeMounts"] if m["name"] == "shared"]
        job_dir = store / sub_path
        # Unpacked by the init container: the folder named for the archive's hash holds the code as sent.
        (unpacked,) = [p.parent for p in (job_dir / "workdir").glob("*/train.py")]
        assert (unpacked / "train.py").read_bytes() == script.read_bytes()
        assert (unpacked / "helper.txt").read_text() == "packed beside the script\n"
        assert not list((job_dir / "workdir").glob(".unpacking-*")), sorted((job_dir / "workdir").iterdir())
        # Run: the proof only that script writes, from that folder as the container sees it.
        (proof_file,) = job_dir.rglob(f"proof-{token}.json")
        proof = json.loads(proof_file.read_text())
        assert proof["token"] == token
        assert proof["cwd"] == proof["workdir"] and proof["cwd"].endswith(f"/workdir/{unpacked.name}"), proof
        assert proof["file"] == f"{proof['cwd']}/train.py", proof
        assert any(e.get("token") == token for e in events(node, pod["metadata"]["name"])), complete

        rdzv_id = pod["metadata"]["annotations"][job_leftovers.RDZV_ANNOTATION]
        done = subprocess.run([binary("kubectl"), f"--kubeconfig={alice}", "delete", "job", "-n", NS, job],
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        deleted = True
        assert done.returncode == 0, done.stderr  # as alice, the job's maker
        gone(node, job, uid, made)
        keys = job_leftovers.run_keys(node, NS, rdzv_id)
        say(f"[e2e] workdir: the run's etcd keys after the delete: {keys}")
        assert not job_leftovers.keys_without_expiry(keys, rdzv_id), keys
    finally:
        if not deleted:
            cli(capsys, alice, "delete", job)
