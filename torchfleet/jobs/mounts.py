"""`--mount PATH`: where the shared claim appears in the pods, normalized and kept off system paths.

A volume mounted over /etc, /usr or /proc hides what the container needs to run (or, on /proc
and /sys, is refused by the runtime only when the pod starts); one over /dev/shm collides with
the pod's own memory-backed /dev/shm (a duplicate mountPath the API server refuses); one over
/workspace hides the training image's code (training-image/Dockerfile WORKDIR), and one over /opt
or /opt/conda its Python, torch included (issue 23: `--mount /opt` was accepted): the image's base,
pytorch/pytorch, installs conda there (its Dockerfile: ``COPY --from=conda-installs /opt/conda
/opt/conda`` and ``ENV PATH /opt/conda/bin:$PATH``). Beside it, ``/opt/data`` is fine.
"""

from __future__ import annotations

import posixpath
import re

from torchfleet.jobs.errors import UsageError

DEFAULT_MOUNT = "/mnt/shared"
# The OS's own trees, the kubelet's files (/etc/hosts, /dev/termination-log, the service account
# under /var/run/secrets), the pod's /dev/shm volume, the training image's code and its Python.
RESERVED = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/opt/conda", "/proc", "/root",
            "/run", "/sbin", "/sys", "/usr", "/var/lib", "/var/run", "/workspace")
MAX_LENGTH = 255
_SEGMENT = re.compile(r"[A-Za-z0-9._@+-]+", re.ASCII)


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def normalize_mount(mount: str) -> str:
    """The mount path with '.', '..' and repeated slashes resolved; a UsageError if it is not usable."""
    example = f"e.g. {DEFAULT_MOUNT} or /data"
    if not mount.startswith("/"):
        raise UsageError(f"--mount: expected an absolute path, {example}; got {mount!r}")
    # normpath keeps a leading "//" (POSIX leaves its meaning to the system); a container does not.
    path = "/" + posixpath.normpath(mount).lstrip("/")
    segments = [s for s in path.split("/") if s]
    if not all(_SEGMENT.fullmatch(s) for s in segments):
        raise UsageError(f"--mount: {mount!r} has characters a mount path should not; use letters, digits and "
                         f". _ - @ + between slashes, {example}")
    if len(path) > MAX_LENGTH:
        raise UsageError(f"--mount: {len(path)} characters, at most {MAX_LENGTH}; {example}")
    clash = next((r for r in RESERVED if _within(path, r) or _within(r, path)), None)
    if clash is not None:
        shown = mount if path == mount else f"{mount!r} (that is {path})"
        where = "is" if path == clash else "sits inside" if _within(path, clash) else "would cover"
        raise UsageError(f"--mount: {shown} {where} {clash}, which the container needs; "
                         f"mount the shared store elsewhere, {example}")
    return path
