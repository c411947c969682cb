"""The example stacks' placeholders (components/placeholders.py): found on the shipped stacks, each rule on its
own, values that are someone's pass; a real `pulumi up` refuses before any resource, a preview only warns."""

from __future__ import annotations

import re

import pulumi
import pytest
import yaml

from components import placeholders
from components.spec import ConfigError
from tests.harness import STACKS, STACKS_DIR, synth_config, synth_stack
from tests.harness.placeholders import OWN, replaced

# The table of components/placeholders.py's docstring, row by row.
SHIPPED = {
    ("aws-usw2", "torchfleet:network.publicAccessCidrs[0]", "203.0.113.0/24", "rfc5737"),
    ("azure-eus", "torchfleet:network.publicAccessCidrs[0]", "203.0.113.0/24", "rfc5737"),
    ("azure-eus", "torchfleet:admins[0]", "User:00000000-0000-0000-0000-000000000000", "zero-guid"),
    ("gcp-usc1", "gcp:project", "my-ml-project", "example-project"),
}


def config_of(stack: str) -> dict:
    return yaml.safe_load((STACKS_DIR / f"Pulumi.{stack}.yaml").read_text())["config"]


def test_the_shipped_stacks_placeholders_are_the_documented_table():
    found = {(s, p.key, p.value, p.rule) for s in STACKS for p in placeholders.find(synth_stack(s).spec)}
    assert found == SHIPPED
    doc = placeholders.__doc__
    for stack, key, value, rule in SHIPPED:
        assert f"| {stack} | {key} | {value} | {rule} |" in doc


def test_every_rule_names_its_source():
    for rule in placeholders.RULES.values():
        assert rule.why and (rule.source.startswith("https://") or rule.source.startswith("stacks/"))
    assert set(placeholders.DOCUMENTATION_NETWORKS.values()) <= set(placeholders.RULES)


@pytest.mark.parametrize(("cidr", "rule"), [
    ("192.0.2.0/24", "rfc5737"), ("198.51.100.7/32", "rfc5737"), ("203.0.113.0/25", "rfc5737"),
    ("2001:db8::/48", "rfc3849"), ("3fff:1::/32", "rfc9637"),
    ("127.0.0.1/32", None), ("10.0.0.0/8", None), ("0.0.0.0/0", None),  # a range holding one is not one
    ("203.0.112.0/23", None), ("2001:db9::/32", None),
])
def test_a_documentation_range_and_only_one(cidr, rule):
    assert placeholders._network_rule(cidr) == rule


@pytest.mark.parametrize(("cloud", "identity", "rule"), [
    ("azure", "User:00000000-0000-0000-0000-000000000000", "zero-guid"),
    ("azure", "Group:00000000-0000-0000-0000-000000000000", "zero-guid"),
    ("azure", "ServicePrincipal:00000000-0000-0000-0000-000000000000", "zero-guid"),
    ("azure", "User:5b0d3c3e-8f0a-4a53-9c4e-2d7f6a1b9e21", None),
    ("aws", "arn:aws:iam::123456789012:role/platform", "example-account"),
    ("aws", "arn:aws:iam::111122223333:user/alice", "example-account"),
    ("aws", "arn:aws:iam::000000000000:role/x", "example-account"),
    ("aws", "arn:aws:iam::402948117651:role/platform", None),
    ("gcp", "user:alice@example.com", "example-domain"),
    ("gcp", "serviceAccount:ci@tests.example", "example-domain"),
    ("gcp", "user:alice@mail.example.org", "example-domain"),
    ("gcp", "user:alice@examples.com", None),
    ("gcp", "user:alice@corp.com", None),
])
def test_an_identity_that_is_nobody_s_and_only_one(cloud, identity, rule):
    hit = placeholders._identity(identity, cloud)
    assert (hit[0] if hit else None) == rule


@pytest.mark.parametrize("stack", [s for s in STACKS if s != "local"])
def test_the_example_with_its_placeholders_replaced_has_none(stack):
    assert placeholders.find(synth_config(stack, replaced(stack)).spec) == []


def test_each_placeholder_of_a_list_is_named_by_its_index():
    config = {**replaced("azure-eus"), "torchfleet:admins": [OWN["azure-eus"]["torchfleet:admins"][0],
                                                             "Group:00000000-0000-0000-0000-000000000000"]}
    config["torchfleet:network"] = {**config["torchfleet:network"],
                                    "publicAccessCidrs": ["127.0.0.1/32", "198.51.100.0/24"]}
    found = placeholders.find(synth_config("azure-eus", config).spec)
    assert [(p.key, p.value) for p in found] == [
        ("torchfleet:network.publicAccessCidrs[1]", "198.51.100.0/24"),
        ("torchfleet:admins[1]", "Group:00000000-0000-0000-0000-000000000000"),
    ]
    assert found[1].command("azure-eus") == (
        "pulumi config set --path 'torchfleet:admins[1]' \"Group:$(az ad group show --group '<your group>' "
        "--query id -o tsv)\" --stack azure-eus")


def as_up(monkeypatch):
    """A real `pulumi up`: the program's is_dry_run() is false (the mocks run with preview=False) and the
    monitor is the engine's, not torchfleet's mocks."""
    monkeypatch.setattr(placeholders, "mocked", lambda: False)


@pytest.mark.parametrize("stack", [s for s in STACKS if s != "local"])
def test_a_real_up_is_refused_before_any_resource_naming_each_key_and_command(stack, monkeypatch):
    as_up(monkeypatch)
    expected = {p for s, p, _, _ in SHIPPED if s == stack}
    with pytest.raises(ConfigError) as raised:
        synth_stack(stack)
    keys = {problem.split(": ", 1)[0] for problem in raised.value.problems}
    assert keys == expected
    for problem in raised.value.problems:
        assert re.search(r"replace it: pulumi config set( --path)? '[^']+' .+ --stack " + stack, problem), problem
    # Before any resource: the refusal is raised by config.load(), which runs before the program registers one
    # (torchfleet/preview/runner.py, __main__.py); the same config with its own values goes through.
    assert synth_config(stack, replaced(stack)).resources


def test_the_program_is_refused_where_it_loads_its_config(monkeypatch):
    """Regression: the refusal is in components/config.load(), which __main__.py calls before TrainingPlatform."""
    source = (STACKS_DIR.parent / "__main__.py").read_text()
    assert source.index("config.load()") < source.index("TrainingPlatform(")
    as_up(monkeypatch)
    with pytest.raises(ConfigError, match=r"torchfleet:admins\[0\]: User:0{8}-"):
        synth_stack("azure-eus")


def test_a_preview_only_warns(monkeypatch):
    warned: list[str] = []
    as_up(monkeypatch)
    monkeypatch.setattr(pulumi.runtime, "is_dry_run", lambda: True)
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *a, **k: warned.append(message))
    result = synth_stack("azure-eus")
    assert result.resources
    assert [w.split(": ", 2)[1] for w in warned] == ["torchfleet:network.publicAccessCidrs[0]", "torchfleet:admins[0]"]
    assert all(w.startswith("placeholder: ") and "`pulumi up` refuses it" in w for w in warned)


def test_torchfleet_s_own_synth_neither_refuses_nor_warns_through_the_engine(monkeypatch):
    warned: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *a, **k: warned.append(message))
    assert synth_stack("aws-usw2").resources
    assert warned == []  # synth, plan and check print their own
