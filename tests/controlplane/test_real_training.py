"""A researcher's restart-mode job trains in real pods of the training image on the real node
(issue 31 item 3, the first end-to-end test): submitted with `torchfleet submit --stack local` as
alice (group torchfleet:researchers, nothing else), its pod rendezvouses through the platform's etcd
gate and etcd, trains real steps and commits checkpoints on the shared store, `torchfleet
checkpoints` and `cp` read one back through the reader pod, and a deleted pod (a spot reclaim as
the kubelet sees it) is replaced and the job resumes from its checkpoint with its steps kept.

What runs is the local stack's training layer as `torchfleet synth` renders it (tests/k8s/rendered),
applied with kubectl as layer.py does, on one real node (node.py) and no kwok node, with these
differences, each forced by this machine:
- no registry: the images are imported into the node's containerd (the training image's CPU variant,
  tests/containers/image.py; etcd's, platform_images.py) and the etcd StatefulSet's and the gate's
  `imagePullPolicy: Always` become IfNotPresent (the kubelet would ask a registry; the job's and the
  reader's pods already say IfNotPresent for a local stack);
- the store is a hostPath folder (no NFS server yet) with what the store-owner Job gives the store
  root: 10001:10001, mode 2775 (components/kube/store_owner.py); that Job (busybox) and the node healer are
  not applied: no busybox image here, and the healer acts on nodes, which this test does not test;
- the node is the local stack's (kind's) node: the GPU taint RealNode registers with is removed, as
  a local stack's node has none and its pods tolerate none (the local stack is CPU-only: `--gpu` is
  refused for it, and a GPU stack's pods pull with Always, which needs a registry).

Timing: every wait is a hang detector (minutes); the assertions are about steps and checkpoints,
which hold at any load. The figures (import, submit to first step, resume) are printed, for
docs/benchmarks.md. About 3.5 minutes on this project's 2-core machine, the first import of the
2.5 GiB image alone 1-2 minutes.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
import yaml

from components.spec import GPU_TAINT, LABEL_JOB, TRAINING_UID
from tests.containers import image as training_image
from tests.controlplane import platform_images
from tests.controlplane.conftest import researcher_kubeconfig
from tests.controlplane.layer import FIRST, volumes_for
from tests.k8s.rendered import render
from torchfleet.cli import main

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
        with RealNode.start(own_control_plane, work / "node", name="real-train-0") as node:
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
            first = [o for o in objects if o["kind"] in FIRST]
            rest = [o for o in objects if o["kind"] not in FIRST]
            node.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(first))
            node.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(rest))
            started = time.monotonic()
            while time.monotonic() - started < WAIT_S and not node.kubectl("get", "pods", "-n", NS, "-o", "name"):
                time.sleep(1)  # `kubectl wait` on a pod the StatefulSet has not made yet fails at once
            node.kubectl("wait", "-n", NS, "--for=condition=Ready", "pod/etcd-0", f"--timeout={WAIT_S}s",
                         timeout=WAIT_S + 30)  # fmt: skip
            node.kubectl("rollout", "status", "-n", NS, "deployment/etcd-gate", f"--timeout={WAIT_S}s",
                         timeout=WAIT_S + 30)  # fmt: skip
            print(f"[e2e] etcd and its gate ready {time.monotonic() - started:.1f} s after the apply")
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
        ckpts = wait("a committed checkpoint", lambda: [e for e in events(node, first) if e["ev"] == "ckpt"],
                     node, job)  # fmt: skip
        # On the store, as the pod wrote it: the job's folder, the pod's subPath of the claim (the kubelet
        # made it under the setgid root, so the training group owns it).
        spec = json.loads(node.kubectl("get", "pod", "-n", NS, first, "-o", "json"))["spec"]
        (sub_path,) = [m["subPath"] for m in spec["containers"][0]["volumeMounts"] if m["name"] == "shared"]
        job_dir = store / sub_path
        assert job_dir.is_dir(), (sorted(store.iterdir()), node.kubectl("get", "pv", "-o", "yaml"))
        assert job_dir.stat().st_gid == TRAINING_UID, oct(job_dir.stat().st_mode)

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
