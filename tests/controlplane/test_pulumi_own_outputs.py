"""The real engine hands a program its own stack's last outputs (components/clouds/azure/live.py reads the AKS
cluster's names that way, to refuse a minor upgrade with spot pools before `up` changes anything): the first
`up` reads none, a later preview and `up` read what the last `up` left, never what the running one will leave.
No cluster and no provider: the engine (tests/controlplane/build.py's Pulumi CLI) and its file backend."""

from __future__ import annotations

import json

import pytest

from tests.controlplane.pulumi_engine import PROGRAM_VARIABLE, REPO, Engine
from tests.controlplane.test_pulumi_unreachable import EnvEngine

pytestmark = pytest.mark.pulumi_engine  # waits for the engine's build (tests/conftest.py)

PROGRAM = REPO / "tests" / "controlplane" / "programs" / "own_outputs_stack.py"


@pytest.fixture
def engine(tmp_path):
    settings = {"torchfleet:cloud": "azure", "own:generation": "1"}  # Pulumi.yaml requires torchfleet:cloud
    base = Engine.create(tmp_path, tmp_path / "no-kubeconfig", {"config": settings}, stack="own")
    return EnvEngine(base.workdir, base.kubeconfig, base.stack, ((PROGRAM_VARIABLE, str(PROGRAM)),))


def outputs(engine) -> dict:
    return json.loads(engine.cli("stack", "output", "--json", "--stack", engine.stack).stdout)


def test_a_program_reads_its_own_last_outputs_in_up_and_preview(engine):
    first = engine.pulumi("up", "--yes", "--skip-preview")
    assert "recorded names: None" in first.stdout
    assert outputs(engine).get("seen") is None  # a None output is left out
    engine.cli("config", "set", "own:generation", "2", "--stack", engine.stack)
    preview = engine.pulumi("preview")
    assert "recorded names: ('rg-own', 'aks-1')" in preview.stdout
    engine.pulumi("up", "--yes", "--skip-preview")
    # the second `up` read the first's names, not its own (aks-2), at its start
    assert outputs(engine)["seen"] == ["rg-own", "aks-1"]
    assert outputs(engine)["clusterName"] == "aks-2"
