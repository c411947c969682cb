"""A node of an in-place job (``TORCHFLEET_RECOVERY=inplace``): one worker, restarted only if it fails.

The launcher hands over to this instead of torchrun (the top-level launcher.py). No rendezvous: a node is one
torchft replica group, and the job's Lighthouse, not etcd, decides who trains each step
(inplace/group.py). Peers coming and going never touch this process or its worker; only the worker's
own failure does (the Lighthouse unreachable, a crash): it is started again, up to
``--max_restarts`` times (default 100, as the restart mode's; ``PET_MAX_RESTARTS`` too).

- SIGTERM/SIGINT are forwarded to the worker, which checkpoints and exits 143/130; the node
  exits with the worker's code (both controllers retry 143).
- exit 0 (done) and 2 (bad input) end the node; any other exit starts the worker again after a
  short pause.
- ``--nproc_per_node`` above 1 is refused: the replica group is the node's one worker.

No torch import here (the launcher's rule: the agent side stays light).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from types import FrameType

# Exits that end the node rather than restart its worker.
FINAL_CODES = (0, 2)
RESTART_PAUSE_S = 0.5
DEFAULT_MAX_RESTARTS = 100


class NodeError(ValueError):
    """Bad in-place launch options: the message names the option, the value and what would do."""


def _value(options: Sequence[str], flag: str) -> str | None:
    found = None
    for i, token in enumerate(options):
        name, sep, value = token.partition("=")
        if name == flag:
            found = value if sep else (options[i + 1] if i + 1 < len(options) else None)
    return found


def node_settings(options: Sequence[str], environ: Mapping[str, str]) -> int:
    """Check the torchrun options an in-place node accepts; returns --max_restarts."""
    nproc = _value(options, "--nproc_per_node") or _value(options, "--nproc-per-node") or environ.get(
        "PET_NPROC_PER_NODE", "1")
    if nproc != "1":
        raise NodeError(f"--nproc_per_node={nproc}: the in-place mode runs one worker per node (its replica "
                        f"group); use 1, or TORCHFLEET_RECOVERY=restart for several workers per node")
    text = _value(options, "--max_restarts") or _value(options, "--max-restarts") or environ.get(
        "PET_MAX_RESTARTS", str(DEFAULT_MAX_RESTARTS))
    try:
        restarts = int(text)
    except ValueError:
        restarts = -1
    if restarts < 0:
        raise NodeError(f"--max_restarts={text}: must be a whole number >= 0")
    return restarts


def worker_command(script_and_args: Sequence[str], options: Sequence[str] = ()) -> list[str]:
    """The worker, started as torchrun would start it: the script run by this Python, ``-m`` for
    ``--module``/``-m``, the program itself for ``--no-python`` (what `torchfleet submit` makes of
    ``python -m pkg.train`` and of any other program: torchfleet/jobs/flag_checks.py)."""
    flags = {option.partition("=")[0] for option in options}
    if flags & {"--no-python", "--no_python"}:
        return list(script_and_args)
    module = ["-m"] if flags & {"-m", "--module"} else []
    return [sys.executable, "-u", *module, *script_and_args]


def run_node(script_and_args: Sequence[str], max_restarts: int, options: Sequence[str] = ()) -> int:
    """Run the worker until it finishes, is stopped, or fails more than ``max_restarts`` times."""
    state: dict[str, object] = {"child": None, "signum": None}

    def forward(signum: int, frame: FrameType | None) -> None:
        state["signum"] = signum
        child = state["child"]
        if isinstance(child, subprocess.Popen) and child.poll() is None:
            child.send_signal(signum)

    previous = {signum: signal.signal(signum, forward) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        restarts = 0
        while True:
            child = subprocess.Popen(worker_command(script_and_args, options))
            state["child"] = child
            code = child.wait()
            signum = state["signum"]
            if signum is not None:  # stopped: the worker's own code (143 after its checkpoint)
                return code if code > 0 else 128 + int(signum)
            if code in FINAL_CODES or code == 128 + signal.SIGTERM:  # done, bad input, or its own notice
                return code
            if restarts >= max_restarts:
                print(f"[torchfleet] worker failed with exit code {code}; {max_restarts} restarts used up",
                      file=sys.stderr, flush=True)
                return 1
            restarts += 1
            print(f"[torchfleet] worker exited {code}; starting it again ({restarts}/{max_restarts})",
                  file=sys.stderr, flush=True)
            time.sleep(RESTART_PAUSE_S)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def main(options: Sequence[str], script_and_args: Sequence[str], environ: Mapping[str, str] = os.environ) -> int:
    try:
        max_restarts = node_settings(options, environ)
    except NodeError as exc:
        print(f"torchfleet launcher: {exc}", file=sys.stderr)
        return 2
    command = worker_command(script_and_args, options)
    print("[torchfleet] in-place node: " + " ".join(command), file=sys.stderr, flush=True)
    return run_node(script_and_args, max_restarts, options)
