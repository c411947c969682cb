"""Issue 29 (Azure): the preflight's regional vCPU line counts the system and manager pools with their upgrade
surge node (it counted the on-demand GPU pools only), and `check` prints what the stack costs with no job."""

from __future__ import annotations

from components.clouds import preflight
from components.clouds.azure import cluster as aks
from tests.harness import STACKS_DIR
from tests.harness.placeholders import replaced_file
from torchfleet import cost
from torchfleet.cli import main
from torchfleet.preview.runner import stack_spec

EXAMPLE = STACKS_DIR / "Pulumi.azure-eus.yaml"


def test_regional_vcpus_count_every_on_demand_pool_and_its_surge():
    spec = stack_spec(EXAMPLE)  # A100 on demand 1 x 24, manager D4s_v5 max 3, system D4s_v5 max 3
    (line,) = [n for n in preflight.needs(spec) if n.what.startswith("Total Regional vCPUs")]
    assert line.amount == 24 + (aks.SYSTEM_MAX_NODES + 1) * 4 + (3 + 1) * 4 == 56
    assert "12 more while a managerPool change moves it" in line.what


def test_the_audit_logs_providers_are_asked_for():
    found = [n.what for n in preflight.needs(stack_spec(EXAMPLE))]
    assert "registered: Microsoft.OperationalInsights" in found and "registered: Microsoft.Insights" in found


def test_idle_cost_is_the_system_pool_the_manager_minimum_and_the_tier():
    idle = cost.idle_estimate(stack_spec(EXAMPLE))
    assert round(idle.total, 2) == round(2 * 0.192 + 1 * 0.192 + 0.10, 2)
    assert {line.what for line in idle.unpriced} == {"1024 GiB Premium_LRS share", "standard load balancer"}
    # AWS and GCP have their own since issue 32: tests/torchfleet/test_check_idle_cost.py


def test_check_prints_the_idle_cost(capsys, tmp_path):
    assert main(["check", "--stack-file", str(replaced_file("azure-eus", tmp_path))]) == 0
    assert "azure-eus, idle (no job running): at most 0.68 USD/hour" in capsys.readouterr().err
