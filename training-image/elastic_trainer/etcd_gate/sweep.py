"""The gate's sweep: store directories that are empty, and a run's own once its rendezvous state is gone.

A run's store directory, ``/torch/elastic/store/<run id>``, has no TTL (etcd 3.5 cannot renew a
directory's: launch/rdzv_store_ttl.py), and etcd makes a directory without one for each ``/`` in a
key's base64 name; the keys in them expire (the gate lets none be written without a TTL), the
directories would stay for good. Every ``interval_s`` the sweep:

1. lists the runs whose state, ``/torch/elastic/rendezvous/<run id>``, exists: torch's etcd-v2
   backend writes it with a 2-hour TTL at every join and keep-alive heartbeat (torch 2.13,
   etcd_rendezvous_backend.py ``_DEFAULT_TTL``; dynamic_rendezvous.py ``_keep_alive``), so a run
   with an agent alive has one;
2. reads the whole store, then deletes, deepest first, each directory it read empty, and a run's
   own directory only when that run had no state in (1).

Each delete is etcd's own "delete this directory if it is empty" (``dir=true`` without
``recursive``: v2store node.go ``Remove`` refuses a directory with children, etcd-io/etcd v3.5.24
e72f3c2 server/etcdserver/api/v2store/node.go; v3.4.23 etcdserver/api/v2store/node.go), so a key
written after the read is never lost: its directory is not deleted, or the write made it again. A
run that starts between (1) and the delete may find its directory gone at its next write; the gate
then answers "Key not found" and the launcher makes it again (server.py ``store_ready``). Both
replicas sweep: a directory the other deleted first is a 404, passed over. The same two reads are what
the gate's count of the bytes all runs hold starts again from (budget.Held.refresh).
"""

from __future__ import annotations

import sys
import threading
from urllib.parse import quote

from elastic_trainer.etcd_gate.rules import KEYS, RDZV, STORE

# An empty directory is a node of a few hundred bytes in etcd's memory: minutes are soon enough, and
# one sweep costs two reads (the state keys, the store tree) and a delete per empty directory.
INTERVAL_S = 300


def states(upstream) -> dict:
    """The rendezvous directory as read (its children are the runs' state keys, values included)."""
    status, answer = upstream.get_json(RDZV.rstrip("/"))
    if status == 404:
        return {}
    if status != 200:
        raise ConnectionError(f"etcd answered {status} to reading {RDZV}: {answer.get('message')}")
    return answer["node"]


def store(upstream) -> dict:
    """The whole store as read (recursive), or {} where there is none."""
    status, answer = upstream.get_json(STORE.rstrip("/"), "?recursive=true")
    if status == 404:
        return {}
    if status != 200:
        raise ConnectionError(f"etcd answered {status} to reading {STORE}: {answer.get('message')}")
    return answer["node"]


def count_held(upstream, held) -> None:
    """``held`` from what etcd holds now, without sweeping: the gate's start (__main__)."""
    held.refresh([states(upstream), store(upstream)])


def sweep_once(upstream, held=None) -> list[str]:
    """One sweep; the directories it deleted. ``held`` (budget.Held) is refreshed from the two reads."""
    rendezvous = states(upstream)  # before the store: a run that writes state after this is read empty at worst
    live = {child["key"].rsplit("/", 1)[-1] for child in rendezvous.get("nodes") or []}
    tree = store(upstream)
    if held is not None:
        held.refresh([rendezvous, tree])
    deleted: list[str] = []
    for run in tree.get("nodes") or []:
        emptied = run.get("dir") and _empty_below(upstream, run, deleted)
        if emptied and run["key"].rsplit("/", 1)[-1] not in live:
            _delete_if_empty(upstream, run["key"], deleted)
    return deleted


def _empty_below(upstream, directory: dict, deleted: list[str]) -> bool:
    """Delete the empty directories under ``directory``, deepest first; whether it is now empty."""
    empty = True
    for child in directory.get("nodes") or []:
        gone = (
            child.get("dir")
            and _empty_below(upstream, child, deleted)
            and _delete_if_empty(upstream, child["key"], deleted)
        )
        empty = empty and bool(gone)
    return empty


def _delete_if_empty(upstream, key: str, deleted: list[str]) -> bool:
    status, _, _ = upstream.request("DELETE", KEYS + quote(key) + "?dir=true", None, {})
    if status == 200:
        deleted.append(key)
    return status in (200, 404)  # 404: gone already (the other replica, or a recursive delete by its run)


class Sweeper:
    """``sweep_once`` every ``interval_s`` seconds on a daemon thread, until ``stop()``."""

    def __init__(self, upstream, interval_s: float = INTERVAL_S, held=None):
        if interval_s <= 0:
            raise ValueError(f"interval_s must be > 0 seconds, got {interval_s!r}")
        self.upstream, self.interval_s, self.held = upstream, interval_s, held
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="etcd-gate-sweep", daemon=True)

    def start(self) -> Sweeper:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stopped.wait(self.interval_s):
            try:
                sweep_once(self.upstream, self.held)
            # RecursionError: a tree deeper than json.loads reads (rules.MAX_STORE_KEY_LEVELS keeps the gate from
            # writing one; etcd may hold one from before): this thread must live on for the next sweep.
            except (ConnectionError, ValueError, KeyError, RecursionError) as error:  # etcd away or an odd answer
                print(f"etcd-gate: the store sweep failed: {error}", file=sys.stderr, flush=True)
