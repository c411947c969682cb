"""The training image as real containers (runc), what kwok nodes never run (issue 31's first slice):
the image's entrypoint as its user 10001 on a read-only root, the store as the platform hands it to
that user, real steps of the template script (examples/train.py) with a real etcd rendezvous,
SIGTERM to the container's init becoming a committed checkpoint and exit 143, and a second
container resuming from it. Timing: one generous hang detector per wait, nothing tighter.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from components.kube import store_owner
from components.spec import TRAINING_UID
from tests.containers import runtime
from tests.containers.runtime import STORE_MOUNT

pytestmark = pytest.mark.slow

HANG_S = 600  # a container that has not reached a point in 10 minutes is stuck, at any load
CKPT = f"{STORE_MOUNT}/jobs/try/checkpoints"


def train_args(endpoint: str, total_steps: int) -> list[str]:
    """A pod's args as the ElasticJob controller and `torchfleet submit` make them (README, "Running it")."""
    return ["--nnodes=1:1", "--nproc_per_node=1", "--rdzv_backend=etcd", f"--rdzv_endpoint={endpoint}",
            "--rdzv_id=try", "/workspace/examples/train.py", f"--checkpoint-dir={CKPT}",
            f"--total-steps={total_steps}", "--global-batch-size=64", "--checkpoint-every=100000",
            "--step-delay-s=0.2"]


def committed(store) -> list[dict]:
    """The committed checkpoints in the store as the host sees them (their meta.json)."""
    root = store / "jobs" / "try" / "checkpoints"
    metas = sorted(root.glob("ckpt-*/meta.json")) if root.is_dir() else []
    return [json.loads(p.read_text()) | {"dir": p.parent.name} for p in metas]


def test_the_image_runs_as_10001_on_a_read_only_root_and_writes_only_the_store(image, pod_net, tmp_path):
    ns, _ = pod_net
    store = tmp_path / "store"
    runtime.give_store_to_trainer(store)
    probe = ("import os, errno\n"
             "print('ids', os.getuid(), os.getgid())\n"
             f"for path in ('/workspace/x', '/usr/local/x', '/home/trainer/x', '{STORE_MOUNT}/x'):\n"
             "    try:\n"
             "        open(path, 'w').close(); print('wrote', path, oct(os.stat(path).st_mode), os.stat(path).st_gid)\n"
             "    except OSError as e:\n"
             "        print('refused', path, errno.errorcode[e.errno])\n"
             "import socket\n"
             "print('interfaces', sorted(name for _, name in socket.if_nameindex()))\n")
    c = runtime.start(runtime.spec(image, ["python", "-c", probe], store, ns, replace_entrypoint=True), tmp_path)
    try:
        assert c.wait(HANG_S) == 0, c.log()
    finally:
        c.delete()
    out = c.log()
    assert f"ids {TRAINING_UID} {TRAINING_UID}" in out
    assert "refused /workspace/x EROFS" in out and "refused /usr/local/x EROFS" in out
    assert "refused /home/trainer/x EROFS" in out
    # the store's setgid root (store_owner.MODE) gives new files the training group
    assert f"wrote {STORE_MOUNT}/x" in out and out.split(f"wrote {STORE_MOUNT}/x")[1].split()[1] == str(TRAINING_UID)
    assert "interfaces ['lo']" in out


def test_a_store_the_platform_did_not_hand_over_is_refused_to_the_trainer(image, pod_net, tmp_path):
    """The same probe without store_owner's chown/chmod: root's 0755 directory, not writable by 10001
    (why the platform runs the Job). Shows the test above can fail."""
    ns, _ = pod_net
    store = tmp_path / "store"
    store.mkdir(mode=0o755)
    probe = f"open('{STORE_MOUNT}/x', 'w')"
    c = runtime.start(runtime.spec(image, ["python", "-c", probe], store, ns, replace_entrypoint=True), tmp_path)
    try:
        assert c.wait(HANG_S) == 1
    finally:
        c.delete()
    assert "PermissionError" in c.log()
    assert store_owner.MODE == "2775"


def test_sigterm_commits_a_checkpoint_exits_143_and_a_new_container_resumes_from_it(image, pod_net, tmp_path):
    ns, endpoint = pod_net
    store = tmp_path / "store"
    runtime.give_store_to_trainer(store)
    total = 100_000  # never reached: the only way out is the SIGTERM

    # (a) the entrypoint's launcher trains real steps, rendezvous through etcd
    first = runtime.start(runtime.spec(image, train_args(endpoint, total), store, ns), tmp_path)
    try:
        events = first.events(HANG_S, lambda e: e["ev"] == "step" and e["step"] >= 5)
        steps = [e["step"] for e in events if e["ev"] == "step"]
        assert steps and steps[-1] >= 5, first.log()
        assert committed(store) == [], "--checkpoint-every=100000: no checkpoint before the signal"

        # (b) SIGTERM to the container's init (the launcher, PID 1) -> checkpoint, 143
        first.kill("TERM")
        code = first.wait(HANG_S)
    finally:
        first.delete()
    assert code == 143, first.log()
    saves = [e for e in first.all_events() if e["ev"] == "ckpt"]
    assert saves and saves[-1]["step"] >= steps[-1], first.log()
    on_disk = committed(store)
    assert on_disk and max(m["step"] for m in on_disk) == saves[-1]["step"], (on_disk, first.log())
    stopped_at = saves[-1]["step"]
    for path in (store / "jobs").rglob("*"):  # written by the training user, group kept by setgid
        assert (path.stat().st_uid, path.stat().st_gid) == (TRAINING_UID, TRAINING_UID), path

    # (c) a second container resumes at that step and finishes
    second = runtime.start(runtime.spec(image, train_args(endpoint, stopped_at + 5), store, ns), tmp_path)
    try:
        code = second.wait(HANG_S)
    finally:
        second.delete()
    assert code == 0, second.log()
    resumed = [e for e in second.all_events() if e["ev"] == "resumed"]
    assert resumed and resumed[0]["step"] == stopped_at, second.log()
    steps = [e["step"] for e in second.all_events() if e["ev"] == "step"]
    assert steps and min(steps) == stopped_at + 1 and max(steps) == stopped_at + 5, second.log()


def test_without_the_launcher_sigterm_is_not_143(image, pod_net, tmp_path):
    """The same container with torchrun itself as PID 1 instead of the image's entrypoint: SIGTERM
    does not end it with 143 (torchrun exits 1, or PID 1 ignores the signal until it is killed),
    so the assertion above pins the launcher's behaviour, not runc's or torch's."""
    ns, endpoint = pod_net
    store = tmp_path / "store"
    runtime.give_store_to_trainer(store)
    args = ["python", "-m", "torch.distributed.run", *train_args(endpoint, 100_000)]
    args[args.index("--rdzv_backend=etcd")] = "--rdzv_backend=etcd-v2"  # what the launcher would switch to
    c = runtime.start(runtime.spec(image, args, store, ns, replace_entrypoint=True), tmp_path)
    try:
        events = c.events(HANG_S, lambda e: e["ev"] == "step" and e["step"] >= 2)
        assert any(e["ev"] == "step" for e in events), c.log()
        c.kill("TERM")
        try:
            code = c.wait(60)
        except subprocess.TimeoutExpired:
            c.kill("KILL")
            code = c.wait(HANG_S)
    finally:
        c.delete()
    assert code != 143, c.log()
