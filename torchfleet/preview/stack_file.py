"""Read a Pulumi.<stack>.yaml safely: one function every offline reader uses (synth, check, --stack).

`yaml.safe_load` is safe from code execution, not from the file itself: a 1 KB alias bomb
expands into billions of nodes (MemoryError after 36 s at 2.9 GB when the config was turned into
JSON; a smaller one printed a 310 KB error), a duplicate key silently keeps the last value, a
list or a string where the mapping belongs crashed the reader (issue 12). So this loader:

- reads at most MAX_BYTES, and only UTF-8 text;
- composes the YAML and counts the nodes it would expand to, aliases included, refusing more
  than MAX_NODES before anything is constructed (an alias bomb never grows);
- refuses duplicate keys at any depth, naming the key and both lines;
- keeps dates and times as the strings they are written as (the Pulumi CLI does the same), so
  every value can be passed on as config;
- checks the shape Pulumi requires: a mapping with a `config:` mapping whose keys are
  "<namespace>:<name>".

Under `pulumi up` the Pulumi CLI parses the stack file itself; components/spec/ then validates
the values either way.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import yaml

from components.spec import ConfigError

MAX_BYTES = 256 * 1024  # the repository's stack files are under 2 KB
MAX_NODES = 20_000  # nodes after alias expansion; a stack file has a few hundred
MAX_DEPTH = 50
# Top-level keys of a Pulumi stack settings file (pulumi/pulumi sdk/go/common/workspace/project.go ProjectStack).
STACK_FILE_KEYS = ("config", "secretsprovider", "encryptedkey", "encryptionsalt", "environment")


class StackFileError(ConfigError):
    """The stack file cannot be read as a Pulumi stack file; each problem names the file and a fix."""


def load_stack_file(path: Path | str) -> dict[str, Any]:
    """The stack file's `config:` mapping ({"aws:region": "us-west-2", ...}); raises StackFileError."""
    path = Path(path)
    document = parse_stack_text(_read(path), str(path))
    return document.get("config") or {}


def parse_stack_text(text: str, where: str = "<stack file>") -> dict[str, Any]:
    """The whole stack file document, validated for shape; raises StackFileError."""
    return _check_shape(parse_yaml_text(text, where), where)


def parse_yaml_text(text: str, where: str, loader_class: type[yaml.SafeLoader] | None = None) -> Any:
    """Any YAML document under this module's budget (size, aliases, depth, duplicate keys), without a
    shape check: the torchfleet config file and job files are read with it too (issue 13)."""
    try:
        loader = (loader_class or BudgetLoader)(text)
        loader.name = where  # what marks and the duplicate-key message name
        try:
            node = loader.get_single_node()
            if node is None:
                return {}  # an empty file: no config, as Pulumi reads it
            _check_budget(node, where)
            document = loader.construct_document(node)
        finally:
            loader.dispose()
    except StackFileError:
        raise
    except yaml.YAMLError as error:
        raise StackFileError([f"{where}: not valid YAML: {_short(error)}; fix the line it names"]) from None
    except ValueError as error:  # a number of more than 4300 digits (Python's int() limit)
        raise StackFileError([f"{where}: {_short_repr(str(error), 80)}; no config value is that long"]) from None
    except RecursionError:
        raise StackFileError([f"{where}: nested too deeply; at most {MAX_DEPTH} levels"]) from None
    return document


def read_text(path: Path, what: str = "stack files are stacks/Pulumi.<stack>.yaml") -> str:
    """A small UTF-8 text file, at most MAX_BYTES; ``what`` says what the file should be."""
    return _read(path, what)


