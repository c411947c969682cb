"""`torchfleet`: one entry point; each subcommand lives in its own module with register().

Exit codes, the same for every command (issue 12): 0 done; 1 a failure outside the user's input
(the cloud, the cluster, policy violations, a demo node that died); 2 the input is wrong, with a
message naming the argument, the bad value and what would be right. Nothing a user can type ends
in a traceback: an unexpected error prints one line and where to report it, and the traceback
only with TORCHFLEET_DEBUG=1.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import importlib
import os
import sys
import traceback
from collections.abc import Sequence

from torchfleet import __version__, extras
from torchfleet.jobs.errors import EXIT_CLUSTER, JobError, Problems, UsageError
from torchfleet.user_files import relabel

# Each module exposes register(subparsers), which adds its command(s) and sets `func`.
COMMAND_MODULES = ["torchfleet.synth", "torchfleet.check", "torchfleet.plan", "torchfleet.gpus",
                   "torchfleet.jobs.commands", "torchfleet.jobs.inspect_commands", "torchfleet.jobs.logs_command",
                   "torchfleet.jobs.tensorboard", "torchfleet.jobs.results", "torchfleet.completion", "torchfleet.demo",
                   "torchfleet.data_upload", "torchfleet.run_local"]
DEBUG_ENV = "TORCHFLEET_DEBUG"
REPORT = (f"this is a bug in torchfleet: please report it in the project's issue tracker with the command line "
          f"and what {DEBUG_ENV}=1 prints")
EXIT_INTERRUPTED = 130
EXAMPLES = """examples:
  torchfleet synth --stack aws-usw2 --out manifests/     preview a stack offline
  torchfleet check --stack aws-usw2                      its guardrails and hourly cost
  torchfleet plan --stack aws-usw2 --set KEY=VALUE      what a config change would replace or refuse
  torchfleet gpus --cloud gcp                            GPUs, machines and list prices
  torchfleet submit resnet --stack aws-usw2 --gpu t4 --nodes 2:8 --image REPO:TAG -- python train.py
  torchfleet submit -f job.yaml                          the same, from a job file
  torchfleet status resnet --watch                       step, steps/s, ETA, world size, restarts
  torchfleet logs resnet --all-ranks -f
  torchfleet checkpoints resnet                          its checkpoints: step, size, age, verified
  torchfleet cp resnet:output ./resnet-output            download outputs (final model, TensorBoard events)
  torchfleet demo                                        an elastic job surviving a kill, on this machine
  torchfleet run --local --kill-at 60 -- train.py ARGS   your script on two local nodes, one killed at step 60

defaults: $TORCHFLEET_STACK, _IMAGE, _NAMESPACE, _CONTEXT, then ~/.config/torchfleet/config.yaml
completion: source <(torchfleet completion bash)"""


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Marks required options in help: argparse lists them among the optional ones (issue 13)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.required and action.option_strings and not text.startswith("required"):
            text = f"required: {text}"
        return text


class Parser(argparse.ArgumentParser):
    """argparse with abbreviations off (``--node`` was silently taken as ``--nodes``) and errors
    that say what would be right; argparse's own errors exit 2, as every input error does."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        if "required: NAME" in message:
            message += f"; the job name comes first, e.g. {self.prog} resnet50-a ..."
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="torchfleet",
        description="Elastic PyTorch training on spot GPUs: preview a stack offline, submit and watch jobs, "
                    "run the local demo.",
        epilog=EXAMPLES,
    )
    parser.add_argument("--version", action="version", version=f"torchfleet {__version__}")
    # Not required: a bare `torchfleet` prints the help (exit 0), as kubectl does (issue 13).
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")  # subparsers are Parsers too
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def split_command(argv: Sequence[str]) -> tuple[list[str], list[str] | None]:
    """(the options, the training command after the first ``--``, or None without one).

    argparse cannot read a subcommand's options on both sides of NAME and keep a ``--`` command
    apart (a REMAINDER positional swallows the options after NAME, and a missing NAME took the
    command's first word as the job name), so the command is cut off before argparse sees the line.
    """
    argv = list(argv)
    if "--" not in argv:
        return argv, None
    cut = argv.index("--")
    return argv[:cut], argv[cut + 1:]


