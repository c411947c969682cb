"""The training image run as real containers with runc (issue 31's first slice).

Each container gets what a training pod gets from the platform, from the image's own runtime
config (`umoci unpack`'s config.json: the entrypoint as the image's USER, its Env, WorkingDir):
- the image's root file system read-only (pod_template: readOnlyRootFilesystem), one tmpfs at /tmp
  (the platform's scratch emptyDir) and the memory-backed /dev/shm;
- the shared store bind-mounted at /mnt/shared, its root given to the training user the way the
  store_owner Job gives it (chown TRAINING_UID:TRAINING_UID, chmod 2775: components/kube/store_owner.py);
- no capabilities, no new privileges (the `restricted` Pod Security level);
- /etc/hosts, /etc/hostname and an empty /etc/resolv.conf as the kubelet writes them into every
  container (the image has no /etc/hosts: without one torchrun's getaddrinfo("localhost") fails);
- a network namespace of its own holding only loopback, shared with the etcd the launcher's
  rendezvous uses (the job's etcd Service, here on that netns's 127.0.0.1): nothing else reachable.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from components.kube import store_owner
from components.spec import TRAINING_UID
from tests.containers.image import Image

STORE_MOUNT = "/mnt/shared"
ETCD_PORT = 2379
HOSTNAME = "trainer-0"
# The kubelet's managed hosts file (kubernetes pkg/kubelet/kubelet_pods.go, managedHostsHeader and
# the pod's own line): here the pod's address is its netns's only one, loopback.
HOSTS = ("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
         "fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n"
         f"127.0.0.1\t{HOSTNAME}\n")


class TierError(RuntimeError):
    """The container tier cannot start here (a tool missing, not root): tests fail with it."""


def require_tier() -> None:
    missing = [tool for tool in ("runc", "ip", "etcd", "umoci", "mmdebstrap") if shutil.which(tool) is None]
    if missing:
        raise TierError(f"{', '.join(missing)} not installed: "
                        "apt-get install runc iproute2 etcd-server umoci mmdebstrap")
    if os.geteuid() != 0:
        raise TierError(f"runc containers with their own network namespace need root here (uid {os.geteuid()})")


def give_store_to_trainer(store: Path) -> None:
    """What the store_owner Job does to the store's root (its script: chown uid:uid, chmod MODE)."""
    store.mkdir(parents=True, exist_ok=True)
    os.chown(store, TRAINING_UID, TRAINING_UID)
    store.chmod(int(store_owner.MODE, 8))


@dataclass
class Netns:
    name: str

    @property
    def path(self) -> str:
        return f"/var/run/netns/{self.name}"

    def exec(self, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.name, *argv]


@contextmanager
def netns() -> Iterator[Netns]:
    ns = Netns(f"tf-{uuid.uuid4().hex[:8]}")
    subprocess.run(["ip", "netns", "add", ns.name], check=True)
    try:
        subprocess.run(ns.exec(["ip", "link", "set", "lo", "up"]), check=True)
        yield ns
    finally:
        subprocess.run(["ip", "netns", "delete", ns.name], check=False)


