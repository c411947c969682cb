"""`torchfleet synth` on the Azure example stack, as a user runs it (the CLI entry point, JSON on
stdout), the kubeconfig never printed; a bad Azure config exits 2 with the problem on stderr."""

import contextlib
import io
import json
from types import SimpleNamespace

import pytest

from tests.harness import REPO
from torchfleet.cli import main


def _synth(stack_file):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["synth", "--json", "--stack-file", str(stack_file)])
    return SimpleNamespace(returncode=rc, stdout=out.getvalue(), stderr=err.getvalue())


@pytest.fixture(scope="module")
def printed():
    proc = _synth(REPO / "stacks" / "Pulumi.azure-eus.yaml")
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_synth_prints_the_azure_stack(printed):
    data = json.loads(printed)
    types = {r["type"] for r in data["resources"]}
    for t in ("azure-native:containerservice:ManagedCluster", "azure-native:containerservice:AgentPool",
              "azure-native:storage:FileShare", "kubernetes:helm.sh/v3:Release"):
        assert t in types
    assert data["outputs"]["cloud"] == "azure"
    assert data["outputs"]["kubeconfig"] == "[secret]"


def test_the_kubeconfig_never_reaches_stdout(printed):
    # The provider's kubeconfig input is a secret: synth masks it, so no token command or
    # cluster CA is printed.
    assert "kubelogin" not in printed
    assert "certificate-authority-data" not in printed


def test_bad_azure_config_exits_2_naming_the_key(tmp_path):
    bad = tmp_path / "Pulumi.azure-bad.yaml"
    bad.write_text(
        "config:\n"
        "  azure-native:location: eastus\n"
        "  torchfleet:cloud: azure\n"
        "  torchfleet:zones: [\"1\", \"4\"]\n"
        "  torchfleet:gpuPools: [{gpu: v100, maxNodes: 1}]\n"
    )
    proc = _synth(bad)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "torchfleet:zones[1]: zone '4'" in proc.stderr
    assert "torchfleet:gpuPools[0].gpu: v100 on azure was retired" in proc.stderr
