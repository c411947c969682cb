"""A real Kubernetes control plane on loopback: etcd 3.5, kube-apiserver, kube-controller-manager,
kube-scheduler and kwok, each the pinned upstream binary (tests/controlplane/build.py).

What is real: the API server (schemas, defaulting, admission with Pod Security Admission as the
clouds run it, RBAC, CRDs), the controllers (Job, StatefulSet, garbage collector, node lifecycle)
and the scheduler (taints, affinity, topology spread, extended resources such as nvidia.com/gpu).
What is simulated: the nodes. kwok plays each node's kubelet: it keeps node leases, and it moves a
pod through Pending -> Running, and to Succeeded or Failed with the exit code a test writes into
the pod's ``torchfleet.test/exit-code`` annotation (kwok_stages.py). No container runs.

    with ControlPlane.start(tmp_path) as cp:
        cp.kubeconfig  # an admin kubeconfig (a static token in group system:masters)
        cp.api()       # a kubernetes.client.ApiClient on it
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tests.controlplane import build, kwok_stages

ADMIN_TOKEN = "torchfleet-test-admin"  # a loopback test cluster's own token
KUBELET_CLIENT = "kube-apiserver-kubelet-client"  # the API server's user at kubelets (kubeadm's name)
SERVICE_CIDR = "10.96.0.0/16"
POD_CIDR = "10.244.0.0/16"
# How long one component may take to come up on a loaded 2-core machine (CI's size).
START_TIMEOUT_S = 180
PR_SET_PDEATHSIG = 1  # linux/prctl.h


class ControlPlaneError(RuntimeError):
    pass


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL it when the test process dies (prctl PR_SET_PDEATHSIG), so a
    pytest killed by its timeout leaves no API server or etcd running (they have sessions of their own)."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def spawn_group(argv: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start a tool in a process group of its own, output to `log`, killed if the test process dies.

    Every process the tier starts (the control plane's and the operators') goes through here, so a
    crashed or interrupted test run leaves none behind.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as handle:
        return subprocess.Popen(
            argv,
            stdout=handle,
            stderr=subprocess.STDOUT,
            env=None if env is None else {**os.environ, **env},
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )


def stop_groups(popens: list[subprocess.Popen], grace_s: float = 20) -> None:
    """SIGTERM each process group, in the order given, then SIGKILL what is left after `grace_s`."""
    for popen in popens:
        if popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(popen.pid, signal.SIGTERM)
    for popen in popens:
        try:
            popen.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(popen.pid, signal.SIGKILL)
            popen.wait()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def binary(name: str) -> str:
    """The built binary NAME (built now, or waited for while another process builds it), or a
    ControlPlaneError that says why it could not be built."""
    try:
        return str(build.ensure(name)[0])
    except build.BuildError as error:
        raise ControlPlaneError(f"{build.path(name)} could not be built: {error}") from error


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_pki(folder: Path) -> None:
    """A CA, the API server's serving certificate for 127.0.0.1, and the service-account key pair."""
    folder.mkdir(parents=True, exist_ok=True)
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
             "-days", "3", "-subj", "/CN=torchfleet-test-ca", cwd=folder)  # fmt: skip
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "apiserver.key", "-out", "apiserver.csr",
             "-subj", "/CN=kube-apiserver", cwd=folder)  # fmt: skip
    (folder / "san.ext").write_text(
        "subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default.svc\n"
    )
    openssl("x509", "-req", "-in", "apiserver.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "apiserver.crt", "-days", "3", "-extfile", "san.ext", cwd=folder)  # fmt: skip
    # The API server's client certificate to kubelets (logs, exec, port-forward on the real node,
    # node.py), as kubeadm makes it: CN kube-apiserver-kubelet-client, bound to system:kubelet-api-admin.
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "kubelet-client.key", "-out", "kubelet-client.csr",
            "-subj", f"/CN={KUBELET_CLIENT}", cwd=folder)  # fmt: skip
    openssl("x509", "-req", "-in", "kubelet-client.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "kubelet-client.crt", "-days", "3", cwd=folder)  # fmt: skip
    openssl("genrsa", "-out", "sa.key", "2048", cwd=folder)
    openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=folder)
    (folder / "tokens.csv").write_text(f"{ADMIN_TOKEN},torchfleet-test-admin,1000,system:masters\n")


def write_kubeconfig(path: Path, server: str, ca: Path) -> None:
    import base64

    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "controlplane",
                "cluster": {"server": server, "certificate-authority-data": base64.b64encode(ca.read_bytes()).decode()},
            }
        ],
        "users": [{"name": "admin", "user": {"token": ADMIN_TOKEN}}],
        "contexts": [{"name": "controlplane", "context": {"cluster": "controlplane", "user": "admin"}}],
        "current-context": "controlplane",
    }
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)


@dataclass
class _Process:
    name: str
    popen: subprocess.Popen
    log: Path

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


