"""Where the other replica groups and the Lighthouse reach this one, in the in-place mode.

torchft 0.2.0 advertises three addresses of a replica group:

- its Manager's server (``Manager(hostname=...)``), which the Lighthouse hands to a group that
  must heal from this one;
- its TCPStore (``Manager(store_addr=...)``): the quorum's cross-group process group meets on
  the store of its first group;
- its checkpoint server, from which a healing group downloads the live weights
  (``HTTPTransport.address()``, which always says ``socket.gethostname()``).

On one machine every name resolves. In a pod none does: a pod of an Indexed Job is called
``<job>-<index>`` but has no DNS record unless a headless Service and ``subdomain`` give it one
(https://kubernetes.io/docs/concepts/workloads/controllers/job/#completion-mode). The pod IP
always routes, so where ``POD_IP`` is set (``torchfleet submit`` sets it on every pod from the
downward API, the same value the restart mode hands torchrun as ``--local-addr``) all three are
advertised as it. The servers themselves listen on every interface (TCPStore, the Manager's
``[::]``, the checkpoint server's dual-stack socket), so only what is advertised changes.

No torch import at module level: the tests check the address logic without it.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

ENV_POD_IP = "POD_IP"


def advertised_host(environ: Mapping[str, str] = os.environ) -> str | None:
    """The pod IP from ``POD_IP``, or None off Kubernetes. A value that is no IP address is refused."""
    text = environ.get(ENV_POD_IP, "").strip()
    if not text:
        return None
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        raise ValueError(f"{ENV_POD_IP}={text!r}: must be the pod's IP address (the downward API's "
                         f"status.podIP), or unset off Kubernetes") from None


def url_host(host: str) -> str:
    """``host`` as it goes before ``:port`` in a URL: an IPv6 address in brackets."""
    return f"[{host}]" if ":" in host else host


def transport_at(host: str, timeout: timedelta) -> Any:
    """torchft's HTTP checkpoint transport, advertising ``host`` instead of this machine's hostname."""
    from torchft.checkpointing import HTTPTransport

    class AdvertisedHTTPTransport(HTTPTransport):
        def __init__(self) -> None:
            self._advertised = url_host(host)  # before the base class logs its address
            super().__init__(timeout=timeout, num_chunks=0)  # what torchft's Manager makes by default

        def address(self) -> str:
            port = self._server.socket.getsockname()[1]
            return f"http://{self._advertised}:{port}/checkpoint/"

    return AdvertisedHTTPTransport()


def manager_addresses(timeout: timedelta, environ: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """The address arguments of this group's torchft Manager: the pod IP on Kubernetes, else the
    loopback store and this machine's hostname (one machine: the tests, the demo, bench/goodput.py)."""
    host = advertised_host(environ)
    if host is None:
        return {"hostname": socket.gethostname(), "store_addr": "127.0.0.1"}
    return {"hostname": url_host(host), "store_addr": host, "checkpoint_transport": transport_at(host, timeout)}
