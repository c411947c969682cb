"""Kubectl's conventions (issue 13): --version, help on a bare `torchfleet` (exit 0) with examples,
required options marked in help, shell completion generated from the parser (run in a real bash),
and defaults from TORCHFLEET_* variables and ~/.config/torchfleet/config.yaml with the precedence
flag > job file > variable > config file > built-in."""

import argparse
import json
import shutil
import subprocess
from unittest import mock

import pytest
import yaml

from torchfleet import __version__, config
from torchfleet.cli import build_parser, main

IMAGE = "registry.example.com/team/train:1.4.2"
VARIABLES = ("TORCHFLEET_STACK", "TORCHFLEET_IMAGE", "TORCHFLEET_NAMESPACE", "TORCHFLEET_CONTEXT")


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    for var in VARIABLES:
        monkeypatch.delenv(var, raising=False)
    with mock.patch("torchfleet.jobs.kubeconfig.connect", side_effect=AssertionError("connected")), \
         mock.patch("torchfleet.jobs.target.read_stack_outputs", side_effect=AssertionError("pulumi")):
        yield tmp_path


def run(argv, capsys):
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = exit_.code
    out, err = capsys.readouterr()
    return code, out, err


def write_config(root, text):
    path = root / "xdg" / "torchfleet" / "config.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_version(capsys):
    assert run(["--version"], capsys)[:2] == (0, f"torchfleet {__version__}\n")


def test_bare_torchfleet_prints_help_with_examples(capsys):
    code, out, err = run([], capsys)
    assert (code, err) == (0, "")
    assert "usage: torchfleet" in out and "examples:" in out and "torchfleet submit -f job.yaml" in out
    for command in ("submit", "status", "tensorboard", "completion", "delete"):
        assert f"\n    {command}" in out


def test_an_option_without_a_command_is_a_usage_error(capsys):
    code, _, err = run(["--kubeconfig"], capsys)
    assert code == 2 and "give a command first" in err


# submit's --image is optional since issue 32 (the published training image by default)
@pytest.mark.parametrize(("command", "flag"), [("synth", "--stack STACK"), ("check", "--stack STACK")])
def test_help_marks_required_options(command, flag, capsys):
    code, out, _ = run([command, "--help"], capsys)
    assert code == 0
    line = out[out.index(f"  {flag}"):].split("\n", 2)
    assert "required" in " ".join(line[:2]), line


def _complete(script, *words):
    """What bash offers after `torchfleet WORDS`, with the generated script sourced."""
    line = " ".join(["torchfleet", *words])
    program = (f"{script}\nCOMP_WORDS=({line}); COMP_CWORD={len(words)}; _torchfleet; "
               'printf "%s\\n" "${COMPREPLY[@]}"')
    proc = subprocess.run(["bash", "--norc", "-c", program], capture_output=True, text=True, timeout=30, check=True)
    return set(proc.stdout.split())


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_completion_knows_commands_options_and_choices(capsys):
    code, script, _ = run(["completion", "bash"], capsys)
    assert code == 0 and "complete -o default -F _torchfleet torchfleet" in script
    assert _complete(script, "s") == {"synth", "submit", "sweep", "status"}
    assert _complete(script, "st") == {"status"}
    assert {"--watch", "--output", "--shared-dir"} <= _complete(script, "status", "x", "--")
    assert _complete(script, "list", "-o", "") == {"table", "wide", "json", "yaml"}
    assert {"aws-usw2", "local"} <= _complete(script, "submit", "--stack", "")
    assert _complete(script, "completion", "") == {"bash", "zsh"}
    # every command's every option, from the parser itself
    sub = next(a for a in build_parser()._actions if hasattr(a, "choices") and isinstance(a.choices, dict))
    for name, parser in sub.choices.items():
        flags = {f for a in parser._actions for f in a.option_strings
                 if f.startswith("--") and a.help != argparse.SUPPRESS}
        assert flags <= _complete(script, name, "--"), name


def test_zsh_completion_wraps_the_bash_one(capsys):
    code, script, _ = run(["completion", "zsh"], capsys)
    assert code == 0 and script.startswith("#compdef torchfleet") and "bashcompinit" in script


def _namespace_of(out):
    return next(yaml.safe_load_all(out))["metadata"]["namespace"]


SUBMIT = ["submit", "j", "--cpu", "--dry-run", "--", "python", "train.py"]


def test_precedence_flag_over_variable_over_config_file(isolated, capsys, monkeypatch):
    write_config(isolated, f"stack: local\nimage: {IMAGE}\nnamespace: from-file\n")
    code, out, err = run(SUBMIT, capsys)
    assert code == 0, err
    assert _namespace_of(out) == "from-file"
    assert f"image: {IMAGE}" in out
    monkeypatch.setenv("TORCHFLEET_NAMESPACE", "from-env")
    assert _namespace_of(run(SUBMIT, capsys)[1]) == "from-env"
    code, out, _ = run([*SUBMIT[:2], "-n", "from-flag", *SUBMIT[2:]], capsys)
    assert _namespace_of(out) == "from-flag"
    job = isolated / "job.yaml"
    job.write_text("namespace: from-job-file\n")
    code, out, err = run([*SUBMIT[:2], "-f", str(job), *SUBMIT[2:]], capsys)
    assert (code, _namespace_of(out)) == (0, "from-job-file"), err


