"""Cost at a glance (issue 13): `check` prints the most a stack can cost per hour, `submit`/`sweep`
the most a job can, both at on-demand list prices unless components/catalog/spot_prices.yaml dates the
machine in the stack's region (then at its spot or on-demand price there, as the pool is: issue 32); a
sweep of more than 20 jobs asks first.

The expected figures are worked out here by hand from the stack files and prices.yaml, so a change
to either shows up as a diff of numbers, not a silent drift."""

from __future__ import annotations

import io
from unittest import mock

import pytest
import yaml

from components import spec as platform
from tests.harness import STACKS_DIR
from tests.harness.placeholders import replaced_file
from torchfleet import cost
from torchfleet.cli import main
from torchfleet.jobs import commands

IMAGE = ["--image", "registry.example.com/team/train:1.4.2"]
CMD = ["--", "python", "train.py"]


def spec_of(stack: str, **changes) -> platform.PlatformSpec:
    config = yaml.safe_load((STACKS_DIR / f"Pulumi.{stack}.yaml").read_text())["config"]
    config.update(changes)
    return platform.parse(config, stack)


@pytest.mark.parametrize(
    "stack, total, lines",
    [
        # t4: 8 per zone x 2 zones on g4dn.xlarge (one size per EKS pool, issue 20); a10g: 2 x g5.xlarge
        # (the catalog default); manager: 3 x m6i.large; cpuPool: 2 x m6i.large (issue 30).
        ("aws-usw2", 8 * 0.526 * 2 + 2 * 1.006 + 3 * 0.096 + 2 * 0.096,
         [("gpu-t4-us-west-2a", 8, "g4dn.xlarge"), ("gpu-t4-us-west-2b", 8, "g4dn.xlarge"),
          ("gpu-a10g-us-west-2a", 2, "g5.xlarge"), ("manager", 3, "m6i.large"), ("cpu", 2, "m6i.large")]),
        # t4 on n1-standard-8: the machine 0.379998 plus one T4 at 0.35 (on demand: spot_prices.yaml has no
        # N1 row); l4: g2-standard-4, a spot pool, at us-central1's spot price 0.397336 (spot_prices.yaml;
        # on demand it is 0.70683); the manager on demand in us-central1, 0.13402284 (prices.yaml's 0.134012 is
        # another snapshot): the stack's own region and capacity type where dated (issue 32).
        ("gcp-usc1", 8 * (0.379998 + 0.35) * 2 + 4 * 0.397336 + 3 * 0.13402284 + 2 * 0.13402284,
         [("gpu-t4-us-central1-a", 8, "n1-standard-8"), ("gpu-t4-us-central1-b", 8, "n1-standard-8"),
          ("gpu-l4-us-central1-a", 4, "g2-standard-4"), ("manager", 3, "e2-standard-4"),
          ("cpu", 2, "e2-standard-4")]),
        ("azure-eus", 8 * 0.752 * 3 + 3.673 + 3 * 0.192 + 2 * 0.192,
         [("gpu-t4-1", 8, "Standard_NC8as_T4_v3"), ("gpu-t4-2", 8, "Standard_NC8as_T4_v3"),
          ("gpu-t4-3", 8, "Standard_NC8as_T4_v3"), ("gpu-a100-80gb-1", 1, "Standard_NC24ads_A100_v4"),
          ("manager", 3, "Standard_D4s_v5"), ("cpu", 2, "Standard_D4s_v5")]),
    ],
)
def test_stack_estimate_is_every_pool_at_max_nodes_plus_the_manager_pool(stack, total, lines):
    estimate = cost.stack_estimate(spec_of(stack))
    assert [(line.what, line.nodes, line.machine) for line in estimate.lines] == lines
    assert estimate.total == pytest.approx(total)
    assert estimate.unpriced == []


def test_local_stack_has_no_estimate():
    assert cost.stack_estimate(spec_of("local")) is None


def test_a_machine_without_a_list_price_is_named_and_left_out_of_the_total():
    # In a region spot_prices.yaml has no rows for (us-central1 prices A3 at spot and on demand), the
    # A3 falls back to prices.yaml, which sells it only as Spot or Flex-start: no list price.
    text = (STACKS_DIR / "Pulumi.gcp-usc1.yaml").read_text().replace("us-central1", "asia-east1")
    config = yaml.safe_load(text)["config"]
    config["torchfleet:gpuPools"] = [{"gpu": "h100", "maxNodes": 2, "zones": ["asia-east1-a"]}]
    config.pop("torchfleet:cpuPool")  # the manager's line alone beside the H100's
    estimate = cost.stack_estimate(platform.parse(config, "gcp-ase1"))
    h100, _ = estimate.lines
    assert (h100.machine, h100.usd) == ("a3-highgpu-1g", None) and "Spot or Flex-start" in h100.why_unpriced
    assert estimate.total == pytest.approx(3 * 0.134012)  # the manager at prices.yaml's list price
    assert "1 line(s) without a list price not counted" in estimate.render("s")


