"""`torchfleet synth` on the GCP example stack as a user runs it: its own process, JSON on stdout,
no kubeconfig content printed; a bad GCP stack exits 2 with the problem on stderr and nothing on
stdout."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.harness import REPO
from torchfleet.preview import mock_gcp


def _synth(stack_file) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "torchfleet", "synth", "--json", "--stack-file", str(stack_file)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def printed() -> str:
    proc = _synth(REPO / "stacks" / "Pulumi.gcp-usc1.yaml")
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_synth_prints_the_gcp_stack(printed):
    data = json.loads(printed)
    types = [r["type"] for r in data["resources"]]
    assert types.count("gcp:container/cluster:Cluster") == 1
    assert types.count("gcp:container/nodePool:NodePool") == 5  # manager + cpu + t4 x 2 zones + l4
    assert types.count("gcp:filestore/instance:Instance") == 1
    assert "torchfleet:clouds:GcpCluster" in types
    assert data["outputs"]["cloud"] == "gcp"
    assert data["outputs"]["kubeconfig"] == "[secret]"
    assert data["outputs"]["gpuPools"] == ["gpu-t4-us-central1-a", "gpu-t4-us-central1-b", "gpu-l4-us-central1-a"]


def test_the_kubeconfig_never_reaches_stdout(printed):
    # The provider's kubeconfig is a secret: synth masks it, so neither CA nor auth plugin shows.
    assert mock_gcp.MOCK_CA not in printed
    assert "gke-gcloud-auth-plugin" not in printed


def test_a_bad_gcp_stack_exits_2_with_the_problem(tmp_path):
    bad = tmp_path / "Pulumi.gcp-bad.yaml"
    bad.write_text(
        "config:\n"
        "  gcp:project: p\n"
        "  gcp:region: us-central1\n"
        "  torchfleet:cloud: gcp\n"
        "  torchfleet:zones: [us-central1-a]\n"
        "  torchfleet:gpuPools: [{gpu: k80, maxNodes: 1}]\n"
    )
    proc = _synth(bad)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "torchfleet:gpuPools[0].gpu: k80 on gcp was retired" in proc.stderr
