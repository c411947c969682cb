"""What the gate lets all runs together cost etcd: bytes written per second, and bytes held.

etcd keeps every write in memory twice over, whatever the key: as a raft entry until a snapshot has
passed it by ``--experimental-snapshot-catchup-entries`` (k8s/base/etcd/statefulset.yaml), and in the
v2 store's event history, its last 1,000 events with their values (etcd-io/etcd server/v3@v3.5.35
etcdserver/api/v2store/store.go line 101 ``newWatchHub(1000)``, event_history.go ``addEvent``). Those
are counts, which the flags and the state's size limit bound; what a count cannot bound is the garbage
of writing large values fast: one run rewriting its 64 KiB state 200 times a second took etcd past
1 GiB resident with only 7,000 entries kept (bench/etcd_memory.py). And every run may hold its state
and its store for 2 h, and run ids are as many as jobs started, so the sum over runs needs a bound
of its own. Two bounds here, each refused etcd-style (server.py):

- ``Rate``: a token bucket of bytes per second with a burst, one per run and one for the whole gate
  (429, errorCode 209). A write costs its key and value, at least ``WRITE_FLOOR`` bytes (each is a raft
  entry, an fsync and an event, whatever its size). Reads are free: they keep nothing.
- ``Held``: the bytes of names and values all runs hold (state keys, store keys), as this gate sees
  them: the sweep's last read of the whole tree (sweep.py), then every key the gate let through since,
  at its new size (an update replaces the old value; a delete forgets the key). A write that would
  take the total past its limit is refused (507, errorCode 209); an update that does not grow its key
  is always let through, so a run already holding its bytes keeps its rendezvous. Another replica's
  writes are seen at the next sweep, so with R replicas etcd holds at most R x the limit (each
  replica's view stays under it, and all start from the same read); keys that expired are counted
  until then (never fewer bytes than etcd holds).

The budget is for all runs together, not per maker: etcd's memory is one pool, makers are as many as
the cluster has researchers, so only a total bounds etcd. The price: one researcher's runs can fill
it, and other runs' new keys are refused until theirs expire or are deleted (docs/threat-model.md).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

from elastic_trainer.etcd_gate.rules import STORE, WRITE_FLOOR  # the floor with the limits it bounds (rules.py)

# Buckets kept for runs before the full ones (idle runs) are dropped: a run id costs ~200 bytes here.
MAX_BUCKETS = 10_000


def write_cost(key: str, value: str) -> int:
    return max(WRITE_FLOOR, len(key.encode()) + len(value.encode()))


class Bucket:
    """``rate`` bytes a second, at most ``burst`` at once; starts full."""

    def __init__(self, rate: int, burst: int, clock: Callable[[], float]):
        self.rate, self.burst, self.clock = rate, burst, clock
        self.tokens, self.at = float(burst), clock()

    def level(self) -> float:
        now = self.clock()
        self.tokens, self.at = min(self.burst, self.tokens + (now - self.at) * self.rate), now
        return self.tokens


class Rate:
    """Per-run and whole-gate token buckets; ``take`` refuses (returns why) or spends from both."""

    def __init__(self, run_rate: int, run_burst: int, gate_rate: int, gate_burst: int, clock=time.monotonic):
        self.run_rate, self.run_burst, self.clock = run_rate, run_burst, clock
        self.gate = Bucket(gate_rate, gate_burst, clock)
        self.runs: dict[str, Bucket] = {}
        self.lock = threading.Lock()

    def take(self, run_id: str, cost: int) -> str | None:
        with self.lock:
            run = self.runs.get(run_id)
            if run is None:
                if len(self.runs) >= MAX_BUCKETS:
                    self.runs = {r: b for r, b in self.runs.items() if b.level() < b.burst}
                run = self.runs[run_id] = Bucket(self.run_rate, self.run_burst, self.clock)
            if run.level() < cost:
                return (
                    f"the run {run_id} writes more than {self.run_rate} bytes a second through the gate "
                    f"(bursts of {self.run_burst}); this write ({cost} bytes) is refused, try again later"
                )
            if self.gate.level() < cost:
                return (
                    f"all runs together write more than {self.gate.rate} bytes a second through this gate "
                    f"(bursts of {self.gate.burst}); this write ({cost} bytes) is refused, try again later"
                )
            run.tokens -= cost
            self.gate.tokens -= cost
            return None


class Held:
    """The bytes of keys and values all runs hold, as this gate last read and then changed them."""

    def __init__(self, limit: int):
        self.limit = limit
        self.keys: dict[str, int] = {}
        self.total = 0
        self.lock = threading.Lock()

    def refresh(self, nodes: Iterable[dict]) -> None:
        """Start again from what etcd holds: the leaves under ``nodes`` (as read, recursive or not)."""
        keys: dict[str, int] = {}
        walk = list(nodes)
        while walk:
            node = walk.pop()
            if node.get("dir"):
                walk += node.get("nodes") or []
                # A directory below a run's store directory (a '/' in a store key's name): its path, as admit.
                if "/" in node.get("key", "")[len(STORE) :].strip("/"):
                    keys[node["key"]] = len(node["key"].encode())
            elif "key" in node:
                keys[node["key"]] = len(node["key"].encode()) + len(node.get("value", "").encode())
        with self.lock:
            self.keys, self.total = keys, sum(keys.values())

    def admit(self, key: str, value: str, directories: Iterable[str] = ()) -> str | None:
        """Count the key at its new size and the ``directories`` etcd makes for it (server.store_ready: each
        kept with its whole path, past the key's TTL), or say why not (the total would pass the limit)."""
        size = len(key.encode()) + len(value.encode())
        with self.lock:
            made = {d: len(d.encode()) for d in directories if d not in self.keys}
            grows = size - self.keys.get(key, 0) + sum(made.values())
            if grows > 0 and self.total + grows > self.limit:
                return (
                    f"all runs together hold {self.total} bytes of keys and values in etcd; {grows} more would "
                    f"pass {self.limit}, the most this gate lets them hold: wait for other runs' keys to expire"
                )
            self.keys[key] = size
            self.keys.update(made)
            self.total += grows
            return None

    def restore(self, key: str, size: int | None, directories: Iterable[str] = ()) -> None:
        """Undo an ``admit`` etcd then refused (a failed compare-and-swap, prevExist, a missing key): ``key`` back to
        ``size`` (None: not counted), and the ``directories`` it had counted as new forgotten."""
        with self.lock:
            self.total += (size or 0) - self.keys.pop(key, 0)
            if size is not None:
                self.keys[key] = size
            for directory in directories:
                self.total -= self.keys.pop(directory, 0)

    def size(self, key: str) -> int | None:
        with self.lock:
            return self.keys.get(key)

    def forget(self, key: str) -> None:
        """A deleted key, or every key under a deleted directory."""
        prefix = key.rstrip("/") + "/"
        with self.lock:
            for name in [k for k in self.keys if k == key or k.startswith(prefix)]:
                self.total -= self.keys.pop(name)
