"""`torchfleet`: one entry point; each subcommand lives in its own module with register()."""

from __future__ import annotations

import argparse
import importlib
import sys

# Each module exposes register(subparsers), which adds its command(s) and sets `func`.
COMMAND_MODULES = ["torchfleet.synth", "torchfleet.check", "torchfleet.jobs.commands", "torchfleet.demo"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="torchfleet",
        description="Elastic PyTorch training on spot GPUs: preview a stack offline, run the local demo.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
