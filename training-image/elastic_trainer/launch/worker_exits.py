"""What a worker says when it cannot start, or when it leaves because a peer was lost (issue 22).

Both used to end in a torch traceback: ``python train.py`` without the launcher in torch's
``environment variable RANK expected, but not set``, and every node loss in a 44-line traceback
on each survivor (the collective that met the dead peer raised), which read like a crash although
it is the normal recovery: the worker exits, its agent re-forms the group, training resumes from
the last checkpoint. ``TORCHFLEET_DEBUG=1`` prints the full traceback again.

No torch import at module level: the launcher's side uses it too.
"""

from __future__ import annotations

import os
import re
import sys
import traceback
from collections.abc import Mapping

from elastic_trainer import EXIT_MEMBERSHIP_CHANGE

DEBUG_ENV = "TORCHFLEET_DEBUG"  # the torchfleet CLI's name for the same switch (torchfleet/cli.py)
# What torch's env:// rendezvous reads (torch/distributed/rendezvous.py, _env_rendezvous_handler);
# torchrun sets them for every worker it starts.
LAUNCHER_ENV = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
EXIT_NOT_LAUNCHED = 2  # a usage error: every retry would fail the same way (the launcher's EXIT_BAD_INPUT)
# How a collective reports a peer that is gone: gloo's TCP transport (its messages name their source,
# third_party/gloo/gloo/transport/tcp/pair.cc: "Connection reset by peer", "Read error", and a receive
# that timed out), NCCL's abort of a communicator whose peer exited; torch raises some as a DistError
# subclass (DistBackendError, DistNetworkError), gloo's as a plain RuntimeError. Narrow on purpose: a
# RuntimeError of the script's own (a data reader's "Read error") keeps its traceback.
_PEER_LOST = re.compile(r"gloo/transport|Connection (reset|closed) by peer|NCCL communicator was aborted|"
                        r"remote process exited")


def debug(environ: Mapping[str, str] = os.environ) -> bool:
    return environ.get(DEBUG_ENV, "") not in ("", "0")


def missing_launcher_env(environ: Mapping[str, str] = os.environ) -> list[str]:
    return [name for name in LAUNCHER_ENV if not environ.get(name)]


def not_launched_message(script: str, missing: list[str]) -> str:
    """Why ``python train.py`` alone cannot train, and the commands that run it."""
    name = os.path.basename(script) or "train.py"
    return (
        f"{name}: started without the elastic launcher ({', '.join(missing)} not set). The trainer is one of the "
        "workers a launcher starts; on this machine run it as\n"
        f"  python -m elastic_trainer.launcher --standalone --nproc_per_node=1 {name} ARGS   (or torchrun "
        "--standalone, same options)\n"
        f"  torchfleet run --local -- {name} ARGS   several local nodes with etcd, a node killed on a schedule "
        "(--kill-at STEP)\n"
        # no --image: submit uses the published training image by default (torchfleet/jobs/image_ref.py)
        f"and on a cluster: torchfleet submit NAME --stack STACK --gpu GPU --workdir . -- python {name} ARGS   "
        "(the published training image by default; --workdir sends this folder)"
    )


def exit_if_not_launched(environ: Mapping[str, str] = os.environ) -> None:
    missing = missing_launcher_env(environ)
    if missing:
        print(not_launched_message(sys.argv[0] if sys.argv else "", missing), file=sys.stderr, flush=True)
        raise SystemExit(EXIT_NOT_LAUNCHED)


def peer_lost(exc: BaseException) -> bool:
    """Whether ``exc`` is a collective failing because another rank is gone (not a bug of this rank)."""
    try:
        from torch.distributed import DistError
    except ImportError:  # torch built without distributed: no peers to lose
        return False
    if not isinstance(exc, (RuntimeError, DistError)):
        return False
    return isinstance(exc, DistError) or bool(_PEER_LOST.search(str(exc)))


def _first_sentence(exc: BaseException) -> str:
    text = re.sub(r"^\[[^\]]*\]\s*", "", str(exc).strip().splitlines()[0] if str(exc).strip() else "")
    first = text.split(". ", 1)[0].rstrip(".")
    return first[:200] or type(exc).__name__


def peer_lost_line(exc: BaseException, rank: int) -> str:
    return (
        f"[torchfleet] rank {rank}: a peer left the group ({_first_sentence(exc)}); this worker exits "
        f"{EXIT_MEMBERSHIP_CHANGE} and its agent re-forms the group, which resumes from the last checkpoint: the "
        f"normal recovery from a lost node ({DEBUG_ENV}=1 prints the traceback)"
    )


def leave_after_peer_loss(exc: BaseException, rank: int) -> int:
    """One line (the traceback too with TORCHFLEET_DEBUG=1); the exit code that makes the agent restart us."""
    if debug():
        traceback.print_exception(exc, file=sys.stderr)
    print(peer_lost_line(exc, rank), file=sys.stderr, flush=True)
    return EXIT_MEMBERSHIP_CHANGE
