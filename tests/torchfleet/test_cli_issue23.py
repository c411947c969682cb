"""The CLI under issue 23's probe: stack files and arguments that got exit 0 (or an exit 2 naming no
key) are exit 2 naming the key or argument, before anything is created. Each names the bug it pins."""

from __future__ import annotations

import pytest
import yaml

from tests.harness import REPO
from torchfleet.cli import main


def run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def stack_file(tmp_path, name: str, edit) -> str:
    """stacks/Pulumi.<name>.yaml with `edit(config)` applied, written as tmp_path/Pulumi.<name>.yaml."""
    document = yaml.safe_load((REPO / "stacks" / f"Pulumi.{name}.yaml").read_text())
    edit(document["config"])
    path = tmp_path / f"Pulumi.{name}.yaml"
    path.write_text(yaml.safe_dump(document))
    return str(path)


@pytest.mark.parametrize(
    ("name", "edit", "key", "says"),
    [
        (
            "gcp-usc1",
            lambda c: c["torchfleet:training"].update(namespace="kube-system"),
            "torchfleet:training.namespace",
            "'kube-system' is Kubernetes' own",
        ),
        (
            "aws-usw2",
            lambda c: c["torchfleet:training"].update(namespace="torchfleet-system"),
            "torchfleet:training.namespace",
            "'torchfleet-system' is the store-owner Job's namespace",
        ),
        (
            "azure-eus",
            lambda c: c["torchfleet:autoscaler"].update(scaleDownUnneededTime="300s"),
            "torchfleet:autoscaler.scaleDownUnneededTime",
            "AKS takes whole minutes only",
        ),
        (
            "aws-usw2",
            lambda c: c["torchfleet:autoscaler"].update(scaleDownDelayAfterAdd="99999999999h"),
            "torchfleet:autoscaler.scaleDownDelayAfterAdd",
            "'99999999999h' is longer than a Go time.Duration holds",
        ),
        (
            "gcp-usc1",
            lambda c: c["torchfleet:network"].update(
                publicAccessCidrs=[f"11.1.{i}.0/24" for i in range(101)] + [f"11.2.{i}.0/24" for i in range(199)]
            ),
            "torchfleet:network.publicAccessCidrs",
            "at most 100 CIDRs on gcp",
        ),
    ],
    ids=[
        "namespace-kube-system",
        "namespace-torchfleet-system",
        "aks-seconds",
        "go-duration-overflow",
        "300-gke-authorized-networks",
    ],
)
def test_synth_refuses_what_issue_23_got_through(tmp_path, capsys, name, edit, key, says):
    code, out, err = run(["synth", "--stack", stack_file(tmp_path, name, edit)], capsys)
    assert (code, out) == (2, "")
    assert f"  - {key}: {says}" in err


def test_a_5000_digit_max_nodes_names_the_key(tmp_path, capsys):
    # Regression (issue 23): exit 2, but naming only the file ("Exceeds the limit (4300 digits)").
    path = tmp_path / "Pulumi.huge.yaml"
    text = (REPO / "stacks" / "Pulumi.gcp-usc1.yaml").read_text()
    path.write_text(text.replace("minNodes: 1, maxNodes: 3", "minNodes: 1, maxNodes: " + "9" * 5000))
    code, out, err = run(["synth", "--stack", str(path)], capsys)
    assert (code, out) == (2, "")
    assert "  - torchfleet:managerPool.maxNodes: must be <= 1000 (" in err and "got a 5000-digit number" in err
