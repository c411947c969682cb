"""``--workdir``'s cluster side, as plain data: the ConfigMaps that carry the packed code, the volume and the
init container that unpack it onto the shared store under the job's folder, where the training command runs.

- The tarball (workdir_pack.py) is cut into parts of PART_BYTES, one immutable ConfigMap each: the API
  server refuses a ConfigMap whose data passes 1 MiB (``MaxSecretSize``, pkg/apis/core/validation
  ValidateConfigMap), and immutable ones are not watched by the kubelets. A sweep's jobs share one set.
  submit creates them before the job (a pod must find them) and then makes each job an owner, so deleting
  the jobs deletes them; a failed submit removes what it made (commands.py).
- One projected volume gathers the parts as ``part-000``, ``part-001``, ... The init container, the
  training image itself (no other image to pull or trust) under the same restricted security context with
  a read-only root, joins them, checks their sha256 and extracts with tarfile's ``data`` filter (absolute
  paths made relative; ``..``, links leaving the folder and device files refused: Python 3.11.4+, PEP 706) into a
  temporary folder beside the target, then renames it into place. The target is named by the sha256,
  so the pods of a job (and a later submit of the same code under the same job name) find it complete or
  make it: a rename onto a finished folder fails and the loser removes its copy, nothing half-written is
  ever seen. A changed file is a new sha256, a new folder, a new submit; the image stays the same.
- The training container's ``workingDir`` is that folder: ``-- python train.py`` runs the packed train.py.
"""

from __future__ import annotations

import base64
import secrets
from dataclasses import dataclass
from typing import Any

# Under the API server's 1 MiB for a ConfigMap's data, with room to spare for nothing else in it.
PART_BYTES = 960 * 1024
PART_KEY = "part"
VOLUME = "workdir-archive"
ARCHIVE_DIR = "/var/run/torchfleet/workdir"  # where the parts appear in the init container
INIT_CONTAINER = "workdir"
GPU_VISIBILITY_ENV = "NVIDIA_VISIBLE_DEVICES"
LABEL_WORKDIR = "torchfleet.io/workdir"  # the sha256's first 16 digits (a label value is at most 63 characters)
ANNOTATION_SHA256 = "torchfleet.io/workdir-sha256"
WORKDIR_ENV = "TORCHFLEET_WORKDIR"
SHORT = 16  # hex digits of the sha256 in names: 64 bits, no collision between one job's submits

# The init container's program, run as ``python -c UNPACK ARCHIVE_DIR SHA256 TARGET``; tests run this
# exact command on this machine (tests/torchfleet/test_workdir_unpack.py).
UNPACK = """\
import hashlib, io, os, shutil, sys, tarfile, tempfile
parts, want, target = sys.argv[1:4]
if os.path.isdir(target):
    print(f"workdir: {target} is already unpacked"); sys.exit(0)
if not hasattr(tarfile, "data_filter"):
    sys.exit("workdir: this image's Python has no tarfile data filter (3.11.4 or later needed)")
names = sorted(n for n in os.listdir(parts) if n.startswith("part-"))
data = b"".join(open(os.path.join(parts, n), "rb").read() for n in names)
got = hashlib.sha256(data).hexdigest()
if got != want:
    sys.exit(f"workdir: the archive's sha256 is {got}, expected {want} ({len(names)} parts, {len(data)} bytes)")
os.makedirs(os.path.dirname(target), exist_ok=True)
temporary = tempfile.mkdtemp(prefix=".unpacking-", dir=os.path.dirname(target))
try:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        tar.extractall(temporary, filter="data")
    os.chmod(temporary, 0o755)
except BaseException:
    shutil.rmtree(temporary, ignore_errors=True)
    raise
try:
    os.rename(temporary, target)
except OSError:
    shutil.rmtree(temporary, ignore_errors=True)
    if not os.path.isdir(target):
        raise
    print(f"workdir: {target} was unpacked by another pod of the job")
else:
    print(f"workdir: unpacked {len(data)} bytes into {target}")
"""


