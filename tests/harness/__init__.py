"""Test harness: the recording mock monitor and synth runner (shared with `torchfleet synth`).

    from tests.harness import synth_stack, synth_config, STACKS
    result = synth_stack("aws-usw2")          # a stacks/ file
    result = synth_config("t", {"torchfleet:cloud": "aws", ...})   # ad-hoc config (values as YAML would give)
    result.of_type("aws:eks/nodeGroup:NodeGroup"); result.one(type, name); r.inputs; r.options["protect"]

synth() runs with preview=False and returns only after every output resolved, so an assert on
`result` fails the test when the program is wrong.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torchfleet.preview.runner import SynthResult, _engine_value, synth, synth_file

REPO = Path(__file__).resolve().parents[2]
STACKS_DIR = REPO / "stacks"
STACKS = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in STACKS_DIR.glob("Pulumi.*.yaml"))


def synth_stack(stack: str) -> SynthResult:
    return synth_file(STACKS_DIR / f"Pulumi.{stack}.yaml")


def synth_config(stack: str, config: dict[str, Any]) -> SynthResult:
    """Config values as a stack YAML would hold them (lists and dicts are fine)."""
    return synth(stack, {k: _engine_value(v) for k, v in config.items()})


__all__ = ["REPO", "STACKS", "STACKS_DIR", "SynthResult", "synth_config", "synth_stack"]
