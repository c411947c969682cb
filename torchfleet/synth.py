"""`torchfleet synth`: preview a stack offline: a summary of what it would create, or every resource as JSON
(``--json``, what scripts, CI and the tests read)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

from components import placeholders
from components.spec import ConfigError
from torchfleet import output_paths, stack_ref
from torchfleet.jobs.errors import JobError, UsageError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "synth",
        help="run the program for a stack under mocks (no cloud, no Pulumi CLI) and summarize its resources",
        description="A summary by default (resources by type, pools, what destroy keeps); --json prints every "
                    "resource. Exit codes: 0 ok, 2 invalid stack config (problems on stderr, nothing on stdout).",
    )
    stack_option(p)
    p.add_argument("--json", action="store_true",
                   help="print every resource with its inputs and options, the outputs and the destroy plan as "
                        "JSON (for scripts) instead of the summary")
    p.add_argument("--out", type=Path,
                   help="also write the Kubernetes objects the program declares as YAML, one file per object "
                        "(not the Helm releases: Helm renders them at deploy time); the files of the previous "
                        "synth into the same folder are replaced, nothing else in it is touched")
    p.set_defaults(func=run)


def stack_option(p: argparse.ArgumentParser) -> None:
    """--stack as synth and check take it: required, but a default may come from $TORCHFLEET_STACK
    or the config file (torchfleet/config.py fills ``args.stack``), as for submit."""
    p.add_argument("--stack", "--stack-file", dest="stack", default=None, metavar="STACK",
                   help=f"required: a stack's name or its file, e.g. {stack_ref.EXAMPLE} (the same as submit's "
                        "--stack; default: $TORCHFLEET_STACK, then stack: in the config file)")


def required_stack(args: argparse.Namespace) -> tuple[str, str]:
    """(the stack, where it came from: --stack, TORCHFLEET_STACK or the config file's key)."""
    if not args.stack:
        raise UsageError(f"--stack: required: a stack's name or file, e.g. --stack {stack_ref.EXAMPLE} "
                         "(or set TORCHFLEET_STACK, or stack: in ~/.config/torchfleet/config.yaml)")
    return args.stack, (getattr(args, "value_sources", None) or {}).get("--stack", "--stack/--stack-file")


def synth_or_report(stack_file: str | Path, flag: str = "--stack/--stack-file"):
    """The stack synthesized under mocks, or None after printing why it cannot be (exit 2).

    Shared by `synth` and `check`: a missing file or an invalid config is the user's to fix.
    """
    from torchfleet.preview.runner import synth_file

    try:  # a name in stacks/ or any path (issue 13: one way to name a stack everywhere)
        stack_file = stack_ref.resolve(str(stack_file), flag=flag)
    except JobError as error:
        print(error, file=sys.stderr)
        return None
    try:
        return synth_file(stack_file)
    except ConfigError as error:
        # a stack file that came from $TORCHFLEET_STACK or the config file: say so, or the user looks
        # for a --stack that was never typed (issue 23)
        print(error if flag.startswith("--stack") else f"{flag} {stack_file}: {error}", file=sys.stderr)
        return None


def run(args: argparse.Namespace) -> int:
    if args.out is not None:
        output_paths.check_folder("--out", args.out)  # before the synth, not after it
    result = synth_or_report(*required_stack(args))
    if result is None:
        return 2
    for line in placeholders.warnings(result.spec):  # a warning: `pulumi up` refuses them (issue 29)
        print(f"warning: {line}", file=sys.stderr)
    if args.out is not None:
        written = write_manifests(result.kubernetes_objects(), args.out)
        print(f"--out: wrote {len(written)} Kubernetes objects to {args.out}", file=sys.stderr)
        for r in not_written(result.resources):
            print(f"--out: not written: {r.type} {r.name} (Helm renders it at deploy time; its chart, version and "
                  "values are in the JSON)", file=sys.stderr)
    if args.json:
        json.dump(result.to_json(), sys.stdout, indent=2, sort_keys=False, default=str)
        sys.stdout.write("\n")
    else:
        from torchfleet import synth_summary

        print(synth_summary.render(result, args.stack))
    return 0


def manifest_filename(obj: dict) -> str:
    meta = obj.get("metadata") or {}
    parts = [obj["kind"].lower(), meta.get("namespace"), meta.get("name")]
    return "-".join(p for p in parts if p) + ".yaml"


def not_written(resources: list) -> list:
    """The Kubernetes resources `--out` cannot write as objects: Helm releases (their chart is
    rendered by Helm on the cluster, not by the program)."""
    return [r for r in resources if r.custom and r.type.startswith("kubernetes:") and "apiVersion" not in r.inputs]


# The files the last `--out` wrote into a folder, so the next one replaces them (a reused folder
# kept another stack's objects, issue 13) without touching anything it did not write.
INDEX = ".torchfleet-synth-files"


def _previous_files(out: Path) -> list[Path]:
    index = out / INDEX
    if not index.is_file():
        return []
    names = [line.strip() for line in index.read_text().splitlines() if line.strip() and not line.startswith("#")]
    # Only plain names of the shape manifest_filename gives: an edited index cannot reach outside.
    return [out / n for n in names if "/" not in n and "\\" not in n and n.endswith(".yaml") and not n.startswith(".")]


def write_manifests(objects: list[dict], out: Path) -> list[Path]:
    out = output_paths.make_folder("--out", out)
    try:
        for path in _previous_files(out):
            if path.is_file() and not path.is_symlink():
                path.unlink()
    except OSError as error:
        raise output_paths.failed_write("--out", out, error) from None
    written = []
    for obj in objects:
        path = out / manifest_filename(obj)
        try:
            path.write_text(yaml.safe_dump(obj, sort_keys=False))
        except OSError as error:
            raise output_paths.failed_write("--out", path, error) from None
        written.append(path)
    try:
        (out / INDEX).write_text("# written by torchfleet synth --out; the next one replaces these files\n"
                                 + "".join(f"{p.name}\n" for p in written))
    except OSError as error:
        raise output_paths.failed_write("--out", out / INDEX, error) from None
    return written
