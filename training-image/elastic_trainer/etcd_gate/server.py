"""The gate's HTTP server: v2 keys requests from training pods, checked (rules.py), forwarded to etcd.

Who asks is the connection's source address, resolved to a rendezvous id by a resolver
(resolvers.py): in a cluster, the training pod that holds that IP and the rendezvous id the CLI
wrote on it, which its code cannot change (training pods have no API token). The answer is etcd's
own, headers included (python-etcd reads X-Etcd-Index); ``/v2/machines`` answers the gate's own URL,
so python-etcd's reconnect list (etcd.Client allow_reconnect, which torch sets) never names an etcd
member to go to directly.

One thread per connection (a watch holds its request until an event or its timeout, as torch's
EtcdStore waits for keys). Store keys and their bytes are counted before a write (one read of the run's
directory): writers of one run racing each other can pass the count by at most their number, and the
bytes by that many values. Every write (PUT, DELETE) then spends from its run's and the gate's bytes per
second, and a value counts against the bytes all runs hold (budget.py); refused writes never reach etcd.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import select
import socket
import sys
import threading
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import quote, urlsplit

from elastic_trainer.etcd_gate.budget import Held, Rate, write_cost
from elastic_trainer.etcd_gate.rules import KEYS, STORE, Limits, Refused, Request, check, invalid

Resolver = Callable[[str], "str | None"]
# Request bodies larger than a value at its limit, URL-encoded (3 bytes a byte at worst), plus the form's
# other fields are not read at all.
FORM_OVERHEAD = 4096
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "content-length"}
# Connections one address (a pod) may hold to a replica at once. Each is a thread here and, while a request is in
# flight (a watch is held until an event), a connection and a watcher in etcd: 2,000 watches held by one pod took
# this gate from 23 to 103 MB resident and etcd from 29 to 96 MB (2026-11-29, etcd 3.5; the gate's limit is 512 MiB).
# torch's client, python-etcd 0.4.5, keeps at most 10 per host (etcd/client.py per_host_pool_size, urllib3's
# maxsize), and an agent has one request in flight per thread (its rendezvous and its keep-alive): 64 is six pools.
MAX_CONNECTIONS_PER_ADDRESS = 64
# A connection over that count is answered once, refused, within this many seconds, then closed.
REFUSED_TIMEOUT_S = 5
# The request line and body are the gate's own encoding of what it checked (rules.Request.forwarded), so the
# client's description of its body goes too.
FORWARDED_NOT = HOP_BY_HOP | {"content-type"}


class Upstream:
    """etcd's client URLs (``host:port``), tried in order; the first that answers serves the request."""

    def __init__(self, endpoints: Sequence[str]):
        if not endpoints:
            raise ValueError("the gate needs at least one etcd endpoint (host:port)")
        self.endpoints = list(endpoints)

    def request(self, method: str, target: str, body: bytes | None, headers: dict[str, str], client=None):
        """etcd's answer; with ``client`` (the caller's socket, for a watch) the request is cut off if it goes away."""
        last: Exception | None = None
        for endpoint in self.endpoints:
            host, _, port = endpoint.rpartition(":")
            # No timeout: a watch (wait=true) is held by etcd until an event; the client sets its own.
            connection = http.client.HTTPConnection(host, int(port), timeout=None)
            try:
                try:
                    connection.connect()
                except OSError as error:  # only a refused connection moves on: a sent write may have been applied
                    last = error
                    continue
                done = threading.Event()
                try:
                    connection.request(method, target, body=body, headers=headers)
                    if client is not None:
                        threading.Thread(target=_cut_off_if_gone, args=(client, connection, done), daemon=True).start()
                    response = connection.getresponse()
                    return response.status, response.getheaders(), response.read()
                except (OSError, http.client.HTTPException) as error:
                    raise ConnectionError(f"etcd at {endpoint} broke off the request: {error!r}") from error
                finally:
                    done.set()
            finally:
                connection.close()
        raise ConnectionError(f"no etcd endpoint answered ({', '.join(self.endpoints)}): {last}")

    def get_json(self, key: str, query: str = "") -> tuple[int, dict]:
        status, _, body = self.request("GET", KEYS + quote(key) + query, None, {})
        return status, json.loads(body or b"{}")


def count_leaves(node: dict) -> int:
    children = node.get("nodes") or []
    return sum(count_leaves(child) if child.get("dir") else 1 for child in children)


def _cut_off_if_gone(client: socket.socket, connection: http.client.HTTPConnection, done: threading.Event) -> None:
    """End a watch whose client has gone: etcd holds a watch until an event, and python-etcd closes its connection
    when its own timeout passes (torch's EtcdStore waits so), so a gone client's watch held a thread here and a
    connection and a watcher in etcd until the next event on its key: 1,000 watches opened and closed in a loop by
    one pod left 1,000 threads here (+39 MB) and +33 MB in etcd (2026-11-29, etcd 3.5), with no socket open."""
    while not done.is_set():
        if not select.select([client], [], [], 1.0)[0]:
            continue
        try:
            gone = client.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            gone = True
        if gone:
            with contextlib.suppress(AttributeError, OSError):  # already closed
                connection.sock.shutdown(socket.SHUT_RDWR)  # the handler's read of etcd's answer ends at once
            return
        done.wait(1.0)  # the client sent more (no HTTP/1.1 client does while it waits): look again later