@dataclass(frozen=True)
class Workdir:
    """A packed workdir as the manifests need it: which ConfigMaps hold it, and its sha256."""

    owner: str  # the job's name, or the sweep's: the ConfigMaps' name prefix
    sha256: str
    parts: int
    nonce: str = "0"  # this submit's (new_nonce): the ConfigMaps' names are its own

    @property
    def short(self) -> str:
        return self.sha256[:SHORT]

    def config_map_names(self) -> list[str]:
        return [f"{self.owner}-workdir-{self.nonce}-{i}" for i in range(self.parts)]

    def target(self, job_dir: str) -> str:
        """Where the code is unpacked and the command runs: on the shared store, under the job."""
        return f"{job_dir}/workdir/{self.short}"


def new_nonce() -> str:
    """Names of this submit's own, not the content's. Named by the content, a job ``foo`` submitted beside a
    running sweep ``foo`` of the same code would meet the sweep's ConfigMaps (409); and ``delete X && submit
    X`` of the same code could meet the old job's, which the garbage collector removes only after the job is
    gone (``delete`` propagates in the background), on a busy cluster seconds later."""
    return secrets.token_hex(4)


def reference(owner: str, data: bytes, sha256: str) -> Workdir:
    return Workdir(owner=owner, sha256=sha256, parts=max(1, -(-len(data) // PART_BYTES)), nonce=new_nonce())


def config_maps(workdir: Workdir, data: bytes, namespace: str, labels: dict[str, str]) -> list[dict[str, Any]]:
    """The ConfigMaps holding DATA (the tarball whose sha256 WORKDIR names), in order."""
    out = []
    for i, name in enumerate(workdir.config_map_names()):
        chunk = data[i * PART_BYTES : (i + 1) * PART_BYTES]
        out.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "labels": {**labels, LABEL_WORKDIR: workdir.short},
                    "annotations": {ANNOTATION_SHA256: workdir.sha256},
                },
                "immutable": True,
                "binaryData": {PART_KEY: base64.b64encode(chunk).decode("ascii")},
            }
        )
    return out


def volume(workdir: Workdir) -> dict[str, Any]:
    sources = [
        {"configMap": {"name": name, "items": [{"key": PART_KEY, "path": f"part-{i:03d}"}]}}
        for i, name in enumerate(workdir.config_map_names())
    ]
    return {"name": VOLUME, "projected": {"sources": sources, "defaultMode": 0o444}}


def command(workdir: Workdir, job_dir: str) -> list[str]:
    return ["python", "-c", UNPACK, ARCHIVE_DIR, workdir.sha256, workdir.target(job_dir)]


def init_container(
    workdir: Workdir, job_dir: str, worker: dict[str, Any], shared_mount: dict[str, Any]
) -> dict[str, Any]:
    """The unpack step: the worker's image and security context, a read-only root, small requests."""
    return {
        "name": INIT_CONTAINER,
        "image": worker["image"],
        "imagePullPolicy": worker["imagePullPolicy"],
        "command": command(workdir, job_dir),
        # No GPU of its node: it asks for none, and the device plugin's default strategy passes GPUs by this
        # variable, which the image may set to `all` (NVIDIA/k8s-device-plugin README at v0.20.0,
        # DEVICE_LIST_STRATEGY); `void` is "as runc". The researcher limits require it of an init
        # container without a GPU in a GPU pod (k8s/base/cluster/validatingadmissionpolicy-researcher-limits.yaml).
        "env": [{"name": "PYTHONDONTWRITEBYTECODE", "value": "1"}, {"name": GPU_VISIBILITY_ENV, "value": "void"}],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
        "securityContext": {**worker["securityContext"], "readOnlyRootFilesystem": True},
        "volumeMounts": [{"name": VOLUME, "mountPath": ARCHIVE_DIR, "readOnly": True}, dict(shared_mount)],
    }


def apply(pod_spec: dict[str, Any], workdir: Workdir, job_dir: str, shared_volume: str) -> None:
    """Add the unpack step to a pod spec built for the job, and run its training container in the code."""
    worker = pod_spec["containers"][0]
    shared = next(m for m in worker["volumeMounts"] if m["name"] == shared_volume)
    pod_spec["initContainers"] = [init_container(workdir, job_dir, worker, shared)]
    pod_spec["volumes"].append(volume(workdir))
    worker["workingDir"] = workdir.target(job_dir)
    worker["env"].append({"name": WORKDIR_ENV, "value": workdir.target(job_dir)})
