"""TORCHFLEET_PREVIEW_WITHOUT_CLUSTER (components/clouds/offline_preview.py): only in a preview, only true or
false, and the AWS, Azure and GCP providers get the refusing loopback kubeconfig then and only then. What the real
engine and provider do with it: tests/controlplane/test_pulumi_preview_offline.py."""

from __future__ import annotations

import json
import socket

import pytest

from components.clouds import offline_preview, unreachable
from components.spec import ConfigError
from tests.harness import synth_stack
from torchfleet import api_probe
from torchfleet.cli import main

SWITCH = offline_preview.SWITCH


@pytest.mark.parametrize("environ", [{}, {SWITCH: "false"}])
def test_off_unless_set_to_true(environ):
    assert offline_preview.requested(environ, dry_run=True) is False
    assert offline_preview.requested(environ, dry_run=False) is False


def test_on_in_a_preview():
    assert offline_preview.requested({SWITCH: "true"}, dry_run=True) is True


def test_a_real_run_with_the_switch_is_refused():
    with pytest.raises(ConfigError, match=f"{SWITCH}=true is set for a run that is not a preview") as error:
        offline_preview.requested({SWITCH: "true"}, dry_run=False)
    assert "docs/deploy.md#ci-preview-from-hosted-runners" in str(error.value)


@pytest.mark.parametrize("value", ["1", "True", "yes", ""])
def test_any_other_value_is_refused_naming_the_right_ones(value):
    with pytest.raises(ConfigError, match=f"{SWITCH}={value!r}: set it to true"):
        offline_preview.requested({SWITCH: value}, dry_run=True)


def test_the_environment_check_lists_it_with_the_providers_variables():
    """components/config.load's one check, every problem at once."""
    environ = {SWITCH: "true", "PULUMI_K8S_DELETE_UNREACHABLE": "true"}
    with pytest.raises(ConfigError) as error:
        unreachable.check_environment(environ)
    assert len(error.value.problems) == 2
    assert "PULUMI_K8S_DELETE_UNREACHABLE" in error.value.problems[0] and SWITCH in error.value.problems[1]


def test_synth_with_the_switch_exits_2_before_any_resource(monkeypatch, capsys):
    """`torchfleet synth` runs the program as `up` would (not a dry run): refused, naming the switch."""
    monkeypatch.setenv(SWITCH, "true")
    assert main(["synth", "--stack", "aws-usw2"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and SWITCH in err


def test_the_loopback_kubeconfig_names_a_refusing_port_and_no_credentials():
    port = offline_preview.refusing_port()
    assert offline_preview.refusing_port() == port  # held for the life of the program
    config = json.loads(offline_preview.loopback_kubeconfig(port))
    assert api_probe.server_of(json.dumps(config)) == ("127.0.0.1", port)
    assert config["users"] == [{"name": offline_preview.NAME, "user": {}}]
    with socket.socket() as s, pytest.raises(ConnectionRefusedError):
        s.settimeout(30)
        s.connect(("127.0.0.1", port))


def _provider_kubeconfig(stack: str) -> str:
    (provider,) = synth_stack(stack).of_type("pulumi:providers:kubernetes")
    assert provider.inputs["clusterIdentifier"], "the switch relies on a clusterIdentifier (DiffConfig)"
    return provider.inputs["kubeconfig"]


@pytest.mark.parametrize("stack", ["aws-usw2", "azure-eus", "gcp-usc1"])
def test_the_cloud_providers_get_the_loopback_kubeconfig_only_in_a_switched_preview(stack, monkeypatch):
    monkeypatch.delenv(SWITCH, raising=False)
    real = _provider_kubeconfig(stack)
    assert "127.0.0.1" not in real
    monkeypatch.setenv(SWITCH, "true")
    monkeypatch.setattr(offline_preview, "_dry_run", lambda: True)  # synth's mocks run as `up` does
    switched = _provider_kubeconfig(stack)
    assert switched == offline_preview.loopback_kubeconfig(offline_preview.refusing_port())


def test_the_local_stack_is_unchanged_by_it(monkeypatch):
    """Its provider has no kubeconfig input and no clusterIdentifier (the current context's cluster): the
    switch would be a replacement of every object there, so it does not apply (docs/deploy.md)."""
    monkeypatch.setenv(SWITCH, "true")
    monkeypatch.setattr(offline_preview, "_dry_run", lambda: True)
    (provider,) = synth_stack("local").of_type("pulumi:providers:kubernetes")
    assert "kubeconfig" not in provider.inputs or "127.0.0.1" not in str(provider.inputs["kubeconfig"])
