"""Defaults for the options a researcher gives every time: from ``TORCHFLEET_*`` variables and
``~/.config/torchfleet/config.yaml`` ($XDG_CONFIG_HOME honoured), as kubectl has its kubeconfig
and SkyPilot its config (issue 13).

Precedence: a flag on the command line > a job file's key (``-f``) > the environment variable >
the config file > the built-in default. The config file::

    stack: aws-usw2            # a name, or a stack file's path (relative to this file's folder)
    image: registry.example.com/team/train:1.4.2
    namespace: research
    context: team-cluster
    reader_image: registry.example.com/mirror/python:3.13.14-slim-trixie@sha256:...  # checkpoints, cp

A wrong key or a value of the wrong type is exit 2 naming the file and the key; a wrong value is
reported with the same message as the flag, naming where it came from instead of the flag.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from pathlib import Path

from torchfleet import stack_ref
from torchfleet.jobs.errors import UsageError
from torchfleet.user_files import check_keys, load_mapping, text_value

# key in the file -> (argparse dest, environment variable)
KEYS = {
    "stack": ("stack", "TORCHFLEET_STACK"),
    "image": ("image", "TORCHFLEET_IMAGE"),
    "namespace": ("namespace", "TORCHFLEET_NAMESPACE"),
    "context": ("context", "TORCHFLEET_CONTEXT"),
    # checkpoints/cp's reader pod: the platform's pinned image, or a mirror of it (reader_pod.READER_IMAGE)
    "reader_image": ("reader_image", "TORCHFLEET_READER_IMAGE"),
}
WHAT = "the torchfleet config file holds stack, image, namespace, context and reader_image"


def config_path(env: Mapping[str, str] | None = None) -> Path:
    """$XDG_CONFIG_HOME/torchfleet/config.yaml, else ~/.config/torchfleet/config.yaml (the XDG base
    directory specification: an unset or empty XDG_CONFIG_HOME means ~/.config)."""
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME") or str(Path("~/.config").expanduser())
    return Path(base) / "torchfleet" / "config.yaml"


def read(path: Path) -> dict[str, str]:
    """The config file's values ({} without one); a UsageError naming the file and the key."""
    if not path.exists():
        return {}
    document = load_mapping(path, WHAT)
    check_keys(document, KEYS, str(path))
    values = {}
    for key, value in document.items():
        text = text_value(value, f"{path}: {key}", numbers=False)
        if not text.strip():
            raise UsageError(f"{path}: {key}: empty; remove the line or give a value")
        if key == "stack" and stack_ref.is_path(text) and not Path(text).expanduser().is_absolute():
            text = str(path.parent / text)  # a relative stack file is relative to the config file
        values[key] = text
    return values


def apply(args: argparse.Namespace, given: set[str], sources: dict[str, str],
          env: Mapping[str, str] | None = None) -> None:
    """Fill the options this command has and the line left out: variable first, then the file."""
    env = os.environ if env is None else env
    wanted = {key: dest for key, (dest, _) in KEYS.items()
              if hasattr(args, dest) and dest not in given and getattr(args, dest) is None}
    if not wanted:
        return
    from_file: dict[str, str] | None = None
    for key, dest in wanted.items():
        variable = KEYS[key][1]
        if env.get(variable):
            setattr(args, dest, env[variable])
            sources[f"--{dest.replace('_', '-')}"] = variable
            continue
        if from_file is None:
            path = config_path(env)
            from_file = read(path)
        if key in from_file:
            setattr(args, dest, from_file[key])
            sources[f"--{dest.replace('_', '-')}"] = f"{config_path(env)}: {key}"