def attach_param_values(head: Sequence[str]) -> list[str]:
    """``sweep --param --lr=0.1,0.01`` -> ``--param=--lr=0.1,0.01``: argparse takes a token that starts
    with '-' for an option, so --param got no value and the line was refused (issue 22)."""
    out: list[str] = []
    for token in head:
        if out and out[-1] == "--param" and token.startswith("-") and "=" in token:
            out[-1] = f"--param={token}"
        else:
            out.append(token)
    return out


def did_you_mean(sub: argparse.ArgumentParser, extras: Sequence[str]) -> str:
    """"; did you mean --gpu?" for each unknown option close to one of the command's own (a misspelling,
    --kill_at for --kill-at, a plural: --gpus, --node): abbreviations stay refused (issue 12), so the
    message names the option meant instead of only pointing at --help."""
    options = [o for a in sub._actions for o in a.option_strings if o.startswith("--")]
    hints = []
    for extra in extras:
        word = extra.split("=", 1)[0]
        if not word.startswith("--") or word in options:
            continue
        dashed = word.replace("_", "-")
        close = [dashed] if dashed in options else difflib.get_close_matches(word, options, n=1, cutoff=0.75)
        if close:
            hints.append(f"{word}: did you mean {close[0]}?")
    return f"; {'; '.join(hints)}" if hints else ""


def _subparser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[command]


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """The namespace for ``argv``, its training command in ``training_command``; exits 2 on bad input."""
    parser = build_parser()
    for i, token in enumerate(argv):
        try:
            token.encode("utf-8")
        except UnicodeEncodeError:
            parser.error(f"argument {i + 1} ({token!r}) is not valid UTF-8 text")
        if "\0" in token:  # a shell cannot pass one; a caller of main() can
            parser.error(f"argument {i + 1} ({token!r}) contains a NUL character")
    head, command = split_command(argv)
    head = attach_param_values(head)
    args, extras = parser.parse_known_args(head)
    if args.command is None:
        if argv:
            parser.error(f"give a command first, e.g. torchfleet submit ...; got: {' '.join(argv)[:200]}")
        parser.print_help()
        sys.exit(0)
    sub = _subparser(parser, args.command)
    takes_command = sub.get_default("takes_command")
    if extras:
        # a script among them: the user forgot the -- before it (issue 32: its own flags then read as
        # unknown options of ours, and the hint pointed at --help)
        script = next((e for e in extras if e.endswith(".py") or e in ("python", "python3")), None)
        if takes_command and script is not None:
            words = extras[extras.index(script):]
            hint = f"; the training command goes after --: torchfleet {args.command} [options] -- {' '.join(words)}"
        elif any(e.startswith("-") for e in extras):
            hint = (f"{did_you_mean(sub, extras)}; `{sub.prog} --help` lists the options, spelled in full "
                    "(abbreviations are not accepted)")
        else:
            hint = "; the training command goes after --, e.g. -- python train.py" if takes_command else ""
        sub.error(f"unrecognized arguments: {' '.join(extras)}{hint}")
    _check_values(sub, args)
    if not takes_command and command is not None:
        sub.error(f"takes no command after --, got: -- {' '.join(command)}")
    args.parser = sub
    args.argv_head = list(head)
    args.value_sources = {}  # flag -> where its value came from instead (a job file, a variable, the config)
    if takes_command:
        args.training_command = command
    return args


def _prepare(args: argparse.Namespace) -> None:
    """Fill what the line left out (job file, variables, config: in run(), so a bad one exits under
    the contract), then require NAME where the command takes one."""
    sub = getattr(args, "parser", None)
    if sub is None:  # a namespace built by hand (tests)
        return
    file_command = _defaults(args, sub, args.argv_head)
    if sub.get_default("takes_command"):
        if args.name is None:
            sub.error("the following arguments are required: NAME")
        if args.training_command is None:
            args.training_command = file_command