@contextmanager
def etcd_in(ns: Netns, data_dir: Path, timeout: float = 60.0) -> Iterator[str]:
    """Debian's etcd 3.4 with the v2 API (torch's etcd-v2 backend) on the netns's loopback."""
    url = f"http://127.0.0.1:{ETCD_PORT}"
    log = open(data_dir.parent / "etcd.log", "wb")  # noqa: SIM115 (closed below)
    proc = subprocess.Popen(ns.exec(["etcd", "--enable-v2=true", f"--data-dir={data_dir}",
                                     f"--listen-client-urls={url}", f"--advertise-client-urls={url}",
                                     "--listen-peer-urls=http://127.0.0.1:2380"]), stdout=log, stderr=log)
    try:
        probe = f"import urllib.request; urllib.request.urlopen('{url}/version', timeout=2).read()"
        deadline = time.monotonic() + timeout
        while subprocess.run(ns.exec([sys.executable, "-c", probe]), capture_output=True).returncode != 0:
            if proc.poll() is not None or time.monotonic() > deadline:
                logged = (data_dir.parent / "etcd.log").read_text()[-2000:]
                raise TierError(f"etcd did not answer on {url} in {ns.name}: {logged}")
            time.sleep(0.3)
        yield f"127.0.0.1:{ETCD_PORT}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def spec(image: Image, args: list[str], store: Path, ns: Netns, *, replace_entrypoint: bool = False,
         env: dict[str, str] | None = None) -> dict:
    """The runtime config of one container: umoci's (the image's config) with the pod's settings.
    ARGS replace the image's CMD after its ENTRYPOINT, as a pod's `args` do."""
    cfg = image.runtime_config()
    entrypoint = image.config().get("Entrypoint") or []
    process = cfg["process"]
    process["args"] = list(args) if replace_entrypoint else [*entrypoint, *args]
    process["terminal"] = False
    process["noNewPrivileges"] = True
    process["capabilities"] = {k: [] for k in ("bounding", "effective", "inheritable", "permitted", "ambient")}
    process["env"] = [*process.get("env", []), *(f"{k}={v}" for k, v in (env or {}).items())]
    cfg["root"] = {"path": str(image.rootfs), "readonly": True}
    cfg["hostname"] = HOSTNAME
    mounts = [m for m in cfg.get("mounts", []) if m["destination"] not in ("/dev/shm", "/tmp", STORE_MOUNT)
              and not m["destination"].startswith("/etc/")]
    mounts += [
        {"destination": "/dev/shm", "type": "tmpfs", "source": "shm",
         "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=536870912"]},
        {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
         "options": ["nosuid", "nodev", "mode=1777", "size=268435456"]},
        {"destination": STORE_MOUNT, "type": "bind", "source": str(store),
         "options": ["rbind", "rw", "nosuid", "nodev"]},
        *({"destination": f"/etc/{name}", "type": "bind", "source": f"etc/{name}", "options": ["bind", "ro"]}
          for name in ("hosts", "hostname", "resolv.conf")),
    ]
    cfg["mounts"] = mounts
    linux = cfg.setdefault("linux", {})
    linux["namespaces"] = [n for n in linux.get("namespaces", []) if n["type"] != "network"] + \
        [{"type": "network", "path": ns.path}]
    linux.pop("uidMappings", None)
    linux.pop("gidMappings", None)
    return cfg


@dataclass
class Container:
    """One `runc run` in the foreground: its stdout is the container's (events, @@tf JSON lines),
    read by a thread as it comes."""

    id: str
    bundle: Path
    proc: subprocess.Popen
    started: float
    lines: list[str] = field(default_factory=list)
    seen: dict[str, float] = field(default_factory=dict)  # when each event kind was first read
    reader: threading.Thread | None = None

    def __post_init__(self) -> None:
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            event = parse(line)
            if event:
                self.seen.setdefault(event.get("ev"), time.monotonic())
            self.lines.append(line)

    def events(self, timeout: float, until) -> list[dict]:
        """Wait until UNTIL(event) holds for an event read (or the container ends, or TIMEOUT)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.all_events()
            if any(until(e) for e in found) or self.proc.poll() is not None:
                self.reader.join(5) if self.proc.poll() is not None else None
                return self.all_events()
            time.sleep(0.1)
        return self.all_events()

    def all_events(self) -> list[dict]:
        return [e for e in map(parse, list(self.lines)) if e]

    def kill(self, signal: str = "TERM") -> None:
        """runc kill: the signal goes to the container's init, the entrypoint (PID 1)."""
        subprocess.run(["runc", "kill", self.id, signal], check=True, capture_output=True)

    def wait(self, timeout: float) -> int:
        self.proc.wait(timeout)
        self.reader.join(30)
        return self.proc.returncode

    def log(self) -> str:
        return "\n".join(self.lines[-80:])

    def delete(self) -> None:
        if self.proc.poll() is None:
            subprocess.run(["runc", "kill", self.id, "KILL"], capture_output=True)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        subprocess.run(["runc", "delete", "--force", self.id], capture_output=True)


def parse(line: str) -> dict | None:
    if not line.startswith("@@tf "):
        return None
    try:
        return json.loads(line[5:])
    except ValueError:
        return None


def start(cfg: dict, workdir: Path) -> Container:
    cid = f"tf-{uuid.uuid4().hex[:10]}"
    bundle = workdir / cid
    bundle.mkdir(parents=True)
    (bundle / "config.json").write_text(json.dumps(cfg, indent=1))
    etc = bundle / "etc"  # the bind mounts' relative sources are the bundle's
    etc.mkdir()
    (etc / "hosts").write_text(HOSTS)
    (etc / "hostname").write_text(HOSTNAME + "\n")
    (etc / "resolv.conf").write_text("")
    for name in ("hosts", "hostname", "resolv.conf"):
        (etc / name).chmod(0o644)
    proc = subprocess.Popen(["runc", "run", "--bundle", str(bundle), cid], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return Container(cid, bundle, proc, time.monotonic())
