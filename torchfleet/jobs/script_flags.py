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


# The types a value can be checked against without running the script: argparse calls type(value)
_LITERAL_TYPES = {"int": int, "float": float}


def option_values(script: Path) -> dict[str, tuple[object, tuple | None, bool]]:
    """For each --option of the script whose values can be read from its source: (type, choices, takes a
    value), type a callable or None (any string). The trainer's own options come from its parser."""
    try:
        tree = ast.parse(script.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return {}
    found: dict[str, tuple[object, tuple | None, bool]] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr == "add_arguments" and ast.unparse(node.func.value).endswith("TrainConfig"):
            found.update(_trainer_values())
        elif node.func.attr == "add_argument":
            names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            words = {k.arg: k.value for k in node.keywords if k.arg}
            kind = words.get("type")
            converter = _LITERAL_TYPES.get(kind.id) if isinstance(kind, ast.Name) else None
            if kind is not None and converter is None:
                converter = _UNKNOWN
            choices = None
            if isinstance(words.get("choices"), ast.List | ast.Tuple):
                try:
                    choices = tuple(ast.literal_eval(words["choices"]))
                except ValueError:
                    choices = None
            action = words.get("action")
            flag = isinstance(action, ast.Constant) and action.value in ("store_true", "store_false", "count",
                                                                          "store_const", "help", "version")
            for name in names:
                if name.startswith("--"):
                    found[name] = (converter, choices, not flag)
    return found


_UNKNOWN = object()  # a type argparse would call that cannot be read here (a function of the script's)


def _trainer_values() -> dict[str, tuple[object, tuple | None, bool]]:
    from elastic_trainer.train_config import TrainConfig

    parser = argparse.ArgumentParser()
    TrainConfig.add_arguments(parser)
    return {option: (action.type, tuple(action.choices) if action.choices else None, action.nargs != 0)
            for action in parser._actions for option in action.option_strings if option.startswith("--")}


def check_values(params: Sequence[tuple[str, Sequence[str]]], script: Path, shown: str) -> None:
    """UsageError naming each ``--param`` value SCRIPT's argparse would refuse (issue 32: ``--param lr=abc``
    failed in the script after 22 s, exit 1): a type of int or float (the trainer's own options: their
    types), a literal ``choices``, or a value given to a flag that takes none."""
    options = option_values(script)
    problems = []
    for key, values in params:
        matches = [key] if key in options else [o for o in options if o.startswith(key)]
        if len(matches) != 1:
            continue  # unknown to check_params, or not readable
        option = matches[0]
        convert, choices, takes_value = options[option]
        if not takes_value:
            problems.append(f"--param {key.lstrip('-')}: {shown}'s {option} is a flag that takes no value "
                            f"(argparse refuses {option}={values[0]})")
            continue
        for value in values:
            try:
                typed = convert(value) if callable(convert) else value
            except (TypeError, ValueError, argparse.ArgumentTypeError) as exc:
                kind = getattr(convert, "__name__", "value")
                why = f"its type={kind}" if kind in _LITERAL_TYPES else str(exc)
                problems.append(f"--param {key.lstrip('-')}: {value!r} is not a valid {kind} for {shown}'s "
                                f"{option} ({why})")
                continue
            if choices is not None and typed not in choices:
                problems.append(f"--param {key.lstrip('-')}: {value!r} is not one of {shown}'s {option} "
                                f"choices: {', '.join(map(str, choices))}")
    if problems:
        raise UsageError("\n  ".join(problems) if len(problems) == 1 else
                         f"{len(problems)} problems:\n  " + "\n  ".join(problems))


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
