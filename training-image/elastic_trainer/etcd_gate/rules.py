"""What one training pod may ask of etcd's v2 keys API: its own run's rendezvous, within bounds.

etcd's v2 store has no size limit of its own (the backend quota, --quota-backend-bytes, covers only
the v3 keyspace: etcd-io/etcd server/etcdserver/api/v2store keeps every node in memory), and with no
auth any client may write any key or ``DELETE /v2/keys/torch?recursive=true``, every job's
rendezvous at once. torch's ``etcd-v2`` rendezvous uses two places (torch 2.13,
torch/distributed/elastic/rendezvous/etcd_rendezvous_backend.py ``create_backend``):

- ``/torch/elastic/rendezvous/<run id>``: one key, the pickled state, written with a TTL (2 h);
- the store, ``EtcdStore`` (etcd_store.py), keys ``<prefix>/<base64 of the key>`` (base64 may hold
  ``/``, so sub-directories appear), read back by reading and watching the whole prefix. Torchfleet's
  launcher gives each run its own prefix, ``/torch/elastic/store/<run id>``, a directory it creates
  once, without a TTL (etcd 3.5 cannot renew a directory's: launch/rdzv_store_ttl.py).

So a pod whose run id is R may: read, watch and delete under those two paths; write the state key
and store keys only with a TTL of at most ``max_ttl_s`` (nothing it writes outlives it by more);
write the state of at most ``max_value_bytes`` and store values of at most ``max_store_value_bytes``;
create the store directory only as a new directory without a TTL (``dir=true&prevExist=false``: a
TTL would take the keys before their own), and store keys only inside it, at most ``max_store_keys``
of them holding at most ``max_store_bytes`` of names and values. The directories are the gate's to
remove: its sweep (sweep.py) deletes the empty ones, and a run's own once its state is gone. What one
run can hold is then bounded: its state and ``max_store_bytes`` of store, gone max_ttl_s after its
last write, and its empty directories, gone one sweep after its state. Anything else (another
run's keys, the parents, POST's in-order keys, v3, the members API) is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qs, quote, urlencode

KEYS = "/v2/keys"
RDZV = "/torch/elastic/rendezvous/"
STORE = "/torch/elastic/store/"
# torchfleet/jobs/spec.py new_rdzv_id: <job name (a DNS label)>-<8 hex digits>; the launcher's own
# default (--rdzv_id of a local run) is any such word too.
RUN_ID = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
# Levels a store key may have below its run's directory. etcd's v2 store makes a directory node for every
# '/' in a key, each holding its whole path (etcd-io/etcd server/v3@v3.5.35 etcdserver/api/v2store/store.go
# internalCreate -> walk -> checkDir, newDir(path.Join(parent.Path, dirName))), and those directories stay when
# the key expires. One PUT of '<run>/0/a/a/.../a' (1,950 levels, a 3.9 KB request line, under the 4,096 bytes
# etcd's listener reads of it: soheilhy/cmux matchers.go maxHTTPRead) was let through as a 3.9 KB key: etcd
# made 1,950 directories of 2 KB paths on average (3.8 MB), and its JSON (two nestings a level) passed
# Python's recursion limit in every later read of the tree, the gate's own: the run's store read, the sweep
# (whose thread then died) and the count at the gate's start (which then failed to start at all: every
# run's rendezvous refused). torch's keys are base64 (EtcdStore._encode) of ASCII names, in which a '/' (63)
# comes only from a '?' or DEL byte: one level, rarely two.
MAX_STORE_KEY_LEVELS = 16

# Every write is a raft entry, an fsync and an event, and every --snapshot-count writes etcd snapshots
# its whole v2 store (bench/etcd_memory.py): a write's cost has a floor, so the bytes a second bound the
# writes a second too (budget.py; 2 MiB/s a run: 256 writes/s, past a 64-node job's 70-140).
WRITE_FLOOR = 8 * 1024


@dataclass(frozen=True)
class Limits:
    # The rendezvous state (base64 of a pickle) measured on etcd 3.4 with torch 2.13: 496 bytes for
    # 1 node, 576 for 2, 732 for 4, 1,040 for 8, so about 420 + 78 per node. etcd keeps the last 1,000
    # values written in its v2 event history, each with the value it replaced, and writes that history
    # into every snapshot, whose JSON it holds several times over while it makes one (bench/etcd_memory.py:
    # at 64 KiB, 2,000 x 64 KiB = 128 MiB of JSON a snapshot, and a member past 1 GiB). So the limit is the
    # largest job's (torchfleet/jobs/flag_checks.py MAX_NODES, 64 nodes): with as many replacements waiting
    # and IPv6 addresses, 15,960 bytes of torch's own state (tests/training_image/test_etcd_gate.py).
    # The store's own values are tens to hundreds of bytes (addresses, ranks, role infos).
    max_value_bytes: int = 16 * 1024
    # A round writes its master address and port (2 keys, measured) and the agents' role infos and
    # exit barrier (about 2 per node, torch/distributed/elastic/agent/server/api.py), each living 2 h:
    # 64 nodes re-forming every 3 minutes for 2 h stay under this.
    max_store_keys: int = 20_000
    max_ttl_s: int = 7200  # rdzv_store_ttl.STORE_TTL_S and torch's own _DEFAULT_TTL
    # A store value: torch's EtcdStore writes base64 of the bytes it is given (etcd_store.py set), here
    # a master address and port, role infos (json, api.py _RoleInstanceInfo.serialize) and barrier
    # counts, tens to hundreds of bytes. 64 KiB store values let one run hold 1,500 of them at 828 MiB
    # of etcd's memory (bench/etcd_memory.py); 4 KiB keeps ten times the largest seen.
    max_store_value_bytes: int = 4 * 1024
    # What a run's store holds, key names and values together: the count above at ~200 bytes a key
    # (a ~70-byte name under the run's prefix and its value). The gate reads the run's directory before
    # every store write (server.py store_ready), so the sum costs no request of its own.
    max_store_bytes: int = 4 * 1024 * 1024
    # Bytes written per second (keys and values, at least WRITE_FLOOR, 8 KiB, a write), per run and
    # for all runs through one gate replica, each with a burst (budget.py says why counts alone do not bound
    # etcd). torch's heaviest measured use: a 64-node job forming or recovering writes 70-140 times a
    # second, 5-7 KB each (docs/benchmarks.md "Rendezvous at scale"), 1.1 MiB/s at 8 KiB a write; 20 such
    # jobs steady, ~1,000 writes/s in all, 3.9 MiB/s on each of the two replicas. About twice that.
    max_run_write_bytes_per_s: int = 2 * 1024 * 1024
    max_run_write_burst_bytes: int = 16 * 1024 * 1024
    max_gate_write_bytes_per_s: int = 8 * 1024 * 1024
    max_gate_write_burst_bytes: int = 32 * 1024 * 1024
    # The names and values all runs hold, as this replica sees them (budget.Held): etcd holds at most
    # replicas x this, and writes it into every snapshot. 20 jobs of 64 nodes hold about 5 MB (a 5.4 KB
    # state and ~26 KB of store a round, 10 rounds each within the keys' 2 h).
    max_held_bytes: int = 8 * 1024 * 1024

    def __post_init__(self) -> None:
        names = ("max_value_bytes", "max_store_keys", "max_ttl_s", "max_store_value_bytes", "max_store_bytes",
                 "max_run_write_bytes_per_s", "max_run_write_burst_bytes", "max_gate_write_bytes_per_s",
                 "max_gate_write_burst_bytes", "max_held_bytes")  # fmt: skip
        problems = [
            f"{name} must be a whole number >= 1, got {getattr(self, name)!r}"
            for name in names
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1
        ]
        # A state write at its limit, with its key, must fit in a burst, or the run could never write it.
        least = max(self.max_value_bytes + 1024, WRITE_FLOOR) if isinstance(self.max_value_bytes, int) else None
        for name in ("max_run_write_burst_bytes", "max_gate_write_burst_bytes"):
            value = getattr(self, name)
            if least is not None and isinstance(value, int) and 1 <= value < least:
                problems.append(f"{name} must be at least max_value_bytes + 1024, and {WRITE_FLOOR} ({least}), "
                                f"got {value}")  # fmt: skip
        if problems:
            raise ValueError("; ".join(problems))  # every problem at once


class Refused(Exception):
    """A request the gate does not forward; ``status`` and ``code`` as etcd's v2 errors carry them."""

    def __init__(self, status: int, code: int, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def forbidden(message: str) -> Refused:
    return Refused(403, 110, message)  # 110: etcd v2's EcodeUnauthorized ("The request requires user authentication")


def invalid(message: str) -> Refused:
    return Refused(400, 209, message)  # 209: EcodeInvalidField


@dataclass(frozen=True)
class Request:
    method: str
    key: str  # the key path after /v2/keys, e.g. /torch/elastic/rendezvous/job-1a2b3c4d
    form: dict[str, str]  # the query and a form body merged, as etcd's r.FormValue reads them

    @classmethod
    def parse(cls, method: str, path: str, query: str, body: bytes) -> Request:
        if not path.startswith(KEYS + "/") and path != KEYS:
            raise forbidden(f"only the v2 keys API is open here, not {path}")
        form: dict[str, str] = {}
        for source in (query, body.decode("utf-8", "replace") if body else ""):
            for name, values in parse_qs(source, keep_blank_values=True).items():
                form.setdefault(name, values[0])
        return cls(method.upper(), path[len(KEYS) :] or "/", form)

    def forwarded(self) -> tuple[str, bytes | None]:
        """What etcd is sent: the key and the form exactly as checked, encoded by the gate, never the client's bytes.

        etcd reads the key percent-decoded and cleaned (``path.Join(StoreKeysPrefix, r.URL.Path[...])``) and
        the form with a body's fields first, the body only when it is application/x-www-form-urlencoded (Go's
        ``Request.ParseForm``; etcd-io/etcd go.etcd.io/etcd/server/v3@v3.5.35 etcdserver/api/v2http/client.go
        parseKeyRequest, lines 351-365 and 445). Forwarded as sent, a ``ttl`` in a text/plain body passed the
        check here and was no TTL there (a key kept for good), and a form body's empty ``ttl=`` overrode the
        query's checked one.
        """
        form = urlencode(self.form)
        target = KEYS + quote(self.key)
        if self.method == "PUT":
            return target, form.encode()
        return target + ("?" + form if form else ""), None


def area(key: str, run_id: str) -> str | None:
    """Which of the run's places the key is in: 'state', 'store' (the directory), 'store-key', or None."""
    if key == RDZV + run_id:
        return "state"
    store = STORE + run_id
    if key in (store, store + "/"):
        return "store"
    if key.startswith(store + "/"):
        return "store-key"
    return None


def check(request: Request, run_id: str | None, limits: Limits) -> str:
    """The request's area, or Refused. The count of store keys is checked by the caller (it reads etcd)."""
    if run_id is None:
        raise forbidden("this address is no running training pod with a rendezvous id")
    if not RUN_ID.match(run_id):
        raise forbidden(f"the rendezvous id {run_id!r} is not a DNS label")
    where = area(request.key, run_id)
    # etcd decodes %XX in the path and then cleans it (forwarded()'s docstring): /store/<id>/%2e%2e/<other> or
    # /store/<id>/x%2F..%2F.. passed a check of the raw key and reached every other run's state and store (Go's
    # ServeMux, since Go 1.22, cleans only the escaped path, so it redirects neither). torch's keys never need
    # either: run ids are DNS labels, its store's keys base64 (torch/distributed/elastic/rendezvous/etcd_store.py
    # _encode) and python-etcd sends keys unquoted, so a key with a '%', '.' or '..' is refused.
    if where is None or "%" in request.key or any(part in (".", "..") for part in request.key.split("/")):
        raise forbidden(
            f"a pod of rendezvous {run_id} may use only {RDZV}{run_id} and {STORE}{run_id}/..., not {request.key}"
        )
    if request.method in ("GET", "HEAD", "DELETE"):
        return where
    if request.method != "PUT":
        raise forbidden(f"{request.method} is not open here (torch's etcd-v2 rendezvous uses GET, PUT, DELETE)")
    # etcd's refresh (refresh=true, a TTL, no value) renews a key and keeps its value (etcd-io/etcd
    # server/v3@v3.5.35 v2store store.go Set and Update with expireOpts.Refresh; v2http client.go
    # parseKeyRequest), while everything here reads the write as its form's value: the held count
    # (budget.Held) took a refresh for an empty value and forgot the bytes etcd kept, so runs that refreshed
    # what they wrote held any amount. torch never refreshes (its backend and EtcdStore write values).
    if "refresh" in request.form:
        raise invalid("refresh is not open here: write the value again with its ttl (torch's rendezvous does)")
    is_dir = request.form.get("dir", "false") == "true"
    ttl = request.form.get("ttl")
    if where == "store":
        # Created once, never updated: etcd 3.5 refuses any update of a directory (v2store Update,
        # node.Write: launch/rdzv_store_ttl.py), and a TTL would expire the keys with it.
        if not is_dir or request.form.get("prevExist") != "false" or ttl is not None:
            raise invalid(f"{STORE}{run_id} is a directory: create it with dir=true&prevExist=false, without a ttl")
        return where
    if ttl is None or not ttl.isdigit() or not 1 <= int(ttl) <= limits.max_ttl_s:
        raise invalid(f"every write needs a ttl of 1 to {limits.max_ttl_s} seconds, got {ttl!r}")
    if is_dir:
        raise invalid(f"only {STORE}{run_id} may be a directory")
    levels = len(request.key[len(STORE + run_id) + 1 :].strip("/").split("/"))
    if where == "store-key" and levels > MAX_STORE_KEY_LEVELS:
        raise invalid(
            f"a store key may have at most {MAX_STORE_KEY_LEVELS} levels below {STORE}{run_id}, got {levels} "
            "(etcd keeps a directory for each, past the key's TTL)"
        )
    size = len(request.form.get("value", "").encode())
    if size > limits.max_value_bytes:
        raise Refused(413, 209, f"a value may be at most {limits.max_value_bytes} bytes, got {size}")
    if where == "store-key" and size > limits.max_store_value_bytes:
        raise Refused(413, 209, f"a store value may be at most {limits.max_store_value_bytes} bytes, got {size}")
    return where
