"""The training controllers the project installs, run as local processes against the test control plane.

Each is the pinned upstream build (build.py: modules/elasticjob, modules/kubeflow), started out of
cluster with the flags of its own main.go and its Deployment's settings except where a process on
this machine must differ:

- metrics (and the training-operator's health probes) on free loopback ports, leader election off
  (one replica, as the project deploys);
- the ElasticJob controller (pytorch/elastic kubernetes/main.go: --metrics-addr,
  --enable-leader-election, and controller-runtime v0.3.0's --kubeconfig) gets the project's own
  CRD from k8s/base/crds/ and runs as the project's service account with the project's RBAC
  (k8s/base/controller/), so a missing permission shows here. Its klog v0.x writes log files into
  os.TempDir() (review B2): TMPDIR is the controller's own folder, so those files stay beside its log;
- the training-operator (kubeflow/training-operator cmd/training-operator.v1/main.go), as the admin
  (its RBAC is upstream's), gets what the project installs, the standalone overlay of the pinned
  release (components/kube/kubeflow.py), rendered from the module the build downloaded, minus its
  Deployment, Service and RBAC: the namespace, the CRDs, the webhook Secret and the
  ValidatingWebhookConfiguration. In the cluster the webhook is reached through the Service
  `training-operator` and the kubelet mounts the Secret at /tmp/k8s-webhook-server/serving-certs;
  here the configuration's clientConfig is a URL on loopback and the certificate files are written
  where controller-runtime reads them. The pair is our own (openssl), valid for the Service's DNS
  name and 127.0.0.1, so the operator's cert rotator (open-policy-agent/cert-controller) keeps it
  instead of minting one that 127.0.0.1 would not match; the rotator still injects the CA into the
  webhook configuration itself.
"""

from __future__ import annotations

import base64
import contextlib
import os
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

from components.kube.kubeflow import TRAINING_OPERATOR_NAMESPACE
from tests.controlplane import build
from tests.controlplane.cluster import ControlPlane, binary, free_port, openssl, spawn_group, stop_groups
from tests.controlplane.layer import grant_etcd_gate, kubectl

REPO = Path(__file__).resolve().parents[2]
ELASTICJOB_CRD = REPO / "k8s" / "base" / "crds" / "elasticjob.yaml"
# pytorch/elastic kubernetes/ at v0.2.2, verbatim (its SOURCE.md says why and lists the blob ids).
ELASTICJOB_SOURCE = build.MODULES / "elasticjob" / "upstream"
ELASTICJOB_CONTROLLER_DIR = REPO / "k8s" / "base" / "controller"
CONTROLLER_RBAC = (
    "serviceaccount.yaml",
    "clusterrole.yaml",
    "clusterrolebinding.yaml",
    "role-leader-election.yaml",
    "rolebinding-leader-election.yaml",
)
CONTROLLER_ACCOUNT, CONTROLLER_NAMESPACE = "elasticjob-controller", "elastic-job"  # serviceaccount.yaml
KUBEFLOW_MODULE = "github.com/kubeflow/training-operator"
# Names the operator's main.go and pkg/cert/cert.go fix (v1.9.4): its webhook Secret, the Service
# its certificate names, the webhook configuration its rotator fills in, and where the server reads
# the pair (controller-runtime's default: os.TempDir()/k8s-webhook-server/serving-certs).
WEBHOOK_SECRET = "training-operator-webhook-cert"
WEBHOOK_SERVICE = "training-operator"
WEBHOOK_CONFIGURATION = "validator.training-operator.kubeflow.org"
CA_NAME = "training-operator-ca"
CERT_SUBDIR = Path("k8s-webhook-server") / "serving-certs"
# The rotator waits for this file (cert.go's certDir is a fixed /tmp path, where the kubelet
# would mount the Secret) before it marks the certificates ready and the controllers start.
ROTATOR_CERT_FILE = Path("/tmp") / CERT_SUBDIR / "tls.crt"
START_TIMEOUT_S = 180  # a controller's start on a loaded 2-core machine (CI's size)


