"""A researcher's job on real pods and the node under it lost (issue 31 items 3 and 4).

Shared by tests/controlplane/test_real_node_loss.py (what must hold) and bench/node_loss_real.py (how
long each step takes). `platform` starts two real nodes on a fabric (node.py, fabric.py) with the
local stack's training layer as test_real_training.py renders and adapts it; node B holds etcd and its
gate (the layer's copy pins them there: nodeSelector kubernetes.io/hostname), node A is where the job
starts (B is cordoned while it is submitted). `lose_a` loses node A (RealNode.lose) while the node
healer runs as a process with its ServiceAccount's token (healer.py), and follows what Kubernetes
v1.35.4 does next (node_loss.py's docstring says each step and its source) until the job's
replacement pod, on B, reports it resumed.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

from components.spec import GPU_TAINT, TRAINING_UID
from tests.containers import image as training_image
from tests.controlplane import platform_images
from tests.controlplane.conftest import researcher_kubeconfig
from tests.controlplane.healer import running_healer
from tests.controlplane.node_loss import OUT_OF_SERVICE
from tests.controlplane.test_real_training import (
    CHECKPOINT_EVERY,
    ETCD_UID,
    STEP_DELAY_S,
    TRAINER,
    WAIT_S,
    _layer,
    apply_platform,
    events,
    pods,
    running_pod,
    wait,
)
from torchfleet.cli import main as torchfleet

NODE_A, NODE_B = "real-loss-a", "real-loss-b"  # A: the job's first pod; B: etcd, its gate, the reader


@dataclass
class Platform:
    a: object  # RealNode
    b: object
    alice: Path  # her kubeconfig
    trainer: str  # the training image's name on both nodes
    reader: str  # the same image by digest (the CLI refuses a mutable tag for the reader)
    store: Path


@dataclass
class Loss:
    """What was seen of a job whose node was lost; steps: seconds after lose() each was first seen
    (polled about every second through kubectl: upper bounds), resumed from the trainer's own clock."""

    first: str  # the pod on A
    last_step: int  # the last step and checkpoint the pod was seen to reach before the loss
    last_ckpt: int
    second: str = ""  # its replacement
    second_node: str = ""
    resumed_step: int = -1
    steps: dict[str, float] = field(default_factory=dict)
    healer_log: str = ""


