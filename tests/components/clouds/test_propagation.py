"""PropagationWait's provider (components/clouds/propagation.py): it really waits, once per set of grants."""

from __future__ import annotations

import time

from components.clouds import propagation


def test_create_sleeps_for_the_given_seconds():
    provider = propagation._WaitProvider()
    start = time.monotonic()
    result = provider.create({"seconds": 0.3, "triggers": ["grant-1"]})
    assert time.monotonic() - start >= 0.3
    assert result.outs["triggers"] == ["grant-1"]


def test_a_new_grant_replaces_the_wait_and_nothing_else_does():
    provider = propagation._WaitProvider()
    same = provider.diff("id", {"seconds": 150, "triggers": ["a"]}, {"seconds": 300, "triggers": ["a"]})
    assert same.changes is False and not same.replaces
    new = provider.diff("id", {"seconds": 150, "triggers": ["a"]}, {"seconds": 150, "triggers": ["a", "b"]})
    assert new.changes is True and new.replaces == ["triggers"]


def test_the_documented_waits():
    # GCP IAM: "typically propagate in 2 minutes"; Azure RBAC: "up to five minutes".
    assert propagation.GCP_IAM_SECONDS >= 120 and propagation.AZURE_RBAC_SECONDS >= 300