class OperatorError(RuntimeError):
    pass


@dataclass
class Operator:
    name: str
    popen: subprocess.Popen
    log: Path
    workdir: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.text().splitlines()[-lines:])

    def wait_for_log(self, needle: str, what: str, timeout_s: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if needle in self.text():
                return
            if self.popen.poll() is not None:
                raise OperatorError(f"{self.name} exited {self.popen.returncode} before {what}:\n{self.tail()}")
            time.sleep(0.5)
        raise OperatorError(f"{self.name}: {what} not after {timeout_s} s:\n{self.tail()}")

    def stop(self) -> None:
        stop_groups([self.popen])


def _spawn(name: str, argv: list[str], workdir: Path, env: dict[str, str]) -> Operator:
    log = workdir / f"{name}.log"
    return Operator(name, spawn_group(argv, log, env), log, workdir)


# ---- the ElasticJob controller -------------------------------------------------------------------
def apply_elasticjob_crd(cp: ControlPlane) -> None:
    kubectl(cp, "apply", "--server-side", "-f", str(ELASTICJOB_CRD))
    kubectl(cp, "wait", "--for=condition=Established", "--timeout=120s", "crd/elasticjobs.elastic.pytorch.org")
    grant_etcd_gate(cp)


def elasticjob_controller_kubeconfig(cp: ControlPlane, workdir: Path) -> Path:
    """A kubeconfig for the controller's own service account, bound to the project's RBAC
    (k8s/base/controller: its ClusterRole and the leader-election Role), so the controller can do
    only what its Deployment could."""
    kubectl(cp, "apply", "--server-side", *[f"--filename={ELASTICJOB_CONTROLLER_DIR / f}" for f in CONTROLLER_RBAC])
    token = kubectl(cp, "create", "token", CONTROLLER_ACCOUNT, "-n", CONTROLLER_NAMESPACE, "--duration=6h").strip()
    config = yaml.safe_load(cp.kubeconfig.read_text())
    for user in config["users"]:
        user["user"] = {"token": token}
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "controller.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


@contextlib.contextmanager
def elasticjob_controller(cp: ControlPlane, workdir: Path) -> Iterator[Operator]:
    """The 2020 ElasticJob controller, watching every namespace as its Deployment does."""
    apply_elasticjob_crd(cp)
    kubeconfig = elasticjob_controller_kubeconfig(cp, workdir)
    tmp = workdir / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    operator = _spawn(
        "elasticjob-controller",
        [
            binary("elasticjob-controller"),
            f"--kubeconfig={kubeconfig}",
            f"--metrics-addr=127.0.0.1:{free_port()}",
            "--enable-leader-election=false",
        ],
        workdir,
        {"TMPDIR": str(tmp)},
    )
    try:
        # controller-runtime v0.3.0 logs this once its caches synced (internal/controller/controller.go).
        operator.wait_for_log("Starting workers", "its workers' start")
        yield operator
    finally:
        operator.stop()


# Run as its Deployment runs it (k8s/base/controller/deployment.yaml: --enable-leader-election), in a
# private mount namespace (root only) that gives it what a pod has and a process here lacks: the
# service account's namespace file, from which controller-runtime v0.3.0 takes the leader-election
# namespace (pkg/leaderelection getInClusterNamespace), and, unless TMP_WRITABLE is 1, a temporary
# folder on a read-only mount, as a read-only root filesystem without a /tmp volume would be.
_AS_DEPLOYED = """set -e
mount -t tmpfs tmpfs /run
mkdir -p /run/secrets/kubernetes.io/serviceaccount
printf %s "$NAMESPACE" > /run/secrets/kubernetes.io/serviceaccount/namespace
if [ "$TMP_WRITABLE" != 1 ]; then mount --bind "$TMPDIR" "$TMPDIR"; mount -o remount,bind,ro "$TMPDIR"; fi
exec "$@"
"""


@contextlib.contextmanager
def elasticjob_controller_as_deployed(
    cp: ControlPlane, workdir: Path, namespace: str, tmp_writable: bool
) -> Iterator[Operator]:
    """The ElasticJob controller with leader election on, its TMPDIR writable or read-only."""
    apply_elasticjob_crd(cp)
    kubeconfig = elasticjob_controller_kubeconfig(cp, workdir)
    tmp = workdir / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    operator = _spawn(
        "elasticjob-controller",
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", _AS_DEPLOYED, "sh",
         binary("elasticjob-controller"), f"--kubeconfig={kubeconfig}",
         f"--metrics-addr=127.0.0.1:{free_port()}", "--enable-leader-election"],
        workdir,
        {"TMPDIR": str(tmp), "NAMESPACE": namespace, "TMP_WRITABLE": "1" if tmp_writable else "0"},
    )  # fmt: skip
    try:
        yield operator
    finally:
        operator.stop()
        # The lock (a ConfigMap: controller-runtime v0.3.0) would make the next leader wait it out.
        kubectl(cp, "delete", "configmap", "-n", namespace, "controller-leader-election-helper", "--ignore-not-found")


