"""etcd's start script (k8s/base/etcd/configmap-bootstrap.yaml) run against three real etcd members.

Regression (issue 19): every member started with the fixed `--initial-cluster-state=new`, so a
member that lost its volume could never rejoin (etcd refuses it: "member ... has already been
bootstrapped"), and the cluster stayed one member short until someone ran etcdctl by hand.

The members are the StatefulSet's own flags (with three members, as the program renders them) on
127.0.0.1-3, each its own "pod" address with the same ports, as pods have. The script runs under
bash with a PATH holding etcd and etcdctl only: the image (registry.k8s.io/etcd) has nothing else,
so a script that used another program would fail here too. etcd is the control-plane tier's 3.5
build (tests/controlplane/build.py; the image's minor), unless $TORCHFLEET_ETCD_BINARY names one; etcdctl
is the tier's 3.5 build (tests/controlplane/modules/etcdctl). Either is built here when .ci/run's
background build has not built it yet (or waited for while it does).
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from elastic_trainer.local import ENV_ETCD_BINARY

from components.kube import static, transforms
from tests.controlplane import build as controlplane_build

SCRIPT = static.load("etcd/configmap-bootstrap.yaml")["data"]["bootstrap.sh"]
MEMBERS = 3
ADDRESSES = [f"127.0.0.{i + 1}" for i in range(MEMBERS)]


def etcd_binary() -> str:
    if os.environ.get(ENV_ETCD_BINARY):
        return os.environ[ENV_ETCD_BINARY]
    try:
        return str(controlplane_build.ensure("etcd")[0])
    except controlplane_build.BuildError as error:
        pytest.fail(f"the tier's etcd could not be built: {error}")


def etcdctl_binary() -> str:
    """The tier's etcdctl 3.5 (tests/controlplane/modules/etcdctl), as the etcd image has 3.5: Debian's
    3.4.23 answers some commands differently (3.4's member list is not linearizable, 3.5's is), so the
    script would run other branches here than in a pod. Built here if .ci/run's build has not; one that
    cannot be built fails."""
    try:
        return str(controlplane_build.ensure("etcdctl")[0])
    except controlplane_build.BuildError as error:
        pytest.fail(f"the tier's etcdctl could not be built: {error}")


def free_on_every_address() -> int:
    """A port free on 127.0.0.1-3 (each member binds its own address, all on the same port)."""
    while True:
        with socket.socket() as first:
            first.bind((ADDRESSES[0], 0))
            port = first.getsockname()[1]
            try:
                for address in ADDRESSES[1:]:
                    with socket.socket() as other:
                        other.bind((address, port))
            except OSError:
                continue
            return port


class Cluster:
    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.ports = {
            "client": free_on_every_address(),
            "peer": free_on_every_address(),
            "metrics": free_on_every_address(),
        }
        bin_dir = workdir / "bin"
        bin_dir.mkdir()
        (bin_dir / "etcd").symlink_to(etcd_binary())
        (bin_dir / "etcdctl").symlink_to(etcdctl_binary())
        (workdir / "bootstrap.sh").write_text(SCRIPT)
        self.env = {"PATH": str(bin_dir)}
        sts = transforms.apply(
            copy.deepcopy(static.load("etcd/statefulset.yaml")),
            transforms.LayerSettings(namespace="t", claim_name="c", store_capacity="1Gi", etcd_replicas=MEMBERS),
        )
        (self.container,) = sts["spec"]["template"]["spec"]["containers"]
        assert self.container["command"][:1] == ["/bin/sh"], "the StatefulSet no longer runs the start script"
        self.procs: dict[int, subprocess.Popen] = {}

    def flags(self, i: int) -> list[str]:
        """The container's args as member i's pod would run them, on its own loopback address."""
        out = []
        for arg in self.container["args"]:
            arg = arg.replace("$(POD_NAME)", f"etcd-{i}").replace("0.0.0.0", ADDRESSES[i])  # noqa: S104 - the pod listens on all
            for j in range(MEMBERS):
                arg = arg.replace(f"etcd-{j}.etcd-peers", ADDRESSES[j])
            for name, port in (("client", 2379), ("peer", 2380), ("metrics", 2381)):
                arg = arg.replace(f":{port}", f":{self.ports[name]}")
            out.append(arg.replace("/var/lib/etcd", str(self.workdir / f"etcd-{i}")))
        return out

    def data_dir(self, i: int) -> Path:
        return self.workdir / f"etcd-{i}" / "data"

    def start(self, i: int, script: bool = True) -> subprocess.Popen:
        # Programs named by absolute path: Popen looks a bare name up in the child's PATH.
        argv = [shutil.which("bash"), str(self.workdir / "bootstrap.sh")] if script else [etcd_binary()]
        with (self.workdir / f"etcd-{i}.log").open("a") as log:
            proc = subprocess.Popen([*argv, *self.flags(i)], env=self.env, stdout=log, stderr=subprocess.STDOUT)
        self.procs[i] = proc
        return proc

    def log(self, i: int) -> str:
        return (self.workdir / f"etcd-{i}.log").read_text()

    def kill(self, i: int) -> None:
        proc = self.procs.pop(i)
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    def healthy(self, i: int, timeout: float = 120, restarts: int = 0) -> int:
        """Wait for member i's /health; restart it as the kubelet would (restartPolicy Always, here
        after 2 s), at most `restarts` times. Returns the restarts it took."""
        url = f"http://{ADDRESSES[i]}:{self.ports['metrics']}/health"
        deadline = time.monotonic() + timeout
        took = 0
        while True:
            if self.procs[i].poll() is not None and took < restarts:
                took += 1
                time.sleep(2)
                self.start(i)
            assert self.procs[i].poll() is None, f"etcd-{i} exited {self.procs[i].returncode}:\n{self.log(i)[-3000:]}"
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    if json.loads(response.read()).get("health") == "true":
                        return took
            except OSError:
                pass
            assert time.monotonic() < deadline, f"etcd-{i} never became healthy:\n{self.log(i)[-3000:]}"
            time.sleep(0.2)

    def ctl(self, *args: str, at: list[int] | None = None) -> str:
        endpoints = ",".join(f"http://{ADDRESSES[i]}:{self.ports['client']}" for i in (at or range(MEMBERS)))
        proc = subprocess.run(
            [etcdctl_binary(), f"--endpoints={endpoints}", "--command-timeout=20s", *args],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "ETCDCTL_API": "3"},
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    def members(self) -> dict[str, tuple[str, str]]:
        """peer URL -> (member id, status) as `etcdctl member list` prints them."""
        found = {}
        for line in self.ctl("member", "list").splitlines():
            member_id, status, _name, peers, *_ = (field.strip() for field in line.split(","))
            found[peers] = (member_id, status)
        return found

    def peer_url(self, i: int) -> str:
        return f"http://{ADDRESSES[i]}:{self.ports['peer']}"

    def stop(self) -> None:
        for i in list(self.procs):
            self.kill(i)


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path)
    for i in range(MEMBERS):
        c.start(i)
    try:
        for i in range(MEMBERS):
            c.healthy(i)
        yield c
    finally:
        c.stop()


def test_members_create_the_cluster_together(cluster):
    members = cluster.members()
    assert sorted(members) == sorted(cluster.peer_url(i) for i in range(MEMBERS))
    assert {status for _, status in members.values()} == {"started"}


def test_a_member_that_lost_its_volume_rejoins(cluster):
    cluster.ctl("put", "rendezvous", "kept")
    old_id, _ = cluster.members()[cluster.peer_url(1)]
    cluster.kill(1)
    shutil.rmtree(cluster.data_dir(1))

    # The bug: started as the StatefulSet used to start it, the member is refused for good.
    plain = cluster.start(1, script=False)
    assert plain.wait(timeout=60) != 0
    assert "has already been bootstrapped" in cluster.log(1)
    cluster.procs.pop(1)

    cluster.start(1)
    # At most a restart by the kubelet: a list that failed while a new leader was elected (etcd-1 may
    # have led) reads as "no cluster yet", which etcd then refuses, as above.
    cluster.healthy(1, restarts=2)
    members = cluster.members()
    new_id, status = members[cluster.peer_url(1)]
    assert status == "started" and new_id != old_id  # removed, added back: a new identity
    assert len(members) == MEMBERS
    # It holds the data: a serializable read answers from the member's own store.
    assert cluster.ctl("get", "rendezvous", "--print-value-only", "--consistency=s", at=[1]).strip() == "kept"


def until(done, change, timeout: float = 90) -> None:
    """Make a membership change until `done()`: etcd refuses or times out changes while a leader is
    elected and for a few seconds after the last one, and a timed-out change may still apply."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if done():
                return
            change()
        except AssertionError:
            assert time.monotonic() < deadline, "etcd never took the membership change"
            time.sleep(1)


