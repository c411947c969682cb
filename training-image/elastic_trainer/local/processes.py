"""Local process trees: a free port, a launcher's workers and descendants from /proc, killing a whole tree.

What the local runs (localrun.py, inplacerun.py), the benches (bench/kills.py) and ``torchfleet run
--local`` (torchfleet/local_schedule.py) need to find and end the processes a node started: a node
is a launcher in its own session, its workers forked from a forkserver. Linux only (/proc); no torch.
"""

from __future__ import annotations

import os
import signal
import socket
from contextlib import suppress
from pathlib import Path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _children_by_parent() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # the command name is in parentheses and may contain spaces: parse after the last ')'
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    return children


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def worker_pids(launcher_pid: int) -> list[int]:
    """The training processes torchrun started under a launcher (not its helpers, not loader workers).

    Forked from the forkserver (the launcher's default), they are the forkserver's children;
    otherwise the launcher's own children other than multiprocessing's helpers.
    """
    children = _children_by_parent()
    direct = children.get(launcher_pid, [])
    servers = [pid for pid in direct if "multiprocessing.forkserver" in _cmdline(pid)]
    if servers:
        return [pid for server in servers for pid in children.get(server, [])]
    return [pid for pid in direct if "from multiprocessing" not in _cmdline(pid)]


def descendants(pid: int) -> list[int]:
    """All live descendants of ``pid`` (from /proc; Linux only)."""
    children = _children_by_parent()
    found: list[int] = []
    stack = [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def kill_tree(pid: int, sig: int = signal.SIGKILL) -> None:
    """Signal ``pid`` and every descendant, as losing the machine would.

    torchrun starts its workers in their own sessions, so a process-group kill is not enough.
    The tree is collected first and then signalled, so reparented orphans are not missed.
    """
    for _ in range(3):
        targets = [pid, *descendants(pid)]
        for target in targets:
            with suppress(ProcessLookupError, PermissionError):
                os.kill(target, sig)
        if sig != signal.SIGKILL or not descendants(pid):
            return