def test_config_stack_path_is_relative_to_the_config_file(isolated, capsys):
    path = write_config(isolated, f"stack: stacks/Pulumi.local.yaml\nimage: {IMAGE}\n")
    (path.parent / "stacks").mkdir()
    (path.parent / "stacks" / "Pulumi.local.yaml").write_text(
        (config.stack_ref.STACKS_DIR / "Pulumi.local.yaml").read_text())
    code, _, err = run(SUBMIT, capsys)
    assert code == 0, err


# (id, config text or None, variables, message: the file or variable and its key, then the flag's words)
BAD_DEFAULTS = [
    ("unknown-key", "imag: x\n", {}, "config.yaml: unknown key 'imag'; did you mean 'image'?"),
    ("not-text", "namespace: [a]\n", {}, "config.yaml: namespace: expected text, got list"),
    ("empty", "context: ''\n", {}, "config.yaml: context: empty"),
    ("not-a-mapping", "- stack\n", {}, "config.yaml: expected a mapping of keys to values"),
    ("not-yaml", "stack: [\n", {}, "config.yaml: not valid YAML"),
    ("bad-image-in-file", "image: r/t:latest\nstack: local\n", {},
     "config.yaml: image: 'r/t:latest' names no fixed version"),
    ("bad-namespace-in-file", f"image: {IMAGE}\nnamespace: Bad_NS\n", {}, "config.yaml: namespace: must be a DNS"),
    ("bad-stack-variable", None, {"TORCHFLEET_STACK": "nope", "TORCHFLEET_IMAGE": IMAGE},
     "TORCHFLEET_STACK: no stack 'nope'"),
    ("bad-image-variable", None, {"TORCHFLEET_IMAGE": "team/train"}, "TORCHFLEET_IMAGE: 'team/train' names no"),
]


@pytest.mark.parametrize(("text", "variables", "expected"), [c[1:] for c in BAD_DEFAULTS],
                         ids=[c[0] for c in BAD_DEFAULTS])
def test_bad_defaults_exit_2_naming_the_file_or_variable(text, variables, expected, isolated, capsys, monkeypatch):
    if text is not None:
        write_config(isolated, text)
    for key, value in variables.items():
        monkeypatch.setenv(key, value)
    code, out, err = run(SUBMIT, capsys)
    assert (code, out) == (2, "")
    assert expected in err


def test_the_config_file_is_read_only_by_commands_that_take_its_keys(isolated, capsys):
    write_config(isolated, "imag: broken\n")
    assert run(["completion", "bash"], capsys)[0] == 0
    # gpus takes --stack since issue 32 (the stack's region prices it), so it reads the file and names the typo
    code, _, err = run(["gpus", "--cloud", "aws"], capsys)
    assert code == 2 and "imag" in err


@pytest.mark.parametrize(("variables", "expected"), [
    ({}, "~/.config/torchfleet/config.yaml"),
    ({"XDG_CONFIG_HOME": ""}, "~/.config/torchfleet/config.yaml"),
    ({"XDG_CONFIG_HOME": "/etc/xdg-user"}, "/etc/xdg-user/torchfleet/config.yaml"),
])
def test_config_path_honours_xdg(variables, expected):
    from pathlib import Path

    assert config.config_path(variables) == Path(expected).expanduser()


# Regression (issue 13's note): synth and check required --stack on the line, so the stack set in the
# config file or $TORCHFLEET_STACK (which submit, status and the rest use) was refused there.
@pytest.mark.parametrize("command", ["synth", "check"])
def test_synth_and_check_take_the_default_stack(command, isolated, capsys, monkeypatch):
    code, out, err = run([command], capsys)
    assert (code, out) == (2, "")
    assert "--stack: required: a stack's name or file" in err and "TORCHFLEET_STACK" in err
    write_config(isolated, "stack: local\n")
    json_flag = ["--json"] if command == "synth" else []
    from_file = run([command, *json_flag], capsys)
    assert from_file[0] == 0 and (command == "check" or '"type": "kubernetes:' in from_file[1])
    monkeypatch.setenv("TORCHFLEET_STACK", "nope")  # the variable wins over the file, and is named
    code, _, err = run([command], capsys)
    assert code == 2 and "TORCHFLEET_STACK: no stack 'nope'" in err
    from_flag = run([command, *json_flag, "--stack", "local"], capsys)  # the flag wins over both
    assert from_flag[0] == 0
    if command == "synth":  # the same resources (created in parallel: their order and generated values vary)
        resources = [sorted((r["type"], r["name"]) for r in json.loads(out)["resources"]) for out in (from_file[1],
                                                                                            from_flag[1])]
        assert resources[0] == resources[1] and resources[0]


# Regression (issue 23): a $TORCHFLEET_STACK naming a file that is no stack config made synth and check
# print "invalid stack config" about a file the user never typed, without naming the variable.
@pytest.mark.parametrize("command", ["synth", "check", "list"])
def test_a_default_stack_that_is_no_stack_file_names_the_variable(command, isolated, capsys, monkeypatch):
    not_a_stack = isolated / "notes.yaml"
    not_a_stack.write_text("todo: write the paper\n")
    monkeypatch.setenv("TORCHFLEET_STACK", str(not_a_stack))
    code, out, err = run([command], capsys)
    assert (code, out) == (2, "")
    assert f"TORCHFLEET_STACK {not_a_stack}: invalid stack config" in err and "unknown top-level key 'todo'" in err