@dataclass
class ControlPlane:
    workdir: Path
    server: str = ""
    kubeconfig: Path = field(default_factory=Path)
    _processes: list[_Process] = field(default_factory=list)

    @classmethod
    @contextlib.contextmanager
    def start(cls, workdir: Path) -> Iterator[ControlPlane]:
        cp = cls(Path(workdir))
        try:
            cp._start()
            yield cp
        finally:
            cp.stop()

    # ---- lifecycle -------------------------------------------------------------------------------
    def _spawn(self, name: str, argv: list[str]) -> _Process:
        log = self.workdir / f"{name}.log"
        process = _Process(name, spawn_group(argv, log), log)
        self._processes.append(process)
        return process

    def _wait(self, what: str, ready, process: _Process) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if process.popen.poll() is not None:
                raise ControlPlaneError(f"{process.name} exited {process.popen.returncode}:\n{process.tail()}")
            with contextlib.suppress(Exception):
                if ready():
                    return
            time.sleep(0.2)
        raise ControlPlaneError(f"{what} not ready after {START_TIMEOUT_S} s:\n{process.tail()}")

    def _start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        pki = self.workdir / "pki"
        make_pki(pki)

        etcd_port, peer_port = free_port(), free_port()
        etcd_url = f"http://127.0.0.1:{etcd_port}"
        etcd = self._spawn("etcd", [
            binary("etcd"), "--name=controlplane", f"--data-dir={self.workdir / 'etcd'}",
            f"--listen-client-urls={etcd_url}", f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
            f"--initial-cluster=controlplane=http://127.0.0.1:{peer_port}",
            # A test cluster's data need not survive a power cut: skip fsync, as kind's etcd does not.
            "--unsafe-no-fsync", "--log-level=warn",
        ])  # fmt: skip
        health = f"{etcd_url}/health"
        self._wait("etcd", lambda: urllib.request.urlopen(health, timeout=2).status == 200, etcd)  # noqa: S310

        port = free_port()
        self.server = f"https://127.0.0.1:{port}"
        apiserver = self._spawn("kube-apiserver", [
            binary("kube-apiserver"), f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={port}",
            f"--tls-cert-file={pki / 'apiserver.crt'}", f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}", f"--token-auth-file={pki / 'tokens.csv'}",
            "--authorization-mode=Node,RBAC",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            f"--kubelet-client-certificate={pki / 'kubelet-client.crt'}",
            f"--kubelet-client-key={pki / 'kubelet-client.key'}",
            # Pod Security Admission is on by default (GA since 1.25); the namespaces' labels choose
            # the level, as on EKS, GKE and AKS.
            f"--cert-dir={pki}",
        ])  # fmt: skip
        context = ssl.create_default_context(cafile=str(pki / "ca.crt"))

        def apiserver_ready() -> bool:
            bearer = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
            request = urllib.request.Request(f"{self.server}/readyz", headers=bearer)  # noqa: S310 (https, loopback)
            return urllib.request.urlopen(request, timeout=5, context=context).status == 200  # noqa: S310

        self._wait("kube-apiserver", apiserver_ready, apiserver)
        self.kubeconfig = self.workdir / "kubeconfig"
        write_kubeconfig(self.kubeconfig, self.server, pki / "ca.crt")

        self._spawn("kube-controller-manager", [
            binary("kube-controller-manager"), f"--kubeconfig={self.kubeconfig}",
            "--bind-address=127.0.0.1", "--secure-port=0", "--leader-elect=false",
            f"--service-account-private-key-file={pki / 'sa.key'}", f"--root-ca-file={pki / 'ca.crt'}",
            f"--cluster-cidr={POD_CIDR}", f"--service-cluster-ip-range={SERVICE_CIDR}",
            # Each controller runs as its own service account (system:serviceaccount:kube-system:<name>,
            # kubeadm's default and the managed clouds' way), with the system:controller:* roles the API
            # server bootstraps, and tokens it signs with sa.key: so admission and RBAC see the
            # identities a real cluster's controllers have (review 20 R1: with one admin identity here,
            # the researcher limits refused PodGC and the namespace controller unseen).
            "--use-service-account-credentials=true",
        ])  # fmt: skip
        self._spawn("kube-scheduler", [
            binary("kube-scheduler"), f"--kubeconfig={self.kubeconfig}",
            "--bind-address=127.0.0.1", "--secure-port=0", "--leader-elect=false",
        ])  # fmt: skip
        stages = self.workdir / "kwok-stages.yaml"
        stages.write_text(kwok_stages.config())
        self._spawn("kwok", [
            binary("kwok"), f"--kubeconfig={self.kubeconfig}", f"--config={stages}",
            f"--manage-nodes-with-annotation-selector={kwok_stages.NODE_ANNOTATION}=fake",
            f"--cidr={POD_CIDR}", "--node-ip=127.0.0.1", "--node-lease-duration-seconds=40",
            f"--server-address=127.0.0.1:{free_port()}",
        ])  # fmt: skip
        # The controller manager is up once it made the default namespace's service account.
        from kubernetes import client

        core = client.CoreV1Api(self.api())
        self._wait(
            "kube-controller-manager",
            lambda: core.read_namespaced_service_account("default", "default") is not None,
            self._processes[2],
        )
        for process in self._processes:
            if process.popen.poll() is not None:
                raise ControlPlaneError(f"{process.name} exited {process.popen.returncode}:\n{process.tail()}")

    def stop(self) -> None:
        stop_groups([process.popen for process in reversed(self._processes)])
        self._processes.clear()

    # ---- use -----------------------------------------------------------------------------------------
    def api(self):
        """A kubernetes.client.ApiClient authenticated as the admin."""
        from kubernetes import config

        return config.new_client_from_config(config_file=str(self.kubeconfig))

    def logs(self) -> dict[str, str]:
        """The last lines each component logged (for a failing test's message)."""
        return {process.name: process.tail() for process in self._processes}


def have_openssl() -> bool:
    return shutil.which("openssl") is not None