class Gate(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], upstream: Upstream, resolver: Resolver, limits: Limits):
        super().__init__(address, Handler)
        self.upstream, self.resolver, self.limits = upstream, resolver, limits
        self.rate = Rate(
            limits.max_run_write_bytes_per_s,
            limits.max_run_write_burst_bytes,
            limits.max_gate_write_bytes_per_s,
            limits.max_gate_write_burst_bytes,
        )
        self.held = Held(limits.max_held_bytes)
        self.connections: dict[str, int] = {}
        self.connections_lock = threading.Lock()

    def enter(self, address: str) -> bool:
        """One more connection from ``address``, unless it holds MAX_CONNECTIONS_PER_ADDRESS already."""
        with self.connections_lock:
            held = self.connections.get(address, 0)
            if held >= MAX_CONNECTIONS_PER_ADDRESS:
                return False
            self.connections[address] = held + 1
            return True

    def leave(self, address: str) -> None:
        with self.connections_lock:
            held = self.connections.pop(address, 1) - 1
            if held > 0:
                self.connections[address] = held

    def spend(self, run_id: str, request: Request) -> None:
        """A write within its run's and the gate's bytes per second (budget.Rate), checked first: a
        refused one costs etcd nothing, not even the store's read."""
        why = self.rate.take(run_id, write_cost(request.key, request.form.get("value", "")))
        if why is not None:
            raise Refused(429, 209, why)

    def hold(self, request: Request, directories: list[str]) -> Callable[[], None]:
        """A value within the bytes all runs hold (budget.Held), counted once every other check passed, with
        the directories etcd makes for it (store_ready); what undoes the count if etcd refuses the write."""
        before = self.held.size(request.key)
        new = [directory for directory in directories if self.held.size(directory) is None]
        why = self.held.admit(request.key, request.form.get("value", ""), directories)
        if why is not None:
            raise Refused(507, 209, why)
        return lambda: self.held.restore(request.key, before, new)

    def store_ready(self, run_id: str, request: Request) -> list[str]:
        """A store key goes only into the run's directory (it must exist: made with dir=true) and within the count;
        the directories etcd will make for it (a '/' in its name below the run's directory: rules.MAX_STORE_KEY_LEVELS).

        A missing directory is refused as etcd's own "Key not found" (404, 100): the launcher's store
        then makes it and writes again (launch/rdzv_store_ttl.py), as it must when the sweep deleted
        it, empty, between the two (sweep.py). So the directory is always one the run made, never
        one etcd would make for the key.
        """
        status, answer = self.upstream.get_json(STORE + run_id, "?recursive=true")
        node = answer.get("node") or {}
        if status == 404 or (status == 200 and not node.get("dir")):
            raise Refused(404, 100, f"create {STORE}{run_id} first, as a directory (dir=true&prevExist=false)")
        if status != 200:
            raise Refused(status, answer.get("errorCode", 300), answer.get("message", "etcd refused the read"))
        old = _find(node, request.key)
        if count_leaves(node) >= self.limits.max_store_keys and old is None:
            raise Refused(
                507, 209, f"the store of {run_id} holds {self.limits.max_store_keys} keys, the most a run may hold"
            )
        # Bytes as well as keys: the count alone let 20,000 values of 64 KiB live in etcd's memory per run.
        # An update replaces its key's old value; what it adds is the new key name and value.
        # The directories count by their paths too: etcd keeps each with its whole path, past the key's TTL.
        held = stored_bytes(node) - (stored_bytes(old) if old is not None else 0)
        directories = new_directories(node, request.key)
        adding = len(request.key.encode()) + len(request.form.get("value", "").encode())
        adding += sum(len(directory.encode()) for directory in directories)
        if held + adding > self.limits.max_store_bytes:
            raise Refused(
                507,
                209,
                f"the store of {run_id} holds {held} bytes of keys and values; {adding} more would pass "
                f"{self.limits.max_store_bytes}, the most a run may hold",
            )
        return directories


def stored_bytes(node: dict) -> int:
    """The names and values of the keys under ``node`` (itself, if a key), and the paths of the directories
    below it, as etcd's v2 store keeps them."""
    if not node.get("dir"):
        return len(node.get("key", "").encode()) + len(node.get("value", "").encode())
    children = node.get("nodes") or []
    return sum(stored_bytes(c) + (len(c.get("key", "").encode()) if c.get("dir") else 0) for c in children)


