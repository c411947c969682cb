"""Pulumi.yaml's declared config keys against every stack file, as the Pulumi CLI checks them.

Regression (issue 19): Pulumi.yaml declared `zones`, `admins` and `deployerPrincipalType` with no
default, which the CLI takes as required of every stack, so the real `pulumi up --stack local`
stopped before the program ran: "error: validating stack config: Stack 'local' is missing
configuration values 'admins', 'deployerPrincipalType' and 'zones'". The mocks and `torchfleet
synth` never read that rule; this checks it offline, and tests/controlplane/test_pulumi_local.py
runs the CLI itself.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
PROJECT = yaml.safe_load((REPO / "Pulumi.yaml").read_text())
STACK_FILES = sorted((REPO / PROJECT["stackConfigDir"]).glob("Pulumi.*.yaml"))


def missing_keys(project: dict, stack_config: dict) -> list[str]:
    """The keys the CLI reports missing: declared in the project's namespace with neither a default
    nor a value, and not set by the stack (pulumi pkg/workspace/config.go, the loop that builds
    missingConfigurationKeys)."""
    name = project["name"]
    missing = []
    for key, declared in (project.get("config") or {}).items():
        full = key if ":" in key else f"{name}:{key}"
        if full.split(":", 1)[0] != name:
            continue
        declared = declared if isinstance(declared, dict) else {"value": declared}
        if "default" not in declared and "value" not in declared and full not in stack_config:
            missing.append(key)
    return missing


def test_the_rule_finds_the_keys_the_cli_named():
    # The declarations as they were before the fix, and the local stack's config.
    before = {
        "name": "torchfleet",
        "config": {
            "cloud": {"type": "string"},
            "kubernetesVersion": {"type": "string", "default": "1.35"},
            "zones": {"type": "array", "items": {"type": "string"}},
            "admins": {"type": "array", "items": {"type": "string"}},
            "deployerPrincipalType": {"type": "string"},
        },
    }
    local = {"torchfleet:cloud": "local", "torchfleet:training": {}}
    assert missing_keys(before, local) == ["zones", "admins", "deployerPrincipalType"]


@pytest.mark.parametrize("stack_file", STACK_FILES, ids=lambda p: p.name)
def test_every_stack_sets_every_key_the_project_requires(stack_file):
    stack_config = yaml.safe_load(stack_file.read_text())["config"]
    assert missing_keys(PROJECT, stack_config) == []
