"""What both recovery modes' loops share: the keys a resume needs, and the hooks tests and the demo set.

The restart mode's loop (trainer.py) and the in-place one (inplace/group.py) read them alike; here,
so that neither loop imports the other.
"""

from __future__ import annotations

import faulthandler
import os
import signal

# What a resume reads from a checkpoint's state: one without them is skipped like a corrupt one.
REQUIRED_KEYS = ("model", "optimizer", "sampler", "rng", "step")
# Fault injection for the kill-while-writing test: "<step>:<seconds>" stalls rank 0 after the
# checkpoint of <step> is written and before it is committed.
FAULT_STALL_COMMIT = "TORCHFLEET_FAULT_STALL_COMMIT"
# For tests and the demo: "<step>:<world>" makes a group of fewer than <world> ranks wait before
# <step> until it is stopped (its agent restarts the workers when a node joins), so a slow
# machine cannot finish the job before a replacement has joined; a group that size or larger
# never waits. In place (inplace/group.py), a quorum of fewer than <world> groups drops that step until
# one has them (issue 23: the in-place demo's survivor finished before its replacement joined).
HOLD_FOR_WORLD = "TORCHFLEET_HOLD_FOR_WORLD"


def hold_for_world() -> tuple[int, int] | None:
    step, _, world = os.environ.get(HOLD_FOR_WORLD, "").partition(":")
    return (int(step), int(world)) if world else None


def stall_commit_at() -> tuple[int, float] | None:
    spec = os.environ.get(FAULT_STALL_COMMIT)
    if not spec:
        return None
    step, _, seconds = spec.partition(":")
    return int(step), float(seconds)


# For the local runs' tests (local/localrun.py sets it): "1" makes SIGUSR1 print every thread's stack on
# stderr, in the launcher (torchrun's agent runs in it), its forkserver and the workers forked from it, so
# a test that times out shows where each process was (CI: a run's two nodes silent for 240 s at its start).
STACKS_ON_SIGUSR1 = "TORCHFLEET_STACKS_ON_SIGUSR1"


def stacks_on_sigusr1() -> None:
    if os.environ.get(STACKS_ON_SIGUSR1) == "1":
        faulthandler.register(signal.SIGUSR1, all_threads=True)
