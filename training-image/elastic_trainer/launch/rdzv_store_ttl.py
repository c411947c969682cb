"""The etcd-v2 rendezvous with a store whose keys expire, as torch's own rendezvous state does.

torch's ``etcd-v2`` backend (torch/distributed/elastic/rendezvous/etcd_rendezvous_backend.py,
``create_backend``) keeps its rendezvous state under /torch/elastic/rendezvous with a TTL (2 hours,
renewed by every write), but hands the agents an ``EtcdStore(client, "/torch/elastic/store")``
whose ``set`` and ``add`` write without one (etcd_store.py). Every rendezvous round writes its keys
there (master address and port, rank assignment, the exit barrier), under a prefix with the run id
and the round, and nothing deletes them: 5 short jobs left 25 keys, and they pile up in etcd's
memory for good. (The legacy ``etcd`` backend keeps its store under the round's own directory,
which expires: etcd_rendezvous.py ``setup_kv_store``.)

Each run's store is also a directory of its own, ``/torch/elastic/store/<run id>``: torch's one
shared prefix made every agent read and watch every job's keys (``EtcdStore._try_wait_get`` reads
the whole prefix), and etcd-gate (elastic_trainer/etcd_gate) lets a pod reach its own run's paths
only, and write store keys only once that directory exists.

The directory itself has no TTL: it is created once (``dir=true&prevExist=false``), each key in it
expires on its own, and etcd-gate's sweep (etcd_gate/sweep.py) deletes a store directory once it is
empty and its run's rendezvous state is gone. A directory's TTL cannot be renewed on etcd 3.5, the
etcd the platform runs: v2store's ``Update`` writes the node unconditionally and ``node.Write``
refuses a directory (etcd-io/etcd v3.5.24 e72f3c2 server/etcdserver/api/v2store/store.go 537-538,
node.go 120-123; the same lines in v3.5.35), so ``PUT dir=true&ttl=..&prevExist=true`` fails with
"Not a file", as do ``refresh=true``, ``value=`` and leaving ``dir=true`` out; etcd 3.4 ignored the
error (v3.4.23 c8b7831 etcdserver/api/v2store/store.go 535). A directory with a fixed TTL, made
again when it expires, was rejected: it takes its keys with it, so a round that writes its master
address, role infos or exit barrier in the minutes before it expires (a round is read for up to
the join timeout, 600 s, the barrier for 300 s) loses them, the run's failure by chance.

``install()`` makes ``etcd-v2`` build the same handler with an :class:`ExpiringEtcdStore`. Call it
in the agent's process before torchrun's ``run`` (the launcher runs torchrun in process).
"""

from __future__ import annotations

import contextlib
import datetime
from typing import Any

from torch.distributed.elastic.rendezvous import RendezvousHandler, RendezvousParameters
from torch.distributed.elastic.rendezvous.etcd_store import EtcdStore, cas_delay

BACKEND = "etcd-v2"
# As long as torch keeps a rendezvous's own state after its last write (EtcdRendezvousBackend
# _DEFAULT_TTL): a round's keys are read within the round (the join timeout, 600 s by default) and
# the exit barrier's within its timeout (300 s), so two hours is far past any reader.
STORE_TTL_S = 7200
# Tries of a key's write whose directory is gone (etcd-gate's sweep deleted it while empty, between
# our making it and the write): each makes the directory again first.
DIRECTORY_TRIES = 3


class ExpiringEtcdStore(EtcdStore):
    """torch's EtcdStore, each key written with a TTL (python-etcd's ``ttl``, etcd v2's ``ttl=``),
    inside the prefix made as a directory first."""

    def __init__(
        self,
        etcd_client: Any,
        etcd_store_prefix: str,
        ttl_s: int = STORE_TTL_S,
        timeout: datetime.timedelta | None = None,
    ):
        if ttl_s < 1:
            raise ValueError(f"ttl_s must be a whole number of seconds >= 1, got {ttl_s!r}")
        super().__init__(etcd_client, etcd_store_prefix, timeout)
        self.ttl_s = ttl_s
        self._directory_made = False

    def make_directory(self) -> None:
        """The prefix as a directory without a TTL, unless it exists (v2: dir=true&prevExist=false)."""
        import etcd

        with contextlib.suppress(etcd.EtcdAlreadyExist):
            self.client.write(self.prefix.rstrip("/"), None, dir=True, prevExist=False)
        self._directory_made = True

    def _in_directory(self, write):
        """``write()``, after making the directory once; made again if the write finds it gone.

        Through etcd-gate a key whose directory is missing is refused as etcd's "Key not found"
        (etcd_gate/server.py ``store_ready``); on etcd itself the write makes the parents.
        """
        import etcd

        for attempt in range(DIRECTORY_TRIES):
            if not self._directory_made or attempt:
                self.make_directory()
            try:
                return write()
            except etcd.EtcdKeyNotFound:
                if attempt == DIRECTORY_TRIES - 1:
                    raise

    def set(self, key, value) -> None:
        path, encoded = self.prefix + self._encode(key), self._encode(value)
        self._in_directory(lambda: self.client.set(key=path, value=encoded, ttl=self.ttl_s))

    def add(self, key, num: int) -> int:
        """EtcdStore.add (create at ``num``, else compare-and-swap), each write with the TTL."""
        import etcd

        path = self.prefix + self._encode(key)
        try:
            node = self._in_directory(
                lambda: self.client.write(key=path, value=self._encode(str(num)), prevExist=False, ttl=self.ttl_s)
            )
            return int(self._decode(node.value))
        except etcd.EtcdAlreadyExist:
            pass
        while True:
            node = self.client.get(key=path)
            value = self._encode(str(int(self._decode(node.value)) + num))
            try:
                node = self.client.test_and_set(key=node.key, value=value, prev_value=node.value, ttl=self.ttl_s)
                return int(self._decode(node.value))
            except etcd.EtcdCompareFailed:
                cas_delay()


def create_handler(params: RendezvousParameters) -> RendezvousHandler:
    """What torch's registry builds for ``etcd-v2`` (registry.py ``_create_etcd_v2_handler``), with
    the store's keys expiring, under a directory of the run's own: same client (endpoint, protocol,
    certificates) and timeout, prefix ``/torch/elastic/store/<run id>``."""
    from torch.distributed.elastic.rendezvous.dynamic_rendezvous import create_handler as dynamic_handler
    from torch.distributed.elastic.rendezvous.etcd_rendezvous_backend import create_backend

    backend, store = create_backend(params)
    expiring = ExpiringEtcdStore(store.client, store.prefix + params.run_id, STORE_TTL_S, store.timeout)
    return dynamic_handler(expiring, backend, params)


def install() -> None:
    """Make torchrun's ``etcd-v2`` backend use :func:`create_handler`. Idempotent.

    The registry refuses to register a second creator for a name (api.py
    ``RendezvousHandlerRegistry.register``), so the entry is replaced in its table.
    """
    from torch.distributed.elastic.rendezvous import rendezvous_handler_registry as registry

    if BACKEND not in registry._registry:
        raise RuntimeError(f"torch registers no {BACKEND!r} rendezvous backend to replace")
    registry._registry[BACKEND] = create_handler