def new_directories(node: dict, key: str) -> list[str]:
    """The directories between ``node`` (the run's directory, as read) and ``key`` that etcd would make."""
    root = node.get("key", "").rstrip("/")
    parts = key[len(root) + 1 :].split("/")[:-1]
    existing, walk = set(), list(node.get("nodes") or [])
    while walk:
        child = walk.pop()
        if child.get("dir"):
            existing.add(child.get("key"))
            walk += child.get("nodes") or []
    paths = [root + "/" + "/".join(parts[: i + 1]) for i in range(len(parts))]
    return [path for path in paths if path not in existing]


def _find(node: dict, key: str) -> dict | None:
    """The key ``key`` (not a directory) under ``node`` as read, or None."""
    if node.get("key") == key:
        return None if node.get("dir") else node
    for child in node.get("nodes") or []:
        if key.startswith(child.get("key", "")):
            found = _find(child, key)
            if found is not None:
                return found
    return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as urllib3's pool in python-etcd expects
    server: Gate

    def log_message(self, format: str, *args) -> None:
        pass  # refusals are logged by _refuse; one line per request would flood a cluster's logs

    def setup(self) -> None:
        super().setup()
        self.admitted = self.server.enter(self.client_address[0])
        if not self.admitted:  # answered once (_serve), never held: a client that sends nothing is dropped
            self.connection.settimeout(REFUSED_TIMEOUT_S)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            if self.admitted:
                self.server.leave(self.client_address[0])

    def do_GET(self) -> None:
        self._serve()

    do_PUT = do_DELETE = do_POST = do_HEAD = do_PATCH = do_GET

    def _serve(self) -> None:
        source = self.client_address[0]
        try:
            body = self._body()
            if not self.admitted:
                self.close_connection = True
                raise Refused(
                    429,
                    209,
                    f"{source} holds {MAX_CONNECTIONS_PER_ADDRESS} connections to this gate, the most one pod may; "
                    "this one is closed",
                )
            target = urlsplit(self.path)
            if target.path == "/v2/machines" and self.command == "GET":
                self._send(200, [("Content-Type", "text/plain")], f"http://{self.headers.get('Host', '')}".encode())
                return
            request = Request.parse(self.command, target.path, target.query, body)
            run_id = self.server.resolver(source)
            where = check(request, run_id, self.server.limits)
            if request.method in ("PUT", "DELETE"):
                self.server.spend(run_id, request)
            directories: list[str] = []
            undo = None
            if where == "store-key" and self.command == "PUT":
                directories = self.server.store_ready(run_id, request)
            if where in ("state", "store-key") and self.command == "PUT":
                undo = self.server.hold(request, directories)
            headers = {name: value for name, value in self.headers.items() if name.lower() not in FORWARDED_NOT}
            target, form_body = request.forwarded()
            if form_body is not None:
                headers["Content-Type"] = "application/x-www-form-urlencoded"
            watch = self.command == "GET" and request.form.get("wait") == "true"
            status, answer_headers, answer = self.server.upstream.request(
                self.command, target, form_body, headers, self.connection if watch else None
            )
            if request.method == "DELETE" and 200 <= status < 300:
                self.server.held.forget(request.key)
            # A write etcd refused holds nothing: counted, a run's failing compare-and-swaps (4 KiB each, at its rate)
            # filled what all runs may hold in seconds while etcd held none of it, and every new key was refused.
            if undo is not None and not 200 <= status < 300:
                undo()
            self._send(status, [(n, v) for n, v in answer_headers if n.lower() not in HOP_BY_HOP], answer)
        except Refused as refusal:
            self._refuse(source, refusal)
        except ConnectionError as error:
            self._refuse(source, Refused(503, 300, str(error)))

    def _body(self) -> bytes:
        length = self.headers.get("Content-Length")
        if self.headers.get("Transfer-Encoding"):
            self.close_connection = True
            raise invalid("send the form with a Content-Length")
        if not length:
            return b""
        if not length.isdigit() or int(length) > 3 * self.server.limits.max_value_bytes + FORM_OVERHEAD:
            self.close_connection = True  # the body is left unread: this connection cannot go on
            raise Refused(413, 209, f"a request body may be at most about {self.server.limits.max_value_bytes} bytes")
        return self.rfile.read(int(length))

    def _refuse(self, source: str, refusal: Refused) -> None:
        print(f"etcd-gate: refused {self.command} {self.path[:200]} from {source}: {refusal.message}", file=sys.stderr)
        answer = {"errorCode": refusal.code, "message": refusal.message, "cause": "etcd-gate", "index": 0}
        self._send(refusal.status, [("Content-Type", "application/json")], json.dumps(answer).encode())

    def _send(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            try:
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):  # the client has gone (a watch cut off above)
                self.close_connection = True


def serve(address: tuple[str, int], upstream: Upstream, resolver: Resolver, limits: Limits) -> Gate:
    """A gate listening at ``address``, served by a daemon thread; ``shutdown()`` then ``server_close()`` to stop."""
    gate = Gate(address, upstream, resolver, limits)
    threading.Thread(target=gate.serve_forever, name="etcd-gate", daemon=True).start()
    return gate


__all__ = ["Gate", "Upstream", "serve"]
