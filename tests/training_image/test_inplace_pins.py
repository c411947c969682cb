"""The image installs the torchft the tests ran (issue 14): training-image/requirements.txt pins exactly
pyproject's ``inplace`` extra, and that extra keeps protobuf below 7 for the Pulumi SDK beside it."""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _pins(lines) -> dict[str, str]:
    out = {}
    for line in lines:
        requirement = line.split("#", 1)[0].strip()
        if "==" in requirement:
            name, version = requirement.split("==", 1)
            out[name.strip().lower()] = version.strip()
    return out


def test_the_image_pins_the_inplace_extra():
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["inplace"]
    wanted = _pins(e for e in extra if not e.startswith("torchfleet["))
    image = _pins((ROOT / "training-image" / "requirements.txt").read_text().splitlines())
    assert wanted and {name: image.get(name) for name in wanted} == wanted


def test_the_installed_environment_holds_torchft_and_a_protobuf_the_pulumi_sdk_accepts():
    # the reason for pinning OpenTelemetry 1.45.2: newer releases want protobuf 7, which the Pulumi SDK refuses
    assert importlib.metadata.version("torchft") == "0.2.0"
    assert int(importlib.metadata.version("protobuf").split(".")[0]) < 7
    assert importlib.metadata.version("pulumi")