def _read(path: Path, what: str = "stack files are stacks/Pulumi.<stack>.yaml") -> str:
    if not path.is_file():
        missing = "not a regular file" if path.exists() else "no such file"
        raise StackFileError([f"{path}: {missing}; {what}"])
    try:
        with path.open("rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError as error:
        raise StackFileError([f"{path}: cannot be read ({error.strerror}); check its permissions"]) from None
    if len(data) > MAX_BYTES:
        raise StackFileError([f"{path}: larger than {MAX_BYTES // 1024} KiB; a stack file holds a few keys"])
    if b"\0" in data:
        raise StackFileError([f"{path}: a binary file, not YAML text; give a Pulumi.<stack>.yaml"])
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise StackFileError([f"{path}: not UTF-8 text (byte {error.start}); save the file as UTF-8"]) from None


class BudgetLoader(yaml.SafeLoader):
    """SafeLoader without timestamps (kept as written) and refusing duplicate keys."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:  # a list or mapping as a key
                raise yaml.constructor.ConstructorError(
                    None, None, f"a key must be a plain value, got {key_node.id}", key_node.start_mark
                ) from None
            if first is not None:
                raise StackFileError(
                    [
                        f"{self.name}: key {key!r} appears twice (lines {first.start_mark.line + 1} and "
                        f"{key_node.start_mark.line + 1}); YAML keeps only the last, so delete one"
                    ]
                )
            seen[key] = key_node
        return super().construct_mapping(node, deep=deep)


# No config value is a number of more than 20 digits (int64 has 19): such a number stays its text,
# and components/spec names the key it was given for (issue 23: a 5,000-digit maxNodes stopped
# the reader on Python's 4,300-digit int() limit, naming only the file).
LONGEST_NUMBER = 20


def _construct_int(loader: BudgetLoader, node: yaml.ScalarNode) -> int | str:
    text = loader.construct_scalar(node)
    if len(text.replace("_", "").lstrip("+-")) > LONGEST_NUMBER:
        return text
    return yaml.SafeLoader.construct_yaml_int(loader, node)


BudgetLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)

# Dates stay strings: "2025-01-01" is what Pulumi passes to the program.
BudgetLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _check_budget(root: yaml.Node, where: str) -> None:
    """Refuse a document that expands to more than MAX_NODES nodes or MAX_DEPTH levels.

    Aliases share their anchor's node, so the composed graph stays small while its expansion
    (what construction, JSON and any printout produce) can be exponential: count the expansion
    with a memo per node, without building it.
    """
    sizes: dict[int, int] = {}
    in_progress: set[int] = set()

    def size(node: yaml.Node, depth: int) -> int:
        if depth > MAX_DEPTH:
            raise StackFileError([f"{where}: nested more than {MAX_DEPTH} levels deep; a stack file is shallow"])
        if id(node) in sizes:
            return sizes[id(node)]
        if id(node) in in_progress:
            raise StackFileError([f"{where}: an alias refers to the node that contains it; remove the alias"])
        in_progress.add(id(node))
        total = 1
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [child for pair in node.value for child in pair]
        else:
            children = []
        for child in children:
            total += size(child, depth + 1)
            if total > MAX_NODES:
                raise StackFileError(
                    [
                        f"{where}: expands to more than {MAX_NODES} values (YAML aliases repeat what they "
                        "point to); a stack file needs a few hundred: write the values out, without nested aliases"
                    ]
                )
        in_progress.discard(id(node))
        sizes[id(node)] = total
        return total

    size(root, 0)


def _check_shape(document: Any, where: str) -> dict[str, Any]:
    if not isinstance(document, dict):
        raise StackFileError(
            [f"{where}: expected a mapping with a 'config:' key, got {_kind(document)}; see stacks/ for examples"]
        )
    problems = []
    for key in document:
        if key not in STACK_FILE_KEYS:
            close = difflib.get_close_matches(str(key), STACK_FILE_KEYS, n=1)
            hint = f"did you mean '{close[0]}'?" if close else f"valid keys: {', '.join(STACK_FILE_KEYS)}"
            problems.append(f"{where}: unknown top-level key {_short_repr(key)}; {hint}")
    config = document.get("config")
    if config is not None and not isinstance(config, dict):
        problems.append(
            f"{where}: 'config' must be a mapping of 'namespace:key: value' lines, got {_kind(config)}; "
            "e.g. config: {torchfleet:cloud: aws}"
        )
    elif config:
        for key in config:
            if not isinstance(key, str) or key.count(":") != 1 or not all(key.split(":")):
                problems.append(
                    f"config.{_short_repr(key)}: a config key is 'namespace:name' (e.g. torchfleet:cloud, "
                    "aws:region); write it with its namespace"
                )
        for key, value in config.items():
            if (bad := _non_config_value(value)) is not None:
                problems.append(
                    f"{key}: {bad} cannot be a config value; write text, numbers, true/false, lists or mappings"
                )
    if problems:
        raise StackFileError(problems)
    return document


def _non_config_value(value: Any) -> str | None:
    """The first value Pulumi config cannot carry (YAML's !!binary and !!set), described, or None."""
    if isinstance(value, dict):
        return next((bad for v in value.values() if (bad := _non_config_value(v)) is not None), None)
    if isinstance(value, list):
        return next((bad for v in value if (bad := _non_config_value(v)) is not None), None)
    if value is None or isinstance(value, str | int | float | bool):
        return None
    return f"a YAML {type(value).__name__} ({_short_repr(value)})"


def _kind(value: Any) -> str:
    names = {list: "a list", str: "a string", int: "a number", float: "a number", bool: "true/false"}
    return f"{names.get(type(value), type(value).__name__)} ({_short_repr(value)})"


def _short_repr(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _short(error: yaml.YAMLError) -> str:
    """The parser's message on one line, without the quoted source (it can be any size)."""
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    context = getattr(error, "context", None)
    text = f"{context}, {problem}" if context else problem
    text = text if len(text) <= 160 else text[:157] + "..."
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    return f"{text}{where}"
