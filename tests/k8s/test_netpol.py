"""The NetworkPolicy evaluator the job tests reason with (netpol.py), on the documented rules."""

import pytest

from tests.k8s.netpol import can_connect

A, B = {"app": "a"}, {"app": "b"}


def policy(selector, types, ingress=None, egress=None):
    spec = {"podSelector": {"matchLabels": selector}, "policyTypes": types}
    if ingress is not None:
        spec["ingress"] = ingress
    if egress is not None:
        spec["egress"] = egress
    return {"kind": "NetworkPolicy", "spec": spec}


DENY_ALL = policy({}, ["Ingress", "Egress"])
A_TO_B_80 = policy(A, ["Egress"], egress=[{"to": [{"podSelector": {"matchLabels": B}}],
                                           "ports": [{"protocol": "TCP", "port": 80}]}])
B_FROM_A = policy(B, ["Ingress"], ingress=[{"from": [{"podSelector": {"matchLabels": A}}]}])


@pytest.mark.parametrize(
    ("policies", "source", "destination", "port", "allowed"),
    [
        ([], A, B, 80, True),  # selected by nothing: open
        ([DENY_ALL], A, B, 80, False),
        ([DENY_ALL, A_TO_B_80], A, B, 80, False),  # egress alone is not enough: B's ingress is denied
        ([DENY_ALL, A_TO_B_80, B_FROM_A], A, B, 80, True),  # rules add up
        ([DENY_ALL, A_TO_B_80, B_FROM_A], A, B, 81, False),  # the egress rule names port 80
        ([DENY_ALL, A_TO_B_80, B_FROM_A], B, A, 80, False),
        ([A_TO_B_80], A, B, 80, True),  # B is selected by no ingress policy
        ([policy(A, ["Egress"], egress=[{"to": [{"namespaceSelector": {"matchLabels": {"x": "y"}}}]}])], A, B, 80,
         False),  # another namespace's pods are not this namespace's
        ([policy(A, ["Egress"], egress=[{}])], A, B, 443, True),  # no peers, no ports: everything
        ([policy(A, ["Egress"], egress=[])], A, B, 443, False),  # Egress with no rules: nothing
    ],
)
def test_the_evaluator_follows_the_documented_rules(policies, source, destination, port, allowed):
    assert can_connect(policies, source, destination, port) is allowed
