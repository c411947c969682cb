"""Rendezvous-only nodes: torch's etcd-v2 dynamic rendezvous handler in small forked processes.

What every torchrun agent runs to form a group (``next_rendezvous``, the heartbeats, the
``num_nodes_waiting`` poll of its monitor loop), without the agent's workers and without
``import torch``: 64 nodes on one machine need 64 processes, and a process that imports torch
holds about 225 MB (27 MB here). Shared by ``bench/rendezvous.py`` and the tests of issue 15.

How it stays small: torch's own rendezvous modules are loaded from torch's installation (the
handler's state machine and the etcd-v2 backend are the real code), but the packages above
them (``torch``, ``torch.distributed``, ``torch.distributed.elastic``) are registered as empty
packages, so their ``__init__``, which loads the C++ library, never runs. Three names the
handler needs from ``torch.distributed`` are given pure-Python equivalents: ``Store`` (a base
class), ``PrefixStore`` (keys prefixed ``prefix/``, as c10d's) and ``TCPStore`` (refused: the
launcher sets ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1``, so the handler never creates one).

The host (``python -m elastic_trainer.local.rdzvnode``) imports that once, reads spawn requests (JSON
lines) on stdin and forks one node per request: pages are shared, a fork costs milliseconds.
Nodes write events (``events.PREFIX`` + JSON, one ``os.write`` each, atomic on a pipe) to the
host's stdout and are driven by signals sent to their pid: SIGUSR1 starts the first rendezvous,
later ones make the node re-enter it (what its agent does when its workers fail, e.g. because a
peer died); SIGUSR2 asks for its counters; SIGKILL is a lost machine.
"""

from __future__ import annotations

import datetime
import importlib.util
import json
import os
import select
import signal
import sys
import time
import types
from pathlib import Path
from typing import Any

from elastic_trainer.events import PREFIX


def _module(name: str, path: Path | None = None) -> types.ModuleType:
    module = types.ModuleType(name)
    if path is not None:
        module.__path__ = [str(path)]  # a package: its submodules load from torch's files
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, module)
    return module


class _Store:
    """``torch.distributed.Store``'s place: EtcdStore subclasses it and implements every method but
    the timeout, c10d's default of 300 s (c10d/Store.hpp, kDefaultTimeout)."""

    timeout = datetime.timedelta(seconds=300)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def set_timeout(self, timeout: datetime.timedelta) -> None:
        self.timeout = timeout


class _PrefixStore(_Store):
    """c10d's PrefixStore: every key becomes ``prefix/key`` in the wrapped store."""

    def __init__(self, prefix: str, store: Any) -> None:
        self._prefix, self._store = prefix, store

    def _key(self, key: str) -> str:
        return f"{self._prefix}/{key}"

    def set(self, key: str, value: Any) -> None:
        self._store.set(self._key(key), value)

    def get(self, key: str) -> bytes:
        return self._store.get(self._key(key))

    def add(self, key: str, num: int) -> int:
        return self._store.add(self._key(key), num)

    def wait(self, keys: list[str], *args: Any) -> None:
        self._store.wait([self._key(k) for k in keys], *args)


class _NoTCPStore(_Store):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("rendezvous nodes run with TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 (no TCPStore)")


def load_rendezvous() -> tuple[types.ModuleType, types.ModuleType, types.ModuleType]:
    """torch's (api, dynamic_rendezvous, etcd_rendezvous_backend) modules, without ``import torch``.

    Where torch is already imported (a test process), those are simply imported.
    """
    if "torch" not in sys.modules:
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.origin is None:
            raise ImportError("torch is not installed: its rendezvous modules are loaded from it")
        root = Path(spec.origin).parent
        _module("torch", root)
        dist = _module("torch.distributed", root / "distributed")
        dist.Store, dist.PrefixStore, dist.TCPStore = _Store, _PrefixStore, _NoTCPStore
        _module("torch.distributed.elastic", root / "distributed" / "elastic")
        _module("torch.distributed.elastic.utils", root / "distributed" / "elastic" / "utils")
        # api.py's one import from it: utils/distributed.py itself needs the C++ stores
        utils = _module("torch.distributed.elastic.utils.distributed")
        utils.get_free_port = _free_port
    from torch.distributed.elastic.rendezvous import api, dynamic_rendezvous, etcd_rendezvous_backend

    # The handler names the caller of every event it records with inspect.stack(), twice
    # (get_method_name), building every frame's source context: milliseconds of CPU per
    # operation. Each real node pays that on its own machine; 64 nodes sharing 2 cores here would
    # measure this machine's CPU instead of the rendezvous. Same name, from the frame itself:
    dynamic_rendezvous.get_method_name = _method_name
    return api, dynamic_rendezvous, etcd_rendezvous_backend


def _method_name(depth: int = 2) -> str:
    """torch's get_method_name(depth): the function ``depth`` frames up from this one."""
    try:
        return sys._getframe(depth).f_code.co_name
    except ValueError:
        return "no_method_name"


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def emit(kind: str, **data: Any) -> None:
    line = PREFIX + json.dumps({"ev": kind, "t": time.monotonic(), **data}) + "\n"
    os.write(1, line.encode())  # one write of < PIPE_BUF bytes: never interleaved with another node's


