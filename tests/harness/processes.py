"""Find the processes a test started, however deep, by a tag in their environment.

A test sets ``TAG_VARIABLE`` to a fresh tag in the environment of what it starts (the demo, etcd,
launchers, forkservers, workers all inherit it), then asks which processes still carry it:
``assert_none_left`` is how the demo tests check that nothing was left running.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

TAG_VARIABLE = "TORCHFLEET_TEST_TAG"


def new_tag() -> str:
    return uuid.uuid4().hex


def tagged_processes(tag: str) -> list[int]:
    """Process ids (other than this one) whose environment holds ``TAG_VARIABLE=tag``."""
    found = []
    needle = f"{TAG_VARIABLE}={tag}".encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if needle in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:  # it ended meanwhile, or is not ours to read
                continue
    return found


def assert_none_left(tag: str, timeout: float = 15) -> None:
    # Polled, not after a fixed sleep (review): on a loaded machine a killed process can take a
    # moment to go away; one that is still there at the deadline was left behind.
    deadline = time.monotonic() + timeout
    while (left := tagged_processes(tag)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, f"left running: {left}"
