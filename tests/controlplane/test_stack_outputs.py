"""`--stack NAME` reads the stack's outputs, the kubeconfig secret included, with the real Pulumi CLI the tier
builds (tests/controlplane/build.py), on a file backend: `pulumi stack output --json --show-secrets`, without
the automation API's `stack select` (issue 21). The stack's outputs are put there with
`pulumi stack import`, as a deployment of the program leaves them (a root Stack resource's outputs)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.controlplane.cluster import binary
from torchfleet.jobs import target as targets
from torchfleet.jobs.errors import UsageError

pytestmark = pytest.mark.pulumi_engine  # waits for the engine's build (tests/conftest.py)

KUBECONFIG = "apiVersion: v1\nkind: Config\n"
SECRET = {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270"}  # Pulumi's secret signature


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project folder whose stack `dev` has the outputs a deployed stack has, the kubeconfig secret."""
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "Pulumi.yaml").write_text("name: torchfleet\nruntime: yaml\n")
    env = {"PULUMI_BACKEND_URL": f"file://{tmp_path / 'state'}", "PULUMI_CONFIG_PASSPHRASE": "test",
           "PULUMI_HOME": str(tmp_path / "home"), "PULUMI_SKIP_UPDATE_CHECK": "1"}
    (tmp_path / "state").mkdir()
    pulumi = binary("pulumi")
    monkeypatch.setenv("PATH", f"{os.path.dirname(pulumi)}:{os.environ['PATH']}")
    for key, value in env.items():
        monkeypatch.setenv(key, value)

    def run(*args: str) -> str:
        return subprocess.run([pulumi, *args, "--non-interactive"], cwd=folder, check=True, capture_output=True,
                              text=True, timeout=120).stdout

    run("stack", "init", "dev")
    deployment = json.loads(run("stack", "export", "--stack", "dev"))
    deployment["deployment"]["resources"] = [{
        "urn": "urn:pulumi:dev::torchfleet::pulumi:pulumi:Stack::torchfleet-dev", "custom": False,
        "type": "pulumi:pulumi:Stack",
        "outputs": {"kubeconfig": {**SECRET, "plaintext": json.dumps(KUBECONFIG)}, "namespace": "research"},
    }]
    (tmp_path / "deployment.json").write_text(json.dumps(deployment))
    run("stack", "import", "--stack", "dev", "--file", str(tmp_path / "deployment.json"))
    assert json.loads(run("stack", "output", "--json", "--stack", "dev"))["kubeconfig"] == "[secret]"
    return folder


def test_the_outputs_are_read_secrets_included(project):
    assert targets.read_stack_outputs("dev", work_dir=project) == {"kubeconfig": KUBECONFIG, "namespace": "research"}


def test_a_stack_pulumi_does_not_have_is_exit_2_in_the_clis_own_words(project):
    with pytest.raises(UsageError, match="Pulumi has no stack 'prod'"):
        targets.read_stack_outputs("prod", work_dir=project)
