"""Every stack's Kubernetes provider leaves deleteUnreachable and skipUpdateUnreachable unset, and a program
run with either PULUMI_K8S_* variable set is refused (components/clouds/unreachable.py; what the real
engine does with each is tests/controlplane/test_pulumi_unreachable.py)."""

from __future__ import annotations

import pytest

from components.clouds import unreachable
from components.spec import ConfigError
from tests.harness import STACKS, synth_stack
from torchfleet.cli import main

OPTIONS = {"deleteUnreachable", "skipUpdateUnreachable"}


@pytest.mark.parametrize("stack", STACKS)
def test_no_provider_keeps_an_unreachable_option(stack, monkeypatch):
    for name in unreachable.VARIABLES:
        monkeypatch.delenv(name, raising=False)
    providers = synth_stack(stack).of_type("pulumi:providers:kubernetes")
    assert providers
    for p in providers:
        assert not OPTIONS & set(p.inputs), f"{p.name} sets {OPTIONS & set(p.inputs)}"


@pytest.mark.parametrize("variable", unreachable.VARIABLES)
@pytest.mark.parametrize("value", ["true", "false"])
def test_a_set_variable_is_refused_before_any_resource(variable, value, monkeypatch, capsys):
    """Regression: without the refusal, the Python SDK copies the variable into the provider's inputs
    (pulumi_kubernetes/provider.py), e.g. deleteUnreachable: true for every later refresh."""
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError, match=variable):
        unreachable.check_environment()
    assert main(["synth", "--stack", "local"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and variable in err and "pulumi destroy" in err
