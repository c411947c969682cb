"""Job files: ``torchfleet submit -f job.yaml`` (and ``sweep -f``), a job to keep in git and submit
again, as SkyPilot's task YAML and dstack's .dstack.yml are (issue 13).

The keys are the flags' names without the dashes, plus ``name``, ``command`` (a list, or one line
split as a shell would) and, for sweeps, ``params`` (KEY: [values]) and ``param-style`` (argparse, the
default, or hydra: how the values reach the script). Flags given on the command line
override the file. Values are checked by the same code as the flags, and a wrong one is reported
with the flag's message naming the file and key instead (``job.yaml: nodes: ...``).
``submit --dry-run -o job`` writes the file the flags describe; submitting it gives the same manifest.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any

import yaml

from torchfleet.jobs.errors import Problems, UsageError
from torchfleet.user_files import check_keys, load_mapping, text_value

WHAT = "a job file holds name, command and the submit flags' values, e.g. nodes: 2:8"
# The submit/sweep flags a job file may set: every one that describes the job and where it goes.
# Not --dry-run, --yes or -o (what this run does), nor -f itself.
FLAG_KEYS = ("stack", "gpu", "nodes", "gpus-per-node", "cpu", "cpus", "memory", "allow-egress", "image", "zone",
             "env", "mount", "run-as-user", "cloud", "kubeconfig", "context", "namespace", "operator", "recovery",
             "workdir", "dataset", "max-duration", "max-cost")
SWEEP_KEYS = ("params", "param-style")  # sweep's own flags
KEYS = ("name", *FLAG_KEYS, "command", *SWEEP_KEYS)
_INTS = ("gpus-per-node", "run-as-user")
_LISTS = ("allow-egress",)


def _dest(key: str) -> str:
    return key.replace("-", "_")


def _action(parser: argparse.ArgumentParser, key: str) -> argparse.Action:
    return next(a for a in parser._actions if a.dest == _dest(key))


def apply(args: argparse.Namespace, parser: argparse.ArgumentParser, given: set[str],
          sources: dict[str, str]) -> list[str] | None:
    """Fill what the command line left out from ``args.file``; returns the file's command, if any."""
    path = Path(args.file).expanduser()
    document = load_mapping(path, WHAT)
    # Every problem of the file at once (docs/jobs.md, "Job files"): unknown keys, then each value's
    problems = Problems()
    problems.check(check_keys, document, KEYS, str(path))
    sweep = hasattr(args, "param")
    for key in SWEEP_KEYS:
        if key in document and not sweep:
            problems.add(f"{path}: {key}: only a sweep takes {key}; run `torchfleet sweep -f {args.file}`")
    for key, value in document.items():
        where = f"{path}: {key}"
        if key == "command" or key not in KEYS or (key in SWEEP_KEYS and not sweep):
            continue
        dest = "param" if key == "params" else _dest(key)
        if dest in given:
            continue  # the command line wins
        flag = "--param" if key == "params" else "NAME" if key == "name" else f"--{key}"
        checked = problems.check(_value, parser, key, value, where)
        if checked is None:
            continue
        value = checked
        if key == "workdir":  # relative to the job file, which lives with the code (workdir: .)
            value = path.parent / value
        setattr(args, dest, value)
        given.add(dest)
        sources[flag] = where
    command = problems.check(_command, document["command"], f"{path}: command") if "command" in document else None
    # Not raised here: submit and sweep list them with the flags' own problems (commands._request), and
    # torchfleet.cli puts them first in any error before that, so one run says all (issue 32: a file with
    # two misspelled keys, an image :latest and --gpu t44 took four runs).
    args.file_problems = list(problems.messages)
    return command


def _value(parser: argparse.ArgumentParser, key: str, value: Any, where: str) -> Any:
    if key == "params":
        if not isinstance(value, dict) or not value:
            raise UsageError(f"{where}: expected a mapping of KEY: [values], e.g. params: {{lr: [0.1, 0.01]}}")
        out = []
        for name, values in value.items():
            items = values if isinstance(values, list) else [values]
            out.append(f"{text_value(name, where)}=" + ",".join(text_value(v, f"{where}.{name}") for v in items))
        return out
    if key == "env":
        if isinstance(value, dict):
            return [f"{text_value(k, where)}={text_value(v, f'{where}.{k}')}" for k, v in value.items()]
        if isinstance(value, list):
            return [text_value(v, where) for v in value]
        raise UsageError(f"{where}: expected a mapping of NAME: value, e.g. env: {{WANDB_MODE: offline}}")
    if key in _LISTS:
        return [text_value(v, where) for v in (value if isinstance(value, list) else [value])]
    if key == "cpu":
        if not isinstance(value, bool):
            raise UsageError(f"{where}: expected true or false, got {value!r}")
        return value
    if key in _INTS:
        if isinstance(value, bool) or not isinstance(value, int):
            raise UsageError(f"{where}: expected a whole number, got {value!r}")
        return value
    text = text_value(value, where)
    action = _action(parser, key)
    if action.choices and text not in action.choices:
        raise UsageError(f"{where}: one of {', '.join(map(str, action.choices))}, got {text!r}")
    return Path(text) if key in ("kubeconfig", "workdir") else text


def _command(value: Any, where: str) -> list[str]:
    if isinstance(value, str):
        try:
            return shlex.split(value)
        except ValueError as error:
            raise UsageError(f"{where}: {error} (a line is split as a shell would; or give a list)") from None
    if isinstance(value, list) and value:
        return [text_value(v, where) for v in value]
    raise UsageError(f"{where}: expected the training command as a list, e.g. [python, train.py, --lr, '0.1']")


def dump(args: argparse.Namespace, parser: argparse.ArgumentParser, command: list[str]) -> str:
    """The job file for these options: every key that differs from the built-in default."""
    doc: dict[str, Any] = {"name": args.name}
    for key in FLAG_KEYS:
        value = getattr(args, _dest(key), None)
        if value in (None, [], False) or value == _action(parser, key).default:
            continue
        if key == "env":
            value = dict(item.partition("=")[::2] for item in value)
        doc[key] = str(value) if isinstance(value, Path) else value
    if getattr(args, "param", None):
        doc["params"] = {k: v.split(",") for k, _, v in (p.partition("=") for p in args.param)}
    if getattr(args, "param", None) and args.param_style != _action(parser, "param-style").default:
        doc["param-style"] = args.param_style
    doc["command"] = list(command)
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, allow_unicode=True)
