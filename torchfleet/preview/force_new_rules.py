"""Which input changes replace a resource: the providers' force-new rules as data, one file per provider.

`torchfleet plan` (torchfleet/preview/day2.py) decides update vs replace from these files, never from a
guess. Each file in torchfleet/preview/force_new/ is written from the provider's own source at the
version this project pins, and says so:

    source: {provider: pulumi-aws, version: 7.51.1, file: <the provider source the rows come from>}
    date: 2026-11-28                      # when the rows were read
    types:
      aws:eks/cluster:Cluster:            # the Pulumi type token the program registers
        forceNew: [name, vpcConfig.securityGroupIds]   # input paths, dotted; `[]` for a list's items
        source: <the file (and line) of this type's rule>

A path names Pulumi inputs (camelCase, as `torchfleet synth --json` prints them). A changed input
replaces the resource when it is, or lies under, one of its type's paths: `spec.selector` covers
`spec.selector.matchLabels["app"]`. `forceNew: []` says the type is updated in place whatever
changes (a row that was read), which is different from a type with no row (not known: `torchfleet
plan` says so rather than guess). Lists are transparent: `spec.containers.image` and
`spec.containers[].image` both name the image of every container (pulumi-kubernetes writes
`.spec.containers[*].image`, a Terraform schema nests the element's fields under the list's).

An optional `sets: [paths]` names the inputs the provider's schema declares as sets (Terraform's
schema.TypeSet): their order means nothing to the provider, so `torchfleet plan` compares them as sets
(a reordered set is no change) and shows what was added and removed, not list positions.

Types are unique across the files; the file a type belongs to follows its token (FILE_OF).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date
from functools import cache
from pathlib import Path
from typing import Any

from torchfleet.preview.stack_file import StackFileError, parse_yaml_text, read_text

FOLDER = Path(__file__).resolve().parent / "force_new"
# The rules file a type token belongs to, by its package (the token's first part).
FILE_OF = {
    "aws": "aws",
    "gcp": "gcp",
    "azure-native": "azure",
    "kubernetes": "kubernetes",
}
# Provider resources are "pulumi:providers:<package>"; the package's file holds their row.
PROVIDER_PREFIX = "pulumi:providers:"
FILE_KEYS = {"source", "date", "types"}
SOURCE_KEYS = {"provider", "version", "file"}
ROW_KEYS = {"forceNew", "source"}
OPTIONAL_ROW_KEYS = {"note", "sets"}
PATH = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*(?:\[\])*(?:(?:\.[A-Za-z_$][A-Za-z0-9_$]*)|\[\]|\[\"[^\"]+\"\])*$")
TOKEN = re.compile(r"^[a-z][a-z0-9-]*:[A-Za-z0-9./_-]*:[A-Za-z0-9_]+$")


class RulesError(ValueError):
    """A force-new file that does not follow the schema; each problem names the file and key."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class TypeRule:
    type: str
    force_new: tuple[str, ...]
    source: str  # the provider file of this type's rule
    file: str  # which rules file (aws, gcp, azure, kubernetes)
    note: str = ""
    sets: tuple[str, ...] = ()  # inputs the provider's schema declares as sets (TypeSet): order means nothing


@dataclass(frozen=True)
class RuleFile:
    name: str  # aws, gcp, azure, kubernetes
    provider: str
    version: str
    file: str
    date: str
    types: dict[str, TypeRule]


def file_of(type_token: str) -> str | None:
    """The rules file (aws, gcp, azure, kubernetes) a Pulumi type token belongs to, or None."""
    if type_token.startswith(PROVIDER_PREFIX):
        return FILE_OF.get(type_token.removeprefix(PROVIDER_PREFIX))
    return FILE_OF.get(type_token.split(":", 1)[0])


