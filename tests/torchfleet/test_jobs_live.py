"""Against a live API server: only when TORCHFLEET_TEST_KUBECONFIG names a kubeconfig (skipped otherwise).

The cluster needs the training layer (`kubectl apply -k k8s/` or `pulumi up`): the ElasticJob CRD,
the namespace (TORCHFLEET_TEST_NAMESPACE, default elastic-job), the priority class and the policies.
No GPU is needed: the job is created, listed, shown and deleted; its pods may stay Pending.
"""

import os
import uuid

import pytest

from torchfleet.cli import main

KUBECONFIG = os.environ.get("TORCHFLEET_TEST_KUBECONFIG")
NAMESPACE = os.environ.get("TORCHFLEET_TEST_NAMESPACE", "elastic-job")
pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(not KUBECONFIG, reason="set TORCHFLEET_TEST_KUBECONFIG to run against a live cluster"),
]


def cli(*argv):
    return main([argv[0], "--kubeconfig", KUBECONFIG, "--namespace", NAMESPACE, *argv[1:]])


def test_submit_list_status_delete_round_trip(capsys):
    name = f"live-{uuid.uuid4().hex[:8]}"
    assert cli("submit", name, "--gpu", "t4", "--nodes", "1:2", "--image", "python:3.11-slim",
               "--", "python", "-c", "print(1)") == 0
    try:
        assert cli("submit", name, "--gpu", "t4", "--image", "python:3.11-slim", "--", "python", "x.py") == 2
        capsys.readouterr()
        assert cli("list") == 0
        assert name in capsys.readouterr().out
        assert cli("status", name) == 0
        assert f"Job:             {name}" in capsys.readouterr().out
    finally:
        assert cli("delete", name) == 0
    assert cli("status", name) == 2
    assert cli("delete", name) == 2

