"""The example stacks with their placeholders replaced by values that are someone's (components/placeholders.py),
as a user's stack is after the `pulumi config set` lines `torchfleet check` prints. Data only: nothing dials
127.0.0.1/32, and the ids are made up, not a documentation example.

    config = replaced("azure-eus")           # the example's config, its placeholders replaced
    path = replaced_file("aws-usw2", tmp_path)  # the same as a stack file (Pulumi.aws-usw2.yaml)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.harness import STACKS_DIR

OWN_CIDRS = ["127.0.0.1/32"]
# Per stack: the keys a user replaces, with a value that is theirs.
OWN: dict[str, dict[str, Any]] = {
    "aws-usw2": {"torchfleet:network": {"publicAccessCidrs": OWN_CIDRS}},
    "azure-eus": {"torchfleet:network": {"publicAccessCidrs": OWN_CIDRS},
                  "torchfleet:admins": ["User:5b0d3c3e-8f0a-4a53-9c4e-2d7f6a1b9e21"]},
    "gcp-usc1": {"gcp:project": "torchfleet-tests-4821"},
    "local": {},
}


def replaced(stack: str) -> dict[str, Any]:
    config = yaml.safe_load((STACKS_DIR / f"Pulumi.{stack}.yaml").read_text())["config"]
    for key, value in OWN[stack].items():
        config[key] = {**config[key], **value} if isinstance(value, dict) else value
    return config


def replaced_file(stack: str, folder: Path) -> Path:
    path = folder / f"Pulumi.{stack}.yaml"
    path.write_text(yaml.safe_dump({"config": replaced(stack)}, sort_keys=False))
    return path