def check_document(document: Any, name: str) -> list[str]:
    """Every problem of one file's document (the schema above), each naming the file and the key."""
    where = f"force_new/{name}.yaml"
    if not isinstance(document, dict):
        return [f"{where}: expected a mapping with source:, date: and types:"]
    problems = [f"{where}: unknown key {k!r}; the keys are {sorted(FILE_KEYS)}" for k in document if k not in FILE_KEYS]
    problems += [f"{where}: {k}: required" for k in sorted(FILE_KEYS) if k not in document]
    source = document.get("source")
    if "source" in document:
        if not isinstance(source, dict) or set(source) != SOURCE_KEYS:
            problems.append(f"{where}: source: expected a mapping {{provider: <its package, e.g. pulumi-aws>, "
                            "version: <the pinned version>, file: <repository@commit and the files read>}, got "
                            f"{str(source)[:80]!r}")
        elif not all(isinstance(v, str) and v.strip() for v in source.values()):
            problems.append(f"{where}: source: provider, version and file must be non-empty text")
    if "date" in document:
        try:
            date.fromisoformat(str(document["date"]))
        except ValueError:
            problems.append(f"{where}: date: expected YYYY-MM-DD (when the rows were read), got {document['date']!r}")
    types = document.get("types")
    if "types" in document and not isinstance(types, dict):
        problems.append(f"{where}: types: expected a mapping of Pulumi type token -> {{forceNew, source}}")
        types = {}
    for token, row in (types or {}).items():
        at = f"{where}: types.{token}"
        if not isinstance(token, str) or not TOKEN.match(token):
            problems.append(f"{at}: not a Pulumi type token like aws:eks/cluster:Cluster")
        elif file_of(token) != name:
            problems.append(f"{at}: belongs in force_new/{file_of(token)}.yaml, not {name}.yaml")
        if not isinstance(row, dict):
            problems.append(f"{at}: expected {{forceNew: [paths], source: <file>}}")
            continue
        problems += [f"{at}: unknown key {k!r}; the keys are {sorted(ROW_KEYS | OPTIONAL_ROW_KEYS)}"
                     for k in row if k not in ROW_KEYS | OPTIONAL_ROW_KEYS]
        problems += [f"{at}: {k}: required" for k in sorted(ROW_KEYS) if k not in row]
        paths = row.get("forceNew")
        if "forceNew" in row and not isinstance(paths, list):
            problems.append(f"{at}: forceNew: expected a list of input paths ([] when nothing forces one)")
            paths = []
        for path in paths or []:
            if not isinstance(path, str) or not PATH.match(path):
                problems.append(f"{at}: forceNew: {path!r} is not an input path like vpcConfig.subnetIds or "
                                "spec.containers[].image")
        if len(set(map(str, paths or []))) != len(paths or []):
            problems.append(f"{at}: forceNew: a path appears twice")
        sets = row.get("sets", [])
        if not isinstance(sets, list) or not all(isinstance(x, str) and PATH.match(x) for x in sets):
            problems.append(f"{at}: sets: expected a list of input paths the provider declares as sets, like "
                            "vpcConfig.subnetIds")
        if "source" in row and not (isinstance(row["source"], str) and row["source"].strip()):
            problems.append(f"{at}: source: the provider file this row was read from")
    return problems


def read_file(path: Path) -> RuleFile:
    name = path.name.removesuffix(".yaml")
    try:
        document = parse_yaml_text(read_text(path, "a force-new rules file"), str(path))
    except StackFileError as error:
        raise RulesError(error.problems) from None
    if name not in FILE_OF.values():
        raise RulesError([f"force_new/{path.name}: unknown file; the files are "
                          f"{sorted(f'{n}.yaml' for n in set(FILE_OF.values()))}"])
    problems = check_document(document, name)
    if problems:
        raise RulesError(problems)
    source = document["source"]
    rows = {
        token: TypeRule(token, tuple(row["forceNew"]), row["source"], name, row.get("note", ""),
                        tuple(row.get("sets", [])))
        for token, row in document["types"].items()
    }
    return RuleFile(name, source["provider"], str(source["version"]), source["file"], str(document["date"]), rows)


@dataclass(frozen=True)
class Rules:
    files: dict[str, RuleFile]
    broken: dict[str, list[str]] = field(default_factory=dict)  # file name -> its schema problems

    def get(self, type_token: str) -> TypeRule | None:
        """The type's row; raises RulesError when its file does not follow the schema."""
        name = file_of(type_token) or ""
        if name in self.broken:
            raise RulesError(self.broken[name])
        rule_file = self.files.get(name)
        return rule_file.types.get(type_token) if rule_file else None

    def missing_file(self, type_token: str) -> str | None:
        """The file a type's row belongs in when that file does not exist yet, else None."""
        name = file_of(type_token)
        return f"force_new/{name}.yaml" if name and name not in self.files else None


def load(folder: Path = FOLDER, strict: bool = True) -> Rules:
    """Every rules file in the folder. Strict: raises RulesError naming each problem of every file;
    else a broken file is kept aside and only a type of that file raises (Rules.get)."""
    files, broken = {}, {}
    for path in sorted(folder.glob("*.yaml")):
        try:
            rule_file = read_file(path)
        except RulesError as error:
            broken[path.name.removesuffix(".yaml")] = error.problems
            continue
        files[rule_file.name] = rule_file
    if strict and broken:
        raise RulesError([p for problems in broken.values() for p in problems])
    return Rules(files, broken)


@cache
def shipped() -> Rules:
    """The rules files shipped with torchfleet (read once per process)."""
    return load(FOLDER, strict=False)


def normalize(path: str) -> str:
    """A path with its list indexes dropped (lists are transparent): `a.b[3].c`, `a.b[].c` -> `a.b.c`."""
    return re.sub(r"\[(?:\d+|\*)?\]", "", path)


def covers(rule_path: str, changed_path: str) -> bool:
    """Whether a change at ``changed_path`` is one ``rule_path`` names: the path itself or under it.

    A change at a path above the rule's (an object added or removed, an unknown value) covers it too:
    what lies under it changed as well.
    """
    rule, changed = normalize(rule_path), normalize(changed_path)
    return _under(changed, rule) or _under(rule, changed)


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + ".") or path.startswith(prefix + "[")
