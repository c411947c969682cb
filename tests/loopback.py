"""Endpoints on 127.0.0.1 that answer as a cloud API server does to a machine it admits or not (issue 29).

- `refusing_port()`: nothing listens; the kernel resets each connection at once (a deleted cluster's
  address, a closed port).
- `dropping(port)`: a listening socket whose accept queue is full and never drained. Linux then drops
  every further SYN (net/ipv4/tcp_input.c, tcp_conn_request: `if (sk_acceptq_is_full(sk)) ... goto drop`),
  which is what an endpoint restricted to other addresses (EKS publicAccessCidrs, AKS authorized ranges)
  does to a runner outside them: the client's connect neither succeeds nor fails until its own timeout.
- `Forwarder(target)`: a TCP relay on a port of its own to a reachable server, so a kubeconfig's server
  can stay the same while what answers behind it changes.

Loopback only: nothing here dials any other address.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator


def refusing_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def dropping(port: int = 0) -> Iterator[int]:
    """PORT (or a free one) on 127.0.0.1 dropping every new connection attempt for the block."""
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # the port a Forwarder just left
    server.bind(("127.0.0.1", port))
    server.listen(0)
    port = server.getsockname()[1]
    fillers = []
    try:
        # Backlog 0 holds one established connection; a second makes sure it is full. Neither is accepted.
        for _ in range(2):
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex(("127.0.0.1", port))
            fillers.append(filler)
        yield port
    finally:
        for s in (*fillers, server):
            s.close()


class Forwarder:
    """127.0.0.1:PORT relayed to TARGET (host, port) until close()."""

    def __init__(self, target: tuple[str, int], port: int = 0):
        self.target = target
        self._server = socket.socket()
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._server.bind(("127.0.0.1", port))
        self._server.listen(64)
        self.port = self._server.getsockname()[1]
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return  # closed
            try:
                upstream = socket.create_connection(self.target, timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        """Stop accepting and cut every relayed connection; the port is free again."""
        # shutdown wakes the thread blocked in accept(); close() alone would leave it, and the port, open.
        with contextlib.suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)
        self._server.close()
        with self._lock:
            for s in self._open:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()
            self._open.clear()