def test_a_member_added_but_never_started_joins(cluster):
    # A start that died between `member add` and etcd's first write leaves the member listed, unstarted.
    cluster.kill(2)
    shutil.rmtree(cluster.data_dir(2))
    url = cluster.peer_url(2)
    until(lambda: url not in cluster.members(), lambda: cluster.ctl("member", "remove", cluster.members()[url][0]))
    until(lambda: url in cluster.members(), lambda: cluster.ctl("member", "add", "etcd-2", f"--peer-urls={url}"))
    assert cluster.members()[url][1] == "unstarted"
    cluster.start(2)
    cluster.healthy(2, restarts=2)
    assert {status for _, status in cluster.members().values()} == {"started"}


def test_a_member_with_its_data_restarts_as_itself(cluster):
    old_id, _ = cluster.members()[cluster.peer_url(0)]
    cluster.kill(0)
    cluster.start(0)
    cluster.healthy(0)
    assert cluster.members()[cluster.peer_url(0)] == (old_id, "started")
    assert "joins the existing cluster" not in cluster.log(0)


def test_an_empty_member_waits_while_the_quorum_is_lost_then_rejoins(cluster):
    # Two members down, one of them with its volume lost, and one member up: no quorum. The empty
    # member must not start `new` under its old identity (with the one member up it would make a
    # quorum that forgot its raft state); it exits, as a pod that the kubelet restarts, until the
    # quorum is back, then rejoins as a new member.
    cluster.ctl("put", "rendezvous", "kept")
    old_id, _ = cluster.members()[cluster.peer_url(1)]
    cluster.kill(1)
    cluster.kill(2)
    shutil.rmtree(cluster.data_dir(1))
    before = len(cluster.log(1))  # its log holds the cluster's creation too
    empty = cluster.start(1)
    assert empty.wait(timeout=120) != 0, cluster.log(1)[before:][-3000:]
    log = cluster.log(1)[before:]
    assert "has lost its quorum" in log and "creating the cluster" not in log, log[-3000:]
    assert not list(cluster.data_dir(1).glob("member/wal/*.wal"))  # etcd never ran
    cluster.procs.pop(1)
    cluster.start(2)  # the quorum is back
    cluster.healthy(2, restarts=2)
    cluster.start(1)
    cluster.healthy(1, restarts=3)
    new_id, status = cluster.members()[cluster.peer_url(1)]
    assert status == "started" and new_id != old_id
    assert cluster.ctl("get", "rendezvous", "--print-value-only", "--consistency=s", at=[1]).strip() == "kept"
