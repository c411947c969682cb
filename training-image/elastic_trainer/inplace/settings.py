"""The in-place mode's settings: the pod's environment, read and checked before anything starts.

Every variable the in-place trainer reads is named here (torchfleet/jobs/inplace_job.py and the local
runs, local/inplacerun.py, set them); a value that is wrong raises ValueError naming the variable
and what would be right, and the worker then exits ``EXIT_BAD_SETTINGS`` (2): its node does not
start it again (replica_node.py), since it would fail the same way. No torch import: the launcher's
node reads ``EXIT_BAD_SETTINGS`` too.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

# Which recovery a job uses: "restart" (torchrun restarts every worker, trainer.py) or "inplace".
ENV_RECOVERY = "TORCHFLEET_RECOVERY"
RECOVERY_MODES = ("restart", "inplace")
ENV_LIGHTHOUSE = "TORCHFT_LIGHTHOUSE"  # torchft's own variable: http://host:port of the job's Lighthouse
ENV_GROUP = "TORCHFLEET_REPLICA_GROUP"  # this node's index, 0..groups-1 (a pod's completion index)
ENV_COMPLETION_INDEX = "JOB_COMPLETION_INDEX"  # set by Kubernetes on each pod of an Indexed Job
ENV_GROUPS = "TORCHFLEET_REPLICA_GROUPS"  # how many slices a global batch is cut into (the job's nodes)
ENV_MIN_GROUPS = "TORCHFLEET_MIN_REPLICA_GROUPS"  # fewer groups than this in a quorum: no step commits
# How long a collective, a heal or a commit vote may take; a quorum may wait longer (a group
# waiting alone for the Lighthouse to come back). Seconds.
ENV_TIMEOUT_S = "TORCHFLEET_INPLACE_TIMEOUT_S"
ENV_QUORUM_TIMEOUT_S = "TORCHFLEET_INPLACE_QUORUM_TIMEOUT_S"
# The groups' gradient all-reduce: nccl (the default on a GPU) or gloo (the CPU's; on a GPU it
# reduces CUDA tensors through host memory). gloo on a GPU is for two groups sharing one GPU,
# which NCCL refuses: bench/goodput.py --overhead measures a heal from a peer that way.
ENV_BACKEND = "TORCHFLEET_INPLACE_BACKEND"
# How long a group that does not write the final checkpoint waits for it before it exits (_finish):
# the writer's final save of a large state to a network store can take minutes.
ENV_FINAL_WAIT_S = "TORCHFLEET_INPLACE_FINAL_WAIT_S"
# How long a worker waits for a Lighthouse that refuses connections before it exits for its node to
# start it again (replica_node.py; a retry, up to --max_restarts): a Lighthouse pod rescheduled onto
# a new node pulls its image and starts within minutes; one away longer is reported, not waited on
# in silence (issue 23: every wait in the recovery path is bounded).
ENV_LIGHTHOUSE_WAIT_S = "TORCHFLEET_INPLACE_LIGHTHOUSE_WAIT_S"
# The most one torchft call may take before the worker exits (stall_guard.py: start_quorum, wait_quorum
# and should_commit have no timeout of their own). 300 s: the restart mode's process-group timeout
# (launcher.py, TORCHFLEET_PG_TIMEOUT_S: a peer that stalls longer has failed), far above the bounds
# of what runs inside one call (quorum + configure + heal metadata + transfer: 40 s by default), with
# room for a heal of a large state over a slow link (longer torchft timeouts raise the default).
ENV_STALL_S = "TORCHFLEET_INPLACE_STALL_S"
EXIT_BAD_SETTINGS = 2  # the node does not start the worker again (replica_node.FINAL_CODES)



def recovery_mode(environ: dict[str, str] | os._Environ[str] = os.environ) -> str:
    """The job's recovery mode; a value that is neither mode is refused, naming the variable."""
    mode = environ.get(ENV_RECOVERY, "restart") or "restart"
    if mode not in RECOVERY_MODES:
        raise ValueError(f"{ENV_RECOVERY}={mode!r}: must be one of {', '.join(RECOVERY_MODES)}")
    return mode


def env_int(name: str, default: int | None, minimum: int) -> int:
    text = os.environ.get(name)
    if text is None or text == "":
        if default is None:
            raise ValueError(f"{name} is not set: the in-place mode needs it (training-image/README.md)")
        return default
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{name}={text!r}: must be a whole number >= {minimum}") from None
    if value < minimum:
        raise ValueError(f"{name}={text!r}: must be a whole number >= {minimum}")
    return value


def env_seconds(name: str, default: float) -> float:
    text = os.environ.get(name) or ""
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ValueError(f"{name}={text!r}: must be a positive number of seconds")
    return value


def backend(device: torch.device) -> str:
    """``TORCHFLEET_INPLACE_BACKEND``, else nccl on a GPU and gloo on the CPU; nccl needs a GPU."""
    chosen = os.environ.get(ENV_BACKEND) or ("nccl" if device.type == "cuda" else "gloo")
    if chosen not in ("nccl", "gloo"):
        raise ValueError(f"{ENV_BACKEND}={chosen!r}: must be nccl or gloo")
    if chosen == "nccl" and device.type != "cuda":
        raise ValueError(f"{ENV_BACKEND}=nccl needs a CUDA device and this worker has none: use gloo")
    return chosen


def group_index() -> int:
    """``TORCHFLEET_REPLICA_GROUP``, else a Kubernetes Indexed Job's ``JOB_COMPLETION_INDEX`` (one per pod)."""
    if os.environ.get(ENV_GROUP, "") == "" and os.environ.get(ENV_COMPLETION_INDEX, "") != "":
        return env_int(ENV_COMPLETION_INDEX, None, 0)
    return env_int(ENV_GROUP, None, 0)
