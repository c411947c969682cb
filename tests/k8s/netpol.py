"""Which pod may open a connection to which, under a set of NetworkPolicies of one namespace.

The rules of https://kubernetes.io/docs/concepts/services-networking/network-policies/ for what our
policies use: a pod selected by no policy of a direction is open in that direction; a selected pod
admits only what some selecting policy's rule allows (rules add up); a connection needs both the
source's egress and the destination's ingress. Peers are same-namespace podSelectors (matchLabels);
namespaceSelector and ipBlock peers never match a pod of the namespace here (they name other
namespaces and addresses). A rule without peers admits every peer, one without ports every port.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    if set(selector) - {"matchLabels"}:
        raise ValueError(f"this evaluator reads matchLabels only, got {selector}")
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())


def _peer_matches(peer: dict[str, Any], labels: dict[str, str]) -> bool:
    if "namespaceSelector" in peer or "ipBlock" in peer:
        return False
    return _selects(peer["podSelector"], labels)


def _port_matches(ports: list[dict[str, Any]] | None, port: int, protocol: str) -> bool:
    if not ports:
        return True
    return any(p.get("protocol", "TCP") == protocol and p.get("port") in (None, port) for p in ports)


def _allowed(policies: Sequence[dict[str, Any]], pod: dict[str, str], peer: dict[str, str], port: int,
             protocol: str, direction: str) -> bool:
    key, peers_key = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
    selecting = [p["spec"] for p in policies if _selects(p["spec"]["podSelector"], pod)
                 and direction in p["spec"].get("policyTypes", ["Ingress"])]
    if not selecting:
        return True
    return any(
        _port_matches(rule.get("ports"), port, protocol)
        and (rule.get(peers_key) is None or any(_peer_matches(x, peer) for x in rule[peers_key]))
        for spec in selecting for rule in spec.get(key) or []
    )


def can_connect(policies: Sequence[dict[str, Any]], source: dict[str, str], destination: dict[str, str],
                port: int, protocol: str = "TCP") -> bool:
    """May a pod with labels ``source`` reach one with labels ``destination`` on ``port``?"""
    policies = [p for p in policies if p.get("kind") == "NetworkPolicy"]
    return (_allowed(policies, source, destination, port, protocol, "Egress")
            and _allowed(policies, destination, source, port, protocol, "Ingress"))
