"""Reading the YAML files a user writes for the CLI (the config file, job files) and saying where a
value came from when it is wrong.

The files are read by the stack files' loader (torchfleet/preview/stack_file.py: at most 256 KiB,
UTF-8, duplicate keys and alias bombs refused), with one change: YAML 1.1 reads ``2:8`` as the
base-60 number 128, and ``nodes: 2:8`` must stay the text the flag takes.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from torchfleet.jobs.errors import Problems, UsageError
from torchfleet.preview.stack_file import BudgetLoader, StackFileError, parse_yaml_text, read_text


class PlainLoader(BudgetLoader):
    """The budgeted loader without base-60 numbers: ``2:8`` stays text."""


def _resolvers() -> dict[str, list]:
    out: dict[str, list] = {}
    for first, resolvers in BudgetLoader.yaml_implicit_resolvers.items():
        # PyYAML's int and float patterns include base 60: dropped, and added back below without it
        out[first] = [(tag, regexp) for tag, regexp in resolvers
                      if tag not in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")]
    return out


PlainLoader.yaml_implicit_resolvers = _resolvers()
PlainLoader.add_implicit_resolver(
    "tag:yaml.org,2002:int",
    re.compile(r"""^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+)$""", re.X),
    list("-+0123456789"),
)
PlainLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?
                    |[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$""", re.X),
    list("-+0123456789."),
)


def load_mapping(path: Path, what: str) -> dict[str, Any]:
    """The file's top-level mapping (an empty file: {}); a UsageError naming the file otherwise."""
    try:
        document = parse_yaml_text(read_text(path, what), str(path), PlainLoader)
    except StackFileError as error:
        raise UsageError("; ".join(error.problems)) from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise UsageError(f"{path}: expected a mapping of keys to values ({what}), got {type(document).__name__}")
    return document


def check_keys(document: Mapping[Any, Any], known: Iterable[str], where: str) -> None:
    known = list(known)
    problems = []
    for key in document:  # every unknown key at once (issue 32: a second typo surfaced only after the first)
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f"did you mean '{close[0]}'?" if close else f"the keys are: {', '.join(known)}"
            problems.append(f"{where}: unknown key {str(key)[:60]!r}; {hint}")
    if problems:
        found = Problems()
        for problem in problems:
            found.add(problem)
        found.raise_any()  # its list kept, so a caller collecting problems lists each (issue 32)


def text_value(value: Any, where: str, *, numbers: bool = True) -> str:
    """A scalar as the text its flag would take (true/false as YAML writes them)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str) or (numbers and isinstance(value, int | float)):
        return str(value)
    raise UsageError(f"{where}: expected {'text or a number' if numbers else 'text'}, got "
                     f"{'nothing' if value is None else type(value).__name__} ({str(value)[:60]!r})")


def relabel(message: str, sources: Mapping[str, str]) -> str:
    """Put where a value came from in place of the flag that would have carried it: ``--nodes: ...``
    becomes ``job.yaml: nodes: ...`` when the job file set it (issue 13)."""
    for flag, label in sources.items():
        message = re.sub(rf"(^|\n  ){re.escape(flag)}(?![\w-])", lambda m, label=label: m.group(1) + label, message)
    return message