def cli(alice: Path, *argv: str) -> tuple[int, str]:
    """The torchfleet CLI as alice types it, against the local stack on this cluster."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = torchfleet([argv[0], "--stack", "local", "--kubeconfig", str(alice), *argv[1:]])
    return code, out.getvalue()


def import_trainer(node, trainer, archive: Path, log) -> tuple[str, str]:
    """The training image (ARCHIVE: its layout tarred) into NODE's containerd, also under its digest: the
    CRI finds an image by the names containerd holds, and an import records no digest reference
    (test_real_training's platform)."""
    names, seconds = node.import_archive(archive, TRAINER)
    log(f"[lost-node] imported {names} into {node.name} in {seconds:.1f} s")
    (name,) = names
    (manifest,) = json.loads((trainer.layout / "index.json").read_text())["manifests"]
    node.ctr("images", "tag", name, f"{name.rsplit(':', 1)[0]}@{manifest['digest']}")
    return name, f"{name}@{manifest['digest']}"


def pinned(objects: list[dict], node: str) -> list[dict]:
    """The layer with etcd's StatefulSet and its gate's Deployment pinned to NODE."""
    for obj in objects:
        if obj["kind"] in ("StatefulSet", "Deployment") and obj["metadata"]["name"] in ("etcd", "etcd-gate"):
            obj["spec"]["template"]["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    return objects


@contextlib.contextmanager
def platform(cp, work: Path, log=print) -> Iterator[Platform]:
    """Two real nodes on a fabric with the training layer, etcd and its gate ready on B."""
    from tests.controlplane.fabric import Fabric
    from tests.controlplane.node import RealNode

    store, etcd_data = work / "store", work / "etcd-data"
    store.mkdir()
    os.chown(store, TRAINING_UID, TRAINING_UID)  # store_owner's chown and chmod of the root
    store.chmod(0o2775)  # after the chown, which clears setgid
    etcd_data.mkdir(mode=0o700)
    os.chown(etcd_data, ETCD_UID, ETCD_UID)
    trainer = training_image.build(log=lambda line: None)
    etcd = platform_images.etcd(log=lambda line: None)
    with (
        Fabric.start() as fabric,
        RealNode.start(cp, work / "b", name=NODE_B, fabric=fabric) as b,
        RealNode.start(cp, work / "a", name=NODE_A, fabric=fabric) as a,
    ):
        # Tarred once for both nodes (import_archive would tar the layout for each: 2.5 GiB apiece on a
        # disk the two nodes' unpacked images already take about 15 GiB of).
        archive = work / "trainer.tar"
        subprocess.run(["tar", "-C", str(trainer.layout), "-cf", str(archive), "."], check=True)
        try:
            with ThreadPoolExecutor(2) as pool:  # two containerds, one image: side by side
                (name, reader), _ = pool.map(lambda node: import_trainer(node, trainer, archive, log), (a, b))
        finally:
            archive.unlink()
        (etcd_name,), _ = b.import_archive(etcd.archive, etcd.name.rsplit(":", 1)[0])
        untaint = f"{GPU_TAINT['key']}={GPU_TAINT['value']}:{GPU_TAINT['effect']}-"  # test_real_training's why
        for node in (a, b):
            node.kubectl("taint", "node", node.name, untaint)
        objects = pinned(_layer(store, etcd_data, etcd_name, name, work / "rendered"), NODE_B)
        apply_platform(b, objects)
        yield Platform(a, b, researcher_kubeconfig(cp, work), name, reader, store)


def submit_on_a(p: Platform, job: str) -> str:
    """JOB submitted as alice while B is cordoned; returns its pod, running on A."""
    p.b.kubectl("cordon", p.b.name)
    try:
        code, out = cli(p.alice, "submit", job, "--cpu", "--cpus", "500m", "--nodes", "1",
                        "--image", p.trainer, "--", "python", "examples/train.py", "--total-steps=100000",
                        "--global-batch-size=16", f"--checkpoint-every={CHECKPOINT_EVERY}",
                        f"--step-delay-s={STEP_DELAY_S}")  # fmt: skip
        if code != 0:
            raise AssertionError(f"submit exited {code}: {out}")
        return wait("the job's pod running", lambda: running_pod(p.a, job), p.a, job)
    finally:
        p.b.kubectl("uncordon", p.b.name)


def lose_a(p: Platform, job: str, first: str, workdir: Path, threshold_s: float, period_s: float) -> Loss:
    """Once JOB's pod FIRST on A has committed a checkpoint and trained a step past it, lose A with the
    healer running (THRESHOLD_S, PERIOD_S); return once the replacement has resumed (each wait a hang
    detector)."""

    def past_a_checkpoint() -> list[dict]:
        seen = [e for e in events(p.a, first) if e["ev"] in ("step", "ckpt")]
        ckpts = [e["step"] for e in seen if e["ev"] == "ckpt"]
        return seen if ckpts and any(e["ev"] == "step" and e["step"] > ckpts[0] for e in seen) else []

    before = wait("a step past a committed checkpoint on node A", past_a_checkpoint, p.a, job)
    loss = Loss(first, max(e["step"] for e in before if e["ev"] == "step"),
                max(e["step"] for e in before if e["ev"] == "ckpt"))  # fmt: skip
    with running_healer(SimpleNamespace(cp=p.a.cp), workdir, threshold_s=threshold_s, period_s=period_s) as log:
        lost_wall, lost = time.time(), time.monotonic()
        p.a.lose()

        def progress() -> list[dict] | None:
            node = json.loads(p.b.kubectl("get", "node", p.a.name, "-o", "json"))
            ready = next((c["status"] for c in node["status"].get("conditions", []) if c["type"] == "Ready"), "")
            seen = {
                "node_not_ready": ready != "True",
                "tainted": any(t["key"] == OUT_OF_SERVICE for t in node["spec"].get("taints") or []),
                "old_pod_gone": first not in {q["metadata"]["name"] for q in pods(p.b, job)},
            }
            for step, now in seen.items():
                if now and step not in loss.steps:
                    loss.steps[step] = round(time.monotonic() - lost, 1)
            if not loss.second and (second := running_pod(p.b, job, not_named=first)):
                loss.second = second
                loss.steps["replacement_running"] = round(time.monotonic() - lost, 1)
            return [e for e in events(p.b, loss.second) if e["ev"] == "resumed"] if loss.second else None

        resumed = wait("the job resumed after node A was lost", progress, p.b, job, 2 * WAIT_S, failures_expected=True)
        loss.healer_log = log.read_text()
    loss.steps["resumed"] = round(resumed[0]["wall"] - lost_wall, 1)
    loss.resumed_step = resumed[0]["step"]
    (loss.second_node,) = {q["spec"]["nodeName"] for q in pods(p.b, job) if q["metadata"]["name"] == loss.second}
    return loss