def test_check_prints_the_stack_estimate_on_stderr(capsys, tmp_path):
    code = main(["check", "--stack-file", str(replaced_file("aws-usw2", tmp_path))])  # no placeholder left
    out, err = capsys.readouterr()
    assert (code, out) == (0, "")  # stdout stays one line per violation
    assert ("aws-usw2, every pool at maxNodes: at most 10.91 USD/hour at on-demand list prices "
            "(us-east-1, priced 2026-07-20)") in err
    assert estimate_lines(err)[0] == ["gpu-t4-us-west-2a", "8", "x", "g4dn.xlarge", "at", "0.526", "4.21"]
    assert estimate_lines(err)[-2] == ["manager", "3", "x", "m6i.large", "at", "0.096", "0.29"]
    assert estimate_lines(err)[-1] == ["cpu", "2", "x", "m6i.large", "at", "0.096", "0.19"]  # cpuPool (issue 30)


@pytest.fixture
def no_cluster():
    with mock.patch("torchfleet.jobs.kubeconfig.connect", side_effect=RuntimeError("connected")) as connect, \
         mock.patch("torchfleet.jobs.target.read_stack_outputs", side_effect=RuntimeError("pulumi")):
        yield connect


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def estimate_lines(err: str) -> list[list[str]]:
    # The cost lines only: check prints the quotas a stack needs after them (issue 20), also indented.
    # The idle estimate (test_check_idle_cost.py) comes between them.
    err = err.split("what the cloud must grant first")[0].split(", idle (no job running)")[0]
    return [line.split() for line in err.splitlines() if line.startswith("  ")]


@pytest.mark.parametrize(
    "argv, head, lines",
    [
        # With a stack: the priciest machine of its t4 pools, at the job's most nodes.
        (["submit", "a", "--stack", "aws-usw2", "--gpu", "t4", "--nodes", "2:8"],
         "job a at its most nodes, one machine each: at most 4.21 USD/hour",
         [["a", "8", "x", "g4dn.xlarge", "at", "0.526", "4.21"]]),
        # Without one: the machine it is sized for on --cloud.
        (["submit", "b", "--gpu", "a100-80gb", "--cloud", "azure", "--nodes", "3"],
         "job b at its most nodes, one machine each: at most 11.02 USD/hour at on-demand list prices (eastus",
         [["b", "3", "x", "Standard_NC24ads_A100_v4", "at", "3.673", "11.02"]]),
        (["submit", "c", "--gpu", "t4", "--gpus-per-node", "4", "--cloud", "gcp", "--nodes", "2"],
         "job c at its most nodes, one machine each: at most 5.84 USD/hour",
         [["c", "2", "x", "n1-standard-32", "at", "2.92", "5.84"]]),
    ],
)
def test_submit_dry_run_prints_the_job_estimate(argv, head, lines, capsys, no_cluster):
    code, out, err = run(capsys, *argv, *IMAGE, "--dry-run", *CMD)
    assert code == 0, err
    assert head in err
    assert estimate_lines(err) == lines
    assert "USD" not in out  # stdout stays the YAML


def test_cpu_job_prints_no_estimate(capsys, no_cluster):
    code, _, err = run(capsys, "submit", "d", "--stack", "local", "--cpu", *IMAGE, "--dry-run", *CMD)
    assert code == 0 and "USD/hour" not in err


SWEEP_21 = ["sweep", "big", "--gpu", "t4", *IMAGE, "--param", "lr=1,2,3,4,5,6,7", "--param", "b=1,2,3"]
SWEEP_20 = ["sweep", "ok", "--gpu", "t4", *IMAGE, "--param", "lr=1,2,3,4,5", "--param", "b=1,2,3,4"]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_sweep_estimate_adds_up_its_jobs(capsys, no_cluster):
    code, _, err = run(capsys, *SWEEP_21, "--dry-run", *CMD)
    assert code == 0
    assert "sweep big (21 jobs), every job at its most nodes, one machine each: at most 11.05 USD/hour" in err
    assert len(estimate_lines(err)) == 21


def test_big_sweep_without_a_terminal_needs_yes_and_submits_nothing(capsys, no_cluster, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))  # piped: not a terminal, so not an answer
    code, _, err = run(capsys, *SWEEP_21, *CMD)
    assert code == 2
    assert "--yes: this sweep submits 21 jobs (more than 20) and there is no terminal to confirm on" in err
    assert not no_cluster.called


@pytest.mark.parametrize("answer, confirmed", [("y\n", True), ("yes\n", True), ("n\n", False), ("\n", False)])
def test_big_sweep_asks_on_a_terminal(answer, confirmed, capsys, no_cluster, monkeypatch):
    monkeypatch.setattr("sys.stdin", Terminal(answer))
    code, _, err = run(capsys, *SWEEP_21, *CMD)
    assert "submit 21 jobs? [y/N]" in err
    if confirmed:  # it went on to the cluster, which the fixture refuses
        assert no_cluster.called and code == 1
    else:
        assert not no_cluster.called and code == 2
        assert "not confirmed: none of the 21 jobs was submitted" in err


@pytest.mark.parametrize("argv", [[*SWEEP_21, "--yes"], [*SWEEP_21, "-y"], SWEEP_20])
def test_yes_or_at_most_20_jobs_submit_without_asking(argv, capsys, no_cluster, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    code, _, err = run(capsys, *argv, *CMD)
    assert "[y/N]" not in err and "--yes:" not in err
    assert no_cluster.called and code == 1  # it reached the (refused) cluster


def test_the_confirmation_threshold_is_the_issue_s():
    assert commands.CONFIRM_OVER == 20
