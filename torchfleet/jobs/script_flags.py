"""A sweep's ``--param`` keys checked against the flags the script itself accepts (issue 32).

`sweep --param image_size=64,128` submitted N jobs whose every pod then failed on argparse's
"unrecognized arguments: --image_size=64" (the script's flag is ``--image-size``). The script's options
are read from its source, never by running it (the laptop may have no torch, and the script's imports
run code): each ``add_argument("--name", ...)`` with literal names, plus the trainer's own flags when it
calls ``TrainConfig.add_arguments`` (training-image/examples/train.py does). A script whose options
cannot all be read so (a name computed at run time, ``parse_known_args``, no argparse at all, Hydra)
is not checked.
"""

from __future__ import annotations

import argparse
import ast
import difflib
from collections.abc import Sequence
from pathlib import Path

from torchfleet.jobs.errors import UsageError


def script_options(script: Path) -> set[str] | None:
    """The script's --options, or None when they cannot all be known from its source."""
    try:
        tree = ast.parse(script.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None
    options: set[str] = set()
    parsers = False
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr == "parse_known_args":
            return None  # the rest goes elsewhere (Hydra, a second parser)
        if node.func.attr == "add_arguments" and ast.unparse(node.func.value).endswith("TrainConfig"):
            options |= _trainer_options()
            parsers = True
        elif node.func.attr == "add_argument":
            parsers = True
            names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            if len(names) != len(node.args):
                return None  # a name computed at run time
            options |= {n for n in names if n.startswith("-")}
    return options if parsers else None


def _trainer_options() -> set[str]:
    from elastic_trainer.train_config import TrainConfig  # torch-free (it ships with the command line)

    parser = argparse.ArgumentParser()
    TrainConfig.add_arguments(parser)
    return {option for action in parser._actions for option in action.option_strings}


def check_params(keys: Sequence[str], script: Path, shown: str) -> None:
    """UsageError naming each ``--param`` key SCRIPT would refuse, with the flag it probably meant."""
    options = script_options(script)
    if options is None:
        return
    problems = []
    for key in keys:
        # argparse accepts a unique prefix of a long option (allow_abbrev, its default)
        if key in options or len([o for o in options if o.startswith(key)]) == 1:
            continue
        near = difflib.get_close_matches(key.replace("_", "-"), sorted(options), n=1, cutoff=0.6)
        hint = f"; did you mean {near[0].lstrip('-')} ({near[0]})?" if near else ""
        problems.append(f"--param {key.lstrip('-')}: {shown} has no option {key}{hint}")
    if problems:
        raise UsageError("\n  ".join(problems) if len(problems) == 1 else
                         f"{len(problems)} problems:\n  " + "\n  ".join(problems))
