"""The network between real nodes (node.py, issue 31): a network namespace of its own with a bridge,
one veth pair from it into each node's namespace, and routes between the nodes' pod CIDRs.

    with Fabric.start() as fabric:
        with RealNode.start(cp, a_dir, "node-a", fabric=fabric) as a, \
                RealNode.start(cp, b_dir, "node-b", fabric=fabric) as b:
            ...  # a pod on a reaches a pod on b by its IP, or through a ClusterIP Service

Each node that joins gets the next pod CIDR (10.244.255.0/24 for the first, as a node without a
fabric has, then 10.244.254.0/24, ...; its Node's spec.podCIDR says so) and the next address of
FABRIC_CIDR on its end of the pair (`tfuplink` in its namespace). Every node routes each other
node's pod CIDR via that node's fabric address, as a cloud's VPC routes (or a flat CNI's per-node
routes) do; the pods' own routes go through their node's bridge, which forwards. No NAT between
nodes: a pod sees another pod's own address. Everything lives in namespaces this tier makes; the
host's network is never touched (no link, no address, no route).

A node leaving, or lost (RealNode.lose: the machine gone from the network), has its pair deleted:
the others' routes to its CIDR stay, as a VPC's route to a dead instance does, and lead nowhere
(ARP for its address is never answered).
"""

from __future__ import annotations

import contextlib
import ipaddress
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

FABRIC_CIDR = "10.243.0.0/24"  # inside the fabric's and the nodes' namespaces only
BRIDGE = "tffab0"
UPLINK = "tfuplink"  # the node's end of its pair, in the node's namespace
FIRST_POD_NET = 255  # 10.244.255.0/24: the single node's CIDR (node.POD_CIDR); then 254, 253, ...


class FabricError(RuntimeError):
    pass


def _ip(*argv: str) -> None:
    done = subprocess.run(["ip", *argv], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise FabricError(f"ip {' '.join(argv)} exited {done.returncode}: {done.stderr.strip()}")


def pod_cidr(index: int) -> str:
    """The pod CIDR of the INDEX-th node (0: the single node's, node.POD_CIDR)."""
    if not 0 <= index < FIRST_POD_NET:
        raise FabricError(f"no pod CIDR for node index {index}: 0..{FIRST_POD_NET - 1}")
    return f"10.244.{FIRST_POD_NET - index}.0/24"


@dataclass
class Member:
    netns: str
    address: str  # its end's address on the fabric
    pod_cidr: str
    link: str  # the fabric's end of its pair


@dataclass
class Fabric:
    netns: str = ""
    members: list[Member] = field(default_factory=list)
    _joined: int = 0  # nodes ever joined: each gets a CIDR and an address of its own, never reused

    @classmethod
    @contextlib.contextmanager
    def start(cls) -> Iterator[Fabric]:
        fabric = cls(netns=f"tffab-{uuid.uuid4().hex[:8]}")
        try:
            _ip("netns", "add", fabric.netns)
            _ip("-n", fabric.netns, "link", "set", "lo", "up")
            _ip("-n", fabric.netns, "link", "add", BRIDGE, "type", "bridge")
            _ip("-n", fabric.netns, "link", "set", BRIDGE, "up")
            yield fabric
        finally:
            # Deleting the namespace deletes the fabric's ends of the pairs, and with them the nodes' ends.
            subprocess.run(["ip", "netns", "delete", fabric.netns], capture_output=True)

    def allocate(self) -> tuple[int, str]:
        """The next node's index and pod CIDR (before its namespace exists)."""
        index = self._joined
        self._joined += 1
        return index, pod_cidr(index)

    def join(self, netns: str, index: int, cidr: str) -> Member:
        """A pair from the fabric into NETNS, its address, and the routes both ways to every member."""
        hosts = list(ipaddress.ip_network(FABRIC_CIDR).hosts())
        member = Member(netns, str(hosts[index + 1]), cidr, f"tfn{index}-{netns[-6:]}")
        prefix = ipaddress.ip_network(FABRIC_CIDR).prefixlen
        _ip("-n", self.netns, "link", "add", member.link, "type", "veth", "peer", "name", UPLINK, "netns", netns)
        _ip("-n", self.netns, "link", "set", member.link, "master", BRIDGE, "up")
        _ip("-n", netns, "addr", "add", f"{member.address}/{prefix}", "dev", UPLINK)
        _ip("-n", netns, "link", "set", UPLINK, "up")
        for other in self.members:
            _ip("-n", netns, "route", "add", other.pod_cidr, "via", other.address, "dev", UPLINK)
            _ip("-n", other.netns, "route", "add", cidr, "via", member.address, "dev", UPLINK)
        self.members.append(member)
        return member

    def unplug(self, netns: str) -> None:
        """NETNS off the fabric: its pair deleted (the others' routes to it stay and lead nowhere)."""
        for member in [m for m in self.members if m.netns == netns]:
            subprocess.run(["ip", "-n", self.netns, "link", "del", member.link], capture_output=True)

    def leave(self, netns: str) -> None:
        """NETNS gone (its node stopped): unplugged, and the others' routes to its pods removed."""
        self.unplug(netns)
        leaving = [m for m in self.members if m.netns == netns]
        self.members = [m for m in self.members if m.netns != netns]
        for gone in leaving:
            for other in self.members:
                subprocess.run(["ip", "-n", other.netns, "route", "del", gone.pod_cidr], capture_output=True)