class _Counters:
    """Calls to the backend: every set_state is one compare-and-set write to etcd."""

    def __init__(self, backend: Any) -> None:
        self.sets = self.conflicts = self.gets = self.declared_dead = 0
        self.late_s = self.dead_age_s = 0.0
        set_state, get_state = backend.set_state, backend.get_state

        def counted_set(state: bytes, token: Any = None):
            result = set_state(state, token)
            self.sets += 1
            if result is not None and not result[2]:
                self.conflicts += 1  # another node wrote first: re-read, re-apply, write again
            return result

        def counted_get():
            self.gets += 1
            return get_state()

        backend.set_state, backend.get_state = counted_set, counted_get

    def watch_expiries(self, holder: Any, me: Any) -> None:
        """Count the nodes this one declares dead (torch's _sanitize: a heartbeat older than
        keep_alive_interval x keep_alive_max_attempt), and how late heartbeats were.

        With no node killed, each declaration is a live node dropped from the round: what issue 15
        was (contention), but also what CPU starvation does (a keep-alive, or the declarer between
        its read and _sanitize, scheduled late), so these are figures (bench/rendezvous.py), not a
        pass/fail. _sanitize runs after every sync that read or wrote etcd (never on a cached
        state), so ``late_s`` is the oldest this node's own heartbeat was in the rendezvous state it
        read, and ``dead_age_s`` the oldest heartbeat of a node it declared dead.
        """
        sanitize = getattr(holder, "_sanitize", None)
        if sanitize is None:  # another torch: not counted
            self.declared_dead = -1
            return

        def counted() -> None:
            now = datetime.datetime.now(datetime.UTC)
            stamps = dict(holder.state.last_heartbeats)
            sanitize()
            dead = getattr(holder, "_dead_nodes", ())
            self.declared_dead += len(dead)
            if me in stamps:
                self.late_s = max(self.late_s, (now - stamps[me]).total_seconds())
            for node in dead:
                self.dead_age_s = max(self.dead_age_s, (now - stamps[node]).total_seconds())

        holder._sanitize = counted

    def as_dict(self) -> dict[str, float]:
        return {"sets": self.sets, "conflicts": self.conflicts, "gets": self.gets,
                "declared_dead": self.declared_dead, "late_s": round(self.late_s, 3),
                "dead_age_s": round(self.dead_age_s, 3)}


def run_node(request: dict[str, Any]) -> None:
    """One node, in a forked child: create the handler, then rendezvous when told, like an agent."""
    name = request["name"]
    host = os.getppid()
    # Signal handlers only count; select() on the wakeup pipe returns as soon as one arrives
    # (no lock is taken inside a handler).
    received = {signal.SIGUSR1: 0, signal.SIGUSR2: 0}
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    for signum in received:
        signal.signal(signum, lambda signum, _frame: received.__setitem__(signum, received[signum] + 1))
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    api, dynamic, etcd_backend = load_rendezvous()
    params = api.RendezvousParameters(
        backend="etcd-v2", endpoint=request["endpoint"], run_id=request["run_id"],
        min_nodes=request["min_nodes"], max_nodes=request["max_nodes"], local_addr="127.0.0.1",
        **request.get("conf", {}),
    )
    # what torch's registry does for --rdzv_backend=etcd-v2 (_create_etcd_v2_handler)
    backend, store = etcd_backend.create_backend(params)
    counters = _Counters(backend)
    handler = dynamic.create_handler(store, backend, params)
    counters.watch_expiries(handler._state_holder, handler._this_node)
    interval = float(request.get("monitor_interval", 0.1))  # torchrun's --monitor-interval default
    emit("ready", node=name, pid=os.getpid())

    kicks_taken = 0
    stats_sent = 0

    def wait_for_kick(timeout: float) -> bool:
        """True when a SIGUSR1 arrived since the last kick taken (waits at most ``timeout``)."""
        nonlocal kicks_taken, stats_sent
        deadline = time.monotonic() + timeout
        while True:
            if received[signal.SIGUSR2] > stats_sent:
                stats_sent = received[signal.SIGUSR2]
                emit("stats", node=name, **counters.as_dict())
            if received[signal.SIGUSR1] > kicks_taken:
                kicks_taken = received[signal.SIGUSR1]
                return True
            if os.getppid() != host:
                os._exit(0)  # the host is gone: so is the bench
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if select.select([wake_r], [], [], left)[0]:
                os.read(wake_r, 512)

    while not wait_for_kick(0.2):
        pass
    while True:
        try:
            info = handler.next_rendezvous()
        except Exception as exc:  # a failed rendezvous is a measured outcome, not a crash
            emit("error", node=name, error=f"{type(exc).__name__}: {exc}"[:2000], **counters.as_dict())
            os._exit(1)
        state = handler._state_holder.state  # the round this node joined
        emit("formed", node=name, round=state.round, rank=info.rank, world=info.world_size, **counters.as_dict())
        # the agent's monitor loop: healthy workers, so only a waiting node triggers a restart
        while True:
            if wait_for_kick(interval):
                emit("restart", node=name, reason="told")
                break
            if handler.num_nodes_waiting() > 0:
                emit("restart", node=name, reason="waiting")
                break


def serve() -> int:
    """The host: load torch's rendezvous code once, then fork a node per stdin request."""
    load_rendezvous()
    import etcd  # noqa: F401  (python-etcd, imported by create_backend: paid once here too)

    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # nodes are reaped by the kernel
    emit("host", pid=os.getpid())
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        if os.fork() == 0:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            try:
                run_node(request)
            finally:
                os._exit(0)
    return 0


if __name__ == "__main__":
    sys.exit(serve())
