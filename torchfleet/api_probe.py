"""Can this machine open a connection to the cluster's API server? Answered within a bounded time.

    python -m torchfleet.api_probe KUBECONFIG [--timeout SECONDS]

Exit 0: a TCP connection to the current context's server opened (reachable; what it then answers, and to
whom, is the provider's business). Exit 1: it did not within the timeout (refused, dropped, no route, a
name that does not resolve): the preview workflow then sets TORCHFLEET_PREVIEW_WITHOUT_CLUSTER=true
(components/clouds/offline_preview.py). Exit 2: the file is not a kubeconfig with a server.

An endpoint restricted to other addresses (EKS publicAccessCidrs, AKS authorized ranges) drops the SYNs of
every other machine, so the probe bounds the whole of it, the name's resolution included, by one deadline
instead of trusting the resolver's and the kernel's retries.
"""

from __future__ import annotations

import argparse
import socket
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import yaml

DEFAULT_TIMEOUT_S = 5.0


class BadKubeconfig(ValueError):
    pass


def server_of(kubeconfig_text: str) -> tuple[str, int]:
    """(host, port) of the current context's cluster server."""
    try:
        config = yaml.safe_load(kubeconfig_text)
    except yaml.YAMLError as e:
        raise BadKubeconfig(f"not YAML: {e}") from None
    if not isinstance(config, dict):
        raise BadKubeconfig("not a kubeconfig (expected a mapping with clusters, contexts, current-context)")
    contexts = {c.get("name"): c.get("context") or {} for c in config.get("contexts") or []}
    clusters = {c.get("name"): c.get("cluster") or {} for c in config.get("clusters") or []}
    current = config.get("current-context")
    if current not in contexts:
        raise BadKubeconfig(f"current-context {current!r} is not one of the contexts {sorted(map(str, contexts))}")
    cluster = contexts[current].get("cluster")
    server = clusters.get(cluster, {}).get("server")
    if not server:
        raise BadKubeconfig(f"context {current!r}: cluster {cluster!r} has no server")
    url = urlsplit(server)
    if url.scheme not in ("https", "http") or not url.hostname:
        raise BadKubeconfig(f"server {server!r}: expected https://HOST[:PORT]")
    return url.hostname, url.port or (443 if url.scheme == "https" else 80)


def probe(host: str, port: int, timeout_s: float) -> str | None:
    """None when a connection to HOST:PORT opened within TIMEOUT_S, else why not."""
    result: list[str | None] = []

    def attempt() -> None:
        deadline = time.monotonic() + timeout_s
        try:
            # create_connection tries each address the name resolves to, each within what is left.
            with socket.create_connection((host, port), timeout=max(deadline - time.monotonic(), 0.1)):
                result.append(None)
        except OSError as e:
            result.append(f"{type(e).__name__}: {e}")

    worker = threading.Thread(target=attempt, daemon=True)  # a hung resolver must not hold the exit
    worker.start()
    worker.join(timeout_s)
    if not result:
        return f"no answer within {timeout_s:g} s (the connection attempts are dropped, or the name does not resolve)"
    return result[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torchfleet.api_probe", description=__doc__.split("\n")[0])
    parser.add_argument("kubeconfig", type=Path)
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds (default %(default)s)")
    args = parser.parse_args(argv)
    if not 0 < args.timeout <= 60:
        parser.error(f"--timeout {args.timeout:g}: expected seconds in (0, 60]")
    try:
        host, port = server_of(args.kubeconfig.read_text())
    except (OSError, BadKubeconfig) as e:
        print(f"api_probe: {args.kubeconfig}: {e}", file=sys.stderr)
        return 2
    why = probe(host, port, args.timeout)
    if why is None:
        print(f"reachable: {host}:{port}")
        return 0
    print(f"unreachable: {host}:{port}: {why}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
