"""Every `torchfleet` command the docs show parses, even those test_readme.py cannot run (issue 32).

test_readme.py runs each offline command and skips, with a reason, those that need a cluster, real
processes or a job's folder; a skipped line could name a flag that does not exist and no test saw it.
Here each of them goes through the command line's own parser (torchfleet.cli.parse: argparse, the `--`
split, the value checks), and the commands written inline in the prose too, with every `--flag` the
same paragraph attributes to them (issue 32: README said `torchfleet demo`'s `--kill-at` changes the run;
demo has no such flag, `run --local` has).
"""

from __future__ import annotations

import argparse
import re
import shlex

import pytest
from elastic_trainer.train_config import TrainConfig

from tests.docs.test_readme import COMMANDS, DOCS, RUN
from torchfleet import cli

_ENV = re.compile(r"^(\w+=\S*\s+)+")
_PLACEHOLDER = {"NAME": "spiral-a", "STEP": "60", "DIR": "torchfleet-runs/spiral-a", "N": "2"}


def _words(line: str) -> list[str] | None:
    """The argv after `torchfleet` (a leading `.venv/bin/` and VAR=value assignments allowed), else None."""
    words = shlex.split(_ENV.sub("", line), comments=True)
    if not words or words[0].rpartition("/")[2] != "torchfleet":
        return None
    return [_PLACEHOLDER.get(w, w) for w in words[1:]]


def _parses(argv: list[str]) -> str | None:
    """None when cli.parse accepts ``argv``, else what it said."""
    try:
        cli.parse(argv)
    except SystemExit as exited:
        return None if exited.code == 0 else f"exit {exited.code}"
    return None


NOT_RUN = [c for c in COMMANDS if c not in RUN and _words(c.line) is not None and " ... " not in f" {c.line} "]


def test_some_skipped_commands_are_checked_here():
    assert {_words(c.line)[0] for c in NOT_RUN} >= {"run", "logs", "cp", "checkpoints"}


@pytest.mark.parametrize("command", NOT_RUN, ids=[c.id for c in NOT_RUN])
def test_a_command_not_run_still_parses(command, capsys):
    said = _parses(_words(command.line))
    assert said is None, f"{command.section}: {command.line}\n{said}\n{capsys.readouterr().err}"


def _paragraphs() -> list[tuple[str, str]]:
    found = []
    for page, text in DOCS.items():
        prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
        found.extend((page, p) for p in re.split(r"\n\s*\n", prose))
    return found


def _inline(paragraph: str) -> tuple[list[list[str]], list[str]]:
    """For a paragraph about a command (its first code span is `torchfleet COMMAND ...`): the `torchfleet ...`
    spans as argv, and its bare `--flag` spans. Other paragraphs: ([], [])."""
    spans = re.findall(r"`([^`\n]+)`", paragraph)
    if not spans or not spans[0].startswith("torchfleet "):
        return [], []
    commands = [w for s in spans if s.startswith("torchfleet ") and (w := _words(s))]
    flags = [s.split("=")[0].split()[0] for s in spans if re.fullmatch(r"--[a-z][-a-z0-9]*(?:[ =]\S+)?", s)]
    return commands, flags


KNOWN = set(cli.build_parser()._subparsers._group_actions[0].choices)
INLINE = [(page, p) for page, p in _paragraphs() if any(argv[0] in KNOWN for argv in _inline(p)[0])]


def _options(command: str) -> set[str]:
    sub = cli._subparser(cli.build_parser(), command)
    return {option for action in sub._actions for option in action.option_strings}


def _script_options() -> set[str]:
    """The trainer's own flags (a job's script takes them: `--checkpoint-dir`, `--total-steps`)."""
    parser = argparse.ArgumentParser()
    TrainConfig.add_arguments(parser)
    return {option for action in parser._actions for option in action.option_strings}


def test_the_readmes_demo_paragraph_is_checked():
    assert any("torchfleet demo" in p for page, p in INLINE if page == "README.md")


@pytest.mark.parametrize(("page", "paragraph"), INLINE, ids=[f"{p}:{i}" for i, (p, _) in enumerate(INLINE)])
def test_the_flags_a_paragraph_gives_a_command_exist(page, paragraph):
    commands, flags = _inline(paragraph)
    options = set().union(_script_options(), *(_options(argv[0]) for argv in commands if argv[0] in KNOWN))
    wrong = [f for f in flags if f not in options]
    assert not wrong, f"{page}: {wrong} are options of none of the commands the paragraph names:\n{paragraph}"


KILLING_RUNS = [c for c in COMMANDS if (_words(c.line) or [""])[0] == "run"
                and {"--kill-at", "--kill-every"} & set(_words(c.line))]


def test_some_pages_show_a_run_with_a_kill():
    assert {c.section.partition(":")[0] for c in KILLING_RUNS} >= {"README.md", "docs/solo.md"}, KILLING_RUNS


@pytest.mark.parametrize("command", KILLING_RUNS, ids=[c.id for c in KILLING_RUNS])
def test_a_shown_run_with_a_kill_of_the_template_paces_its_steps(command):
    """The template's steps take milliseconds: a kill waits for every node to train together, and without
    --step-delay-s the run could end first (issue 32: docs/solo.md's command lacked the README's
    --step-delay-s=0.1; the reviewer's run of it ended with no kill)."""
    words = _words(command.line)
    script = words[words.index("--") + 1]
    if script.rpartition("/")[2] in ("train.py", "my_train.py"):  # the template, or the user's copy of it
        assert any(w.startswith("--step-delay-s") for w in words), f"{command.section}: {command.line}"


def _venvs_made(page: str) -> set[str]:
    made = set(re.findall(r"-m venv (\S+)", DOCS[page]))
    return made | ({".venv"} if re.search(r"bash \.ci/setup", DOCS[page]) else set())


@pytest.mark.parametrize("page", [p for p in DOCS if len(_venvs_made(p)) == 1])
def test_a_page_that_makes_one_venv_runs_its_commands_from_it(page):
    """docs/solo.md installed into ~/.venvs/torchfleet and then ran .venv/bin/torchfleet, a venv the page never
    made (a reviewer's walk): a page that makes one venv names no other's bin/ in its commands."""
    [venv] = _venvs_made(page)
    used = {m.group(1) for c in COMMANDS if c.section.startswith(f"{page}:")
            for m in re.finditer(r"(?:^|\s)(\S*?)/bin/(?:torchfleet|python|pip)\b", c.line)}
    assert used <= {venv}, f"{page} makes {venv} and runs {sorted(used - {venv})}/bin/..."
