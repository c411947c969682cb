"""azure/live.py: a Kubernetes minor upgrade with spot pools is refused by the program itself, at preview and
before `up` changes anything, from the cluster as it runs (the pure decision, then the program under mocks:
mocks.STACK_OUTPUTS stands for the stack's last outputs, mock_azure.LIVE_MANAGED_CLUSTERS for the cluster
getManagedCluster reads). Before, only `torchfleet plan` refused it, and `pulumi up` sent the combined PUT."""

from __future__ import annotations

from contextlib import contextmanager

import pytest

from components.clouds.azure.live import LiveCluster, spot_upgrade_problem
from components.spec import ConfigError
from tests.harness import synth_config
from torchfleet.preview import mock_azure, mocks

RG, CLUSTER = "torchfleet-azure-net-rg1a2b3c4d", "torchfleet-azure-cluster-aks5e6f7a8b"
BASE = {
    "azure-native:location": "eastus",
    "torchfleet:cloud": "azure",
    "torchfleet:zones": ["1", "2"],
    "torchfleet:kubernetesVersion": "1.35",
    "torchfleet:managerPool": {"machineType": "Standard_D4s_v5", "minNodes": 1, "maxNodes": 3},
    "torchfleet:gpuPools": [{"gpu": "t4", "maxNodes": 8}],
    "torchfleet:network": {"publicAccessCidrs": ["203.0.113.0/24"]},
    "torchfleet:admins": ["User:00000000-0000-0000-0000-0000000000b0"],
}
ON_DEMAND = {**BASE, "torchfleet:gpuPools": [{"gpu": "t4", "maxNodes": 8, "spot": False}],
             "torchfleet:guardrails": {"allowOnDemandGpus": True}}
SPOT_POOLS = {"system": "Regular", "manager": "Regular", "gput41": "Spot", "gput42": "Spot"}


@contextmanager
def running(version: str | None, pools: dict[str, str] | None = None, outputs: dict | None = None):
    """A stack whose last `up` left `outputs` (the cluster's names by default), and a cluster that runs
    `version` (None: no cluster answers, 404)."""
    mocks.STACK_OUTPUTS.clear()
    mocks.STACK_OUTPUTS.update({"resourceGroup": RG, "clusterName": CLUSTER} if outputs is None else outputs)
    mock_azure.LIVE_MANAGED_CLUSTERS.clear()
    if version is not None:
        mock_azure.LIVE_MANAGED_CLUSTERS[CLUSTER] = {
            "resourceGroup": RG, "version": version, "pools": SPOT_POOLS if pools is None else pools}
    try:
        yield
    finally:
        mocks.STACK_OUTPUTS.clear()
        mock_azure.LIVE_MANAGED_CLUSTERS.clear()


# ---- the decision --------------------------------------------------------------------------------------


def live(version: str, spot=("gput41",)) -> LiveCluster:
    return LiveCluster(RG, CLUSTER, version, tuple(spot))


def test_a_minor_up_with_spot_pools_is_refused_with_the_three_steps_on_this_cluster():
    why = spot_upgrade_problem(live("1.34.5"), "1.35")
    assert why.startswith("the control plane runs 1.34.5; 1.34.5 -> 1.35 with spot pools (gput41)")
    first = f"`az aks upgrade -g {RG} -n {CLUSTER} --control-plane-only --kubernetes-version 1.35`"
    second = f"`az aks nodepool upgrade -g {RG} --cluster-name {CLUSTER} -n system --kubernetes-version 1.35`"
    assert why.index(first) < why.index(second) < why.index('set torchfleet:kubernetesVersion "1.35"')


@pytest.mark.parametrize("case,cluster,wanted", [
    ("not created yet", None, "1.35"),
    ("steps 1 and 2 done: the control plane runs the new minor", live("1.35.2"), "1.35"),
    ("a patch of the same minor", live("1.35.2"), "1.35"),
    ("no spot pools", live("1.34.5", spot=()), "1.35"),
    ("no upgrade", live("1.34.5"), "1.34"),
])
def test_nothing_else_is_refused(case, cluster, wanted):
    assert spot_upgrade_problem(cluster, wanted) is None, case


# ---- the program, under mocks --------------------------------------------------------------------------


def test_the_program_refuses_the_combined_upgrade_before_registering_the_cluster():
    """Fails on the program before live.py: it planned the ManagedCluster update with both versions."""
    with running("1.34.5"), pytest.raises(ConfigError) as refused:
        synth_config("azure-live", BASE)
    [problem] = refused.value.problems
    assert problem.startswith("torchfleet:kubernetesVersion: the control plane runs 1.34.5")
    assert "spot pools (gput41, gput42)" in problem
    assert f"-g {RG} -n {CLUSTER} --control-plane-only --kubernetes-version 1.35" in problem


def test_after_steps_1_and_2_the_same_config_goes_through():
    with running("1.35.2"):
        result = synth_config("azure-live", BASE)
    assert result.one("azure-native:containerservice:ManagedCluster").inputs["kubernetesVersion"] == "1.35"


@pytest.mark.parametrize("case,version,pools,outputs", [
    ("first up: the stack has no outputs", "1.34.5", None, {}),
    ("the recorded cluster is gone (404)", None, None, None),
    ("no spot pool runs", "1.34.5", {"system": "Regular", "manager": "Regular"}, None),
])
def test_a_cluster_not_created_gone_or_without_spot_pools_is_not_refused(case, version, pools, outputs):
    with running(version, pools, outputs):
        synth_config("azure-live", BASE if pools is None else ON_DEMAND)


def test_an_unreadable_cluster_is_not_refused_and_says_so(monkeypatch):
    """An offline preview or a runner without Azure's Reader: the read fails, a warning says the check did not
    run, and the preview goes on (AKS still refuses the PUT itself)."""
    warned = []
    monkeypatch.setattr("pulumi.log.warn", lambda msg, *a, **k: warned.append(msg))

    def denied(args):
        return {}, [("resourceName", "status code 403, AuthorizationFailed: no read access")]

    monkeypatch.setitem(mocks.CALLS, "azure-native:containerservice:getManagedCluster", denied)
    with running("1.34.5"):
        synth_config("azure-live", BASE)
    assert len(warned) == 1 and "could not read the running AKS cluster" in warned[0] and "403" in warned[0]
