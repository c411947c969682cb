"""One way to name a stack everywhere (issue 13): a name (``aws-usw2``) or a path to its file
(``stacks/Pulumi.aws-usw2.yaml``, any path), accepted by ``--stack`` on every command.

A name is looked up in the checkout's stacks/ (Pulumi.yaml: ``stackConfigDir: stacks``); anything
with a '/' or ending in .yaml/.yml is a path (a .yml one is refused: Pulumi never reads it here).
``submit --stack stacks/Pulumi.aws-usw2.yaml`` used to look for ``stacks/Pulumi.stacks/Pulumi.aws-usw2.yaml.yaml``.
"""

from __future__ import annotations

import re
from pathlib import Path

from torchfleet.jobs.errors import UsageError

REPO = Path(__file__).resolve().parents[1]
STACKS_DIR = REPO / "stacks"
EXAMPLE = "aws-usw2 or stacks/Pulumi.aws-usw2.yaml"
# Pulumi's stack names: letters, digits, '-', '_' and '.'.
_STACK_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")


def is_path(value: str) -> bool:
    return "/" in value or value.endswith((".yaml", ".yml")) or value.startswith("~")


def known_stacks(stacks_dir: Path = STACKS_DIR) -> str:
    found = Path(stacks_dir).glob("Pulumi.*.yaml")
    return ", ".join(sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in found)) or "none"


def stack_name(path: Path) -> str:
    """The Pulumi stack a file configures: Pulumi.<stack>.yaml."""
    return path.name.removeprefix("Pulumi.").removesuffix(".yaml").removesuffix(".yml")


def resolve(value: str, stacks_dir: Path = STACKS_DIR, flag: str = "--stack") -> Path:
    """The stack file ``value`` names; a UsageError naming ``flag``, the value and the choices."""
    if not value or not value.strip():
        raise UsageError(f"{flag}: empty; give a stack name or file, e.g. {EXAMPLE}")
    if is_path(value):
        path = Path(value).expanduser()
        if path.is_dir():
            raise UsageError(f"{flag}: {value} is a folder; give a stack file in it, e.g. {EXAMPLE}")
        if not path.is_file():
            what = "is not a regular file" if path.exists() else "does not exist"
            raise UsageError(f"{flag}: {value} {what}; give a stack name ({known_stacks(stacks_dir)}) or a "
                             f"stack file, e.g. {EXAMPLE}")
        if path.suffix == ".yml":
            # Issue 23 (a doubt, decided): the Pulumi CLI names a stack's settings file after the
            # project file, Pulumi.<stack> plus its extension (pulumi/pulumi sdk/go/common/workspace/
            # paths.go DetectProjectStackPath), and this project's is Pulumi.yaml: `pulumi up` never
            # reads a .yml file, so synth and check would preview settings no deploy uses.
            raise UsageError(f"{flag}: {value} ends in .yml, which the Pulumi CLI never reads for this project "
                             f"(its Pulumi.yaml makes stack files Pulumi.<stack>.yaml); rename it to "
                             f"{path.with_suffix('.yaml').name}")
        return path
    if not _STACK_NAME.fullmatch(value) or value.startswith("."):
        raise UsageError(f"{flag}: {value!r} is not a stack name (letters, digits, '-', '_', '.') or a path; "
                         f"stacks: {known_stacks(stacks_dir)}")
    path = Path(stacks_dir) / f"Pulumi.{value}.yaml"
    if not path.is_file():
        raise UsageError(f"{flag}: no stack {value!r} ({path} does not exist); stacks: {known_stacks(stacks_dir)}; "
                         "or give the path of a stack file")
    return path
