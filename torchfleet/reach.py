"""Will this machine reach the Kubernetes API the stack makes? (issue 29: reachable by default)

Every `pulumi up`, `destroy` and CI preview deploys Kubernetes objects through the cluster's API from
where it runs. `torchfleet check` asks this module before anything is made:

- GKE with its DNS-based endpoint (network.dnsEndpoint, on by default): reachable from anywhere, and
  gated by IAM (container.clusters.connect), not by address: nothing to compare.
- network.privateOnly: no public endpoint. Only machines inside the network reach it (a bastion, a peered
  VPC/VNet, a self-hosted runner; on AWS the networks in network.privateAccessCidrs): docs/deploy.md
  "Reaching the API" says how.
- network.publicAccessCidrs: this machine's public address, as a what-is-my-IP service sees it over HTTPS
  (default https://checkip.amazonaws.com, AWS's own, which answers the caller's address as one line of
  text), must be in one of them; else the exact `pulumi config set --path` line that adds it.

The lookup never fails the check: offline, blocked or answering something that is not one address, it
says so and how to look by hand. $TORCHFLEET_MY_IP_URL points it elsewhere (https, or http on loopback
only: a plain-http answer from elsewhere could be anyone's), or turns it off (`off`: nothing is printed
about the address; the test suite sets it, tests/conftest.py).
"""

from __future__ import annotations

import ipaddress
import os
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

from components.spec import PlatformSpec

URL_ENV = "TORCHFLEET_MY_IP_URL"
DEFAULT_URL = "https://checkip.amazonaws.com"
TIMEOUT_S = 5.0
MAX_ANSWER = 200  # one address and a newline; anything longer is not an answer
DOCS = "docs/deploy.md#reaching-the-api"
KEY = "torchfleet:network"
OFF = "not looked up"


@dataclass(frozen=True)
class Lookup:
    address: ipaddress.IPv4Address | ipaddress.IPv6Address | None
    source: str  # the URL asked, or why none was
    problem: str = ""  # why there is no address


def lookup_url() -> str | None:
    value = os.environ.get(URL_ENV)
    if value is None:
        return DEFAULT_URL
    return None if value.strip().lower() in ("", "off", "0", "false") else value.strip()


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def my_address(url: str | None = None, timeout: float = TIMEOUT_S) -> Lookup:
    """This machine's public address as the service at ``url`` sees it; never raises."""
    url = lookup_url() if url is None else url
    if url is None:
        return Lookup(None, f"${URL_ENV}=off", OFF)
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "https" and not (parts.scheme == "http" and _loopback(parts.hostname or "")):
        return Lookup(None, url, f"${URL_ENV} must be an https:// URL (http only on 127.0.0.1 or localhost)")
    try:
        # Through the environment's proxy (HTTPS_PROXY), as client-go, and so Pulumi's Kubernetes provider
        # and kubectl, reach the API: the address the service sees is the one the API server will see.
        request = urllib.request.Request(url, headers={"User-Agent": "torchfleet-check"})  # noqa: S310 (https or loopback only)
        with urllib.request.urlopen(request, timeout=timeout) as answer:  # noqa: S310 (the same)
            body = answer.read(MAX_ANSWER + 1)
    except urllib.error.HTTPError as error:
        return Lookup(None, url, f"the service answered HTTP {error.code}")
    except (urllib.error.URLError, OSError, ValueError) as error:
        reason = getattr(error, "reason", error)
        return Lookup(None, url, f"no answer ({reason})")
    text = body.decode("ascii", "replace").strip()
    try:
        if len(body) > MAX_ANSWER:
            raise ValueError
        return Lookup(ipaddress.ip_address(text), url)
    except ValueError:
        return Lookup(None, url, f"the answer is not one IP address ({text[:40]!r})")


def report(spec: PlatformSpec, stack: str, lookup=my_address) -> list[str]:
    """What `check` prints about reaching the API from here (each line starts with "reach: ")."""
    net = spec.network
    if spec.cloud == "local":
        return []
    if net.dns_endpoint:
        return ["reach: GKE's DNS-based endpoint is open to callers anywhere and gated by IAM "
                "(container.clusters.connect: roles/container.clusterViewer or more): reachable from this machine "
                "with a Google identity that holds it (gcloud auth login / application-default login); no address "
                "to check"]
    if net.private_only:
        where = (f" (network.privateAccessCidrs {list(net.private_access_cidrs)})" if net.private_access_cidrs
                 else "")
        return [f"reach: {KEY}.privateOnly: the API has no public endpoint; `pulumi up`, `destroy` and previews "
                f"must run from inside the network{where}: a bastion, a peered VPC/VNet or a self-hosted CI runner "
                f"({DOCS})"]
    cidrs = list(net.public_access_cidrs)
    if not cidrs:
        return [f"reach: the API has no public endpoint ({KEY}.publicAccessCidrs is empty): run from inside the "
                f"network ({DOCS})"]
    found = lookup()
    if found.problem == OFF:
        return []  # the user (or the test suite) said not to ask: say nothing rather than guess
    listed = f"{KEY}.publicAccessCidrs {cidrs}"
    if found.address is None:
        return [f"reach: could not learn this machine's public address from {found.source}: {found.problem}. "
                f"The API admits only {listed}: compare with `curl -s {DEFAULT_URL}` ({DOCS})"]
    matching = [c for c in cidrs if _contains(c, found.address)]
    if matching:
        return [f"reach: this machine ({found.address}, as {found.source} sees it) is in {listed} ({matching[0]}): "
                "it reaches the API"]
    host = "32" if found.address.version == 4 else "128"
    return [
        f"reach: this machine ({found.address}, as {found.source} sees it) is NOT in {listed}: `pulumi up` would "
        "create the cluster, then fail on every Kubernetes resource (and `destroy` on them too). Add it:",
        f"  pulumi config set --path '{KEY}.publicAccessCidrs[{len(cidrs)}]' {found.address}/{host} --stack {stack}",
        f"  (or run from a listed network; {DOCS})",
    ]


def _contains(cidr: str, address) -> bool:
    try:
        return address in ipaddress.ip_network(cidr, strict=False)
    except ValueError:
        return False