# ---- Kubeflow's training-operator ----------------------------------------------------------------
@cache
def kubeflow_source() -> Path:
    """The pinned training-operator module's folder in Go's module cache (the build downloaded it)."""
    done = subprocess.run(
        ["go", "list", "-m", "-f", "{{.Dir}}", KUBEFLOW_MODULE],
        cwd=build.MODULES / "kubeflow",
        env={**os.environ, "GOFLAGS": "-mod=readonly", "GOTOOLCHAIN": "local"},
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(done.stdout.strip())


def standalone_overlay(cp: ControlPlane) -> list[dict]:
    """manifests/overlays/standalone of the pinned release, as kustomize renders it."""
    rendered = kubectl(cp, "kustomize", str(kubeflow_source() / "manifests" / "overlays" / "standalone"))
    return [obj for obj in yaml.safe_load_all(rendered) if obj]


def webhook_pki(folder: Path, namespace: str = TRAINING_OPERATOR_NAMESPACE) -> dict[str, bytes]:
    """A CA and the webhook's serving pair, in the Secret's keys (ca.crt, ca.key, tls.crt, tls.key).

    The rotator keeps a pair only if the CA verifies for the DNS name CA_NAME, the server
    certificate for <service>.<namespace>.svc, and both stay valid past its 90-day look-ahead
    (cert-controller pkg/rotator/rotator.go: validCACert, validServerCert, defaultLookaheadInterval)."""
    folder.mkdir(parents=True, exist_ok=True)
    # PKCS#1 keys: the rotator reads the CA key with x509.ParsePKCS1PrivateKey (OpenSSL 3 writes
    # PKCS#8 unless told otherwise).
    for key in ("ca.key", "tls.key"):
        openssl("genrsa", "-traditional", "-out", key, "2048", cwd=folder)
    openssl("req", "-x509", "-key", "ca.key", "-out", "ca.crt", "-days", "365", "-subj", f"/CN={CA_NAME}",
             "-addext", f"subjectAltName=DNS:{CA_NAME}", cwd=folder)  # fmt: skip
    openssl("req", "-new", "-key", "tls.key", "-out", "tls.csr", "-subj", f"/CN={WEBHOOK_SERVICE}.{namespace}.svc",
             cwd=folder)  # fmt: skip
    (folder / "server.ext").write_text(
        f"subjectAltName=DNS:{WEBHOOK_SERVICE}.{namespace}.svc,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"
    )
    openssl("x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "tls.crt", "-days", "365", "-extfile", "server.ext", cwd=folder)  # fmt: skip
    return {name: (folder / name).read_bytes() for name in ("ca.crt", "ca.key", "tls.crt", "tls.key")}


def _webhook_on_loopback(configuration: dict, port: int) -> dict:
    """The overlay's ValidatingWebhookConfiguration with each Service reference made a loopback URL."""
    for hook in configuration["webhooks"]:
        path = hook["clientConfig"].pop("service")["path"]
        hook["clientConfig"]["url"] = f"https://127.0.0.1:{port}{path}"
    return configuration


@contextlib.contextmanager
def training_operator(cp: ControlPlane, workdir: Path) -> Iterator[Operator]:
    """The training-operator with its validating webhook on, watching every namespace."""
    objects = standalone_overlay(cp)
    kinds = {"Namespace", "CustomResourceDefinition", "Secret", "ValidatingWebhookConfiguration"}
    wanted = [obj for obj in objects if obj["kind"] in kinds]
    [secret] = [obj for obj in wanted if obj["kind"] == "Secret"]
    [configuration] = [obj for obj in wanted if obj["kind"] == "ValidatingWebhookConfiguration"]
    if (secret["metadata"]["name"], configuration["metadata"]["name"]) != (WEBHOOK_SECRET, WEBHOOK_CONFIGURATION):
        raise OperatorError(f"the overlay's webhook names changed: {secret['metadata']} {configuration['metadata']}")
    pair = webhook_pki(workdir / "pki")
    secret["data"] = {key: base64.b64encode(value).decode() for key, value in pair.items()}
    webhook_port = free_port()
    _webhook_on_loopback(configuration, webhook_port)

    tmp = workdir / "tmp"
    serving = tmp / CERT_SUBDIR
    serving.mkdir(parents=True, exist_ok=True)
    for key in ("tls.crt", "tls.key"):  # what the kubelet's secret volume would hold
        (serving / key).write_bytes(pair[key])
        (serving / key).chmod(0o600)
    if not ROTATOR_CERT_FILE.exists():  # only its existence is read; another run's file serves too
        ROTATOR_CERT_FILE.parent.mkdir(parents=True, exist_ok=True)
        ROTATOR_CERT_FILE.write_bytes(pair["tls.crt"])

    first = [obj for obj in wanted if obj["kind"] in {"Namespace", "CustomResourceDefinition"}]
    kubectl(cp, "apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(first))
    crds = [f"crd/{obj['metadata']['name']}" for obj in first if obj["kind"] == "CustomResourceDefinition"]
    kubectl(cp, "wait", "--for=condition=Established", "--timeout=120s", *crds)
    grant_etcd_gate(cp)
    kubectl(cp, "apply", "--server-side", "--force-conflicts", "-f", "-",
            input=yaml.safe_dump_all([secret, configuration]))  # fmt: skip

    probe_port = free_port()
    operator = _spawn(
        "training-operator",
        [
            binary("training-operator"),
            f"--kubeconfig={cp.kubeconfig}",
            f"--metrics-bind-address=127.0.0.1:{free_port()}",
            f"--health-probe-bind-address=127.0.0.1:{probe_port}",
            "--leader-elect=false",
            f"--webhook-server-port={webhook_port}",
        ],
        workdir,
        # MY_POD_NAMESPACE: the Deployment's downward-API value, which names the Secret's namespace.
        {"TMPDIR": str(tmp), "MY_POD_NAMESPACE": TRAINING_OPERATOR_NAMESPACE},
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _ready(probe_port):  # readyz: the certificates are in place and the webhook serves
            if operator.popen.poll() is not None or time.monotonic() > deadline:
                raise OperatorError(f"training-operator not ready (exit {operator.popen.poll()}):\n{operator.tail()}")
            time.sleep(0.5)
        operator.wait_for_log("pytorchjob-controller", "the PyTorchJob controller's start")
        operator.wait_for_log("Starting workers", "its workers' start")
        yield operator
    finally:
        operator.stop()
        # failurePolicy: Fail would refuse every later PyTorchJob of the session with no server.
        kubectl(cp, "delete", "validatingwebhookconfiguration", WEBHOOK_CONFIGURATION, "--ignore-not-found")


def _ready(port: int) -> bool:
    try:
        return urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2).status == 200
    except OSError:
        return False