def _given(head: Sequence[str]) -> set[str]:
    """The options the command line itself set: parsed again with every default suppressed."""
    parser = build_parser()
    for action in _subparser(parser, parser.parse_known_args(head)[0].command)._actions:
        action.default = argparse.SUPPRESS
    return set(vars(parser.parse_known_args(head)[0]))


def _defaults(args: argparse.Namespace, sub: argparse.ArgumentParser, head: Sequence[str]) -> list[str] | None:
    """Fill what the line left out: a job file (-f) first, then TORCHFLEET_* variables, then the
    config file (torchfleet/config.py); returns the job file's training command, if it has one."""
    from torchfleet import config

    given = _given(head)
    file_command = None
    if getattr(args, "file", None) is not None:
        from torchfleet.jobs import job_file

        file_command = job_file.apply(args, sub, given, args.value_sources)
    config.apply(args, given, args.value_sources)
    return file_command


def _check_values(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """argparse 3.11 drops a value of exactly ``--`` (``--context=--``, ``-n--``) and stores an empty
    list where one string belongs; say so instead of failing later on the list."""
    for action in parser._actions:
        value = getattr(args, action.dest, None)
        items = value if isinstance(action, argparse._AppendAction) and isinstance(value, list) else [value]
        if action.option_strings and action.nargs is None and any(isinstance(item, list) for item in items):
            parser.error(f"argument {'/'.join(action.option_strings)}: expected a value, got '--' "
                         "(which only separates the training command)")


def _one_line(error: BaseException, limit: int = 300) -> str:
    text = " ".join(f"{type(error).__name__}: {error}".split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def run(args: argparse.Namespace) -> int:
    """Run the parsed command under the one exit-code contract."""
    try:
        _prepare(args)
        return args.func(args)
    except JobError as error:
        error = _with_file_problems(args, error)
        # A value from a job file, a variable or the config file is named as such, not as its flag.
        message = relabel(str(error), getattr(args, "value_sources", {}))
        if message.startswith("no cluster to talk to") and hasattr(args, "local_run"):  # checkpoints, cp
            message += "; a local run's folder: --local torchfleet-runs/NAME"  # issue 32
        print(f"torchfleet {args.command}: {message}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:  # Ctrl-C ends `logs -f`; no traceback for that
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `torchfleet synth ... | head`: the reader left; nothing to say
        _silence_stdout()
        return EXIT_CLUSTER
    except ModuleNotFoundError as error:  # an extra this install lacks (extras.py), else a bug like any other
        missing = extras.hint(error.name)
        if missing is None:
            return _unexpected(args, error)
        print(f"torchfleet {args.command}: {missing}", file=sys.stderr)
        return EXIT_CLUSTER
    except Exception as error:  # the last line of defence: one line, not a traceback
        return _unexpected(args, error)


def _with_file_problems(args: argparse.Namespace, error: JobError) -> JobError:
    """A job file's problems (job_file.apply notes them without raising) first, with the error's own when it
    is the input's too: whatever stopped the command, a run lists every problem of the file (issue 32)."""
    file_problems = getattr(args, "file_problems", None)
    if not file_problems:
        return error
    found = Problems()
    for problem in file_problems:
        found.add(problem)
    if isinstance(error, UsageError):
        found.add_error(error)
    try:
        found.raise_any()
    except UsageError as combined:
        return combined
    return error


def _unexpected(args: argparse.Namespace, error: Exception) -> int:
    if os.environ.get(DEBUG_ENV, "") not in ("", "0"):
        traceback.print_exc()
    print(f"torchfleet {args.command}: unexpected error ({_one_line(error)}); {REPORT}", file=sys.stderr)
    return EXIT_CLUSTER


def _silence_stdout() -> None:
    # Python flushes stdout at exit and would print a BrokenPipeError of its own.
    with contextlib.suppress(OSError, ValueError):  # ValueError: not a real file (captured in tests)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def main(argv: Sequence[str] | None = None) -> int:
    return run(parse(sys.argv[1:] if argv is None else argv))

if __name__ == "__main__":
    sys.exit(main())
