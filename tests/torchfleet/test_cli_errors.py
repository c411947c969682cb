"""One exit-code contract for every command (issue 12): 0 done, 1 a failure outside the input,
2 the input is wrong, with a message naming the argument; never a traceback. Each case here
crashed (or hung) before; each names the regression it pins."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.harness import REPO
from torchfleet import cli, demo, local_nodes
from torchfleet.cli import main

LOCAL_STACK = str(REPO / "stacks" / "Pulumi.local.yaml")
CMD = ["--", "python", "train.py"]


def run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


# ---------------------------------------------------------------- where synth, check and demo write


@pytest.fixture
def a_file(tmp_path) -> Path:
    path = tmp_path / "a-file"
    path.write_text("x")
    return path


def test_synth_out_pointing_at_a_file_exits_2_before_the_synth(a_file, capsys):
    code, out, err = run(["synth", "--stack-file", LOCAL_STACK, "--out", str(a_file)], capsys)
    assert (code, out) == (2, "")
    assert f"torchfleet synth: --out: {a_file} is a file; give a folder" in err


def test_synth_out_below_a_file_exits_2(a_file, capsys):
    code, out, err = run(["synth", "--stack-file", LOCAL_STACK, "--out", str(a_file / "manifests")], capsys)
    assert (code, out) == (2, "")
    assert f"--out: {a_file} is a file, so {a_file / 'manifests'} cannot be a folder" in err


def test_synth_out_that_cannot_be_created_exits_2(capsys):
    # /proc refuses a new folder even to root, whose access() says yes: the mkdir itself fails.
    code, out, err = run(["synth", "--stack-file", LOCAL_STACK, "--out", "/proc/nope/manifests"], capsys)
    assert (code, out) == (2, "")
    assert "torchfleet synth: --out: " in err and "/proc/nope" in err


def test_synth_stack_file_that_is_a_device_exits_2(capsys):
    code, out, err = run(["synth", "--stack-file", "/dev/null"], capsys)
    assert (code, out) == (2, "")
    assert "--stack-file: /dev/null is not a regular file" in err


def test_synth_stack_file_that_is_a_folder_exits_2(tmp_path, capsys):
    code, out, err = run(["synth", "--stack-file", str(tmp_path)], capsys)
    assert (code, out) == (2, "")
    assert f"--stack-file: {tmp_path} is a folder" in err


@pytest.mark.parametrize(("where", "expected"), [
    ("missing/policy.json", "the folder {tmp}/missing does not exist; create it first"),
    (".", "{tmp} is a folder; give a file path in it"),
    ("a-file/policy.json", "{tmp}/a-file is a file, not a folder"),
])
def test_check_policy_config_out_that_cannot_be_written_exits_2(where, expected, tmp_path, a_file, capsys):
    code, out, err = run(["check", "--stack-file", LOCAL_STACK, "--policy-config-out", str(tmp_path / where)],
                         capsys)
    assert (code, out) == (2, "")
    assert f"torchfleet check: --policy-config-out: {expected.format(tmp=tmp_path)}" in err.replace("/./", "/")


DEMO_ERRORS = [
    # Regression (issue 12): each was silent for 300 s, then a TimeoutError.
    ("steps-zero", ["--steps", "0"], "--steps: from 40 to 1000000"),
    ("checkpoint-every-zero", ["--checkpoint-every", "0"], "--checkpoint-every: at least 1 step, got 0"),
    ("checkpoint-every-too-big", ["--steps", "100", "--checkpoint-every", "50"],
     "--checkpoint-every: at most a quarter of --steps (25)"),
    ("step-delay-negative", ["--step-delay", "-1"], "--step-delay: seconds from 0 to 10, got -1.0"),
    ("step-delay-nan", ["--step-delay", "nan"], "--step-delay: seconds from 0 to 10, got nan"),
    ("workdir-in-proc", ["--workdir", "/proc/nope"], "--workdir: cannot write /proc/nope"),
    ("all-at-once", ["--steps", "0", "--checkpoint-every", "0", "--step-delay", "inf"], "3 problems:"),
]


@pytest.mark.parametrize(("argv", "expected"), [c[1:] for c in DEMO_ERRORS], ids=[c[0] for c in DEMO_ERRORS])
def test_demo_arguments_are_checked_before_anything_starts(argv, expected, capsys, monkeypatch):
    monkeypatch.setattr(demo, "_demo", lambda *a: pytest.fail("the demo started"))
    code, out, err = run(["demo", *argv], capsys)
    assert (code, out) == (2, "")
    assert expected in err


def test_demo_workdir_that_is_a_file_exits_2(a_file, capsys, monkeypatch):
    monkeypatch.setattr(demo, "_demo", lambda *a: pytest.fail("the demo started"))
    code, _, err = run(["demo", "--workdir", str(a_file)], capsys)
    assert code == 2 and f"--workdir: {a_file} is a file" in err


def test_demo_log_excerpt_is_the_last_failed_attempt_without_torch_frames():
    log = "\n".join([
        "usage: synthetic.py [-h]", "synthetic.py: error: first attempt",
        "E1123 06:53:16.091000 13726 api.py:836] failed (exitcode: 2) local_rank: 0",
        "E1123 06:53:16.091000 13726 api.py:836] Traceback (most recent call last):",
        "<frozen runpy>:128: RuntimeWarning: 'elastic_trainer.launcher' found in sys.modules",
        "usage: synthetic.py [-h]", "synthetic.py: error: argument --total-steps: must be >= 1, got 0",
        "E1123 06:53:18.407000 13726 api.py:836] failed (exitcode: 2) local_rank: 0",
    ])
    assert local_nodes.log_excerpt(log) == ("  | usage: synthetic.py [-h]\n"
                                     "  | synthetic.py: error: argument --total-steps: must be >= 1, got 0")
    assert local_nodes.worker_failures(log) == 2
    assert local_nodes.worker_failures(log + '\n@@tf {"ev": "step", "step": 1}') == 0  # progress resets the count


def test_worker_failures_are_not_reset_by_a_start_event():
    """Each torchrun attempt emits start before it fails: a Task error in the first step retried
    101 times when any event reset the count (issue 32)."""
    attempt = '@@tf {"ev": "start", "world": 1}\nAttributeError: loss_sum\n' \
              "E1123 06:53:18.407000 13726 api.py:836] failed (exitcode: 1) local_rank: 0\n"
    assert local_nodes.worker_failures(attempt * 3) == 3
    assert local_nodes.worker_failures(attempt * 3 + '@@tf {"ev": "step", "step": 1}\n' + attempt) == 1
    assert local_nodes.worker_failures(attempt + "@@tf not json\n" + attempt) == 2


# ---------------------------------------------------------------- kubeconfig and stack files


KUBECONFIGS = [
    # Regression (issue 12): `list --kubeconfig /etc/passwd` and a broken kubeconfig were tracebacks.
    ("passwd", "root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1::/usr/sbin:/usr/sbin/nologin\n",
     "is not a kubeconfig: expected a mapping with clusters, contexts and users"),
    ("not-yaml", "apiVersion: v1\nclusters: [\n", "is not a kubeconfig: not YAML text (line 3)"),
    ("a-list", "- clusters\n- users\n", "is not a kubeconfig: expected a mapping"),
    ("binary", "\udcff\udcfe", "is not a kubeconfig: not YAML text"),
    ("wrong-shapes", "apiVersion: v1\nclusters: 3\ncontexts: x\nusers: {}\ncurrent-context: c\n",
     "is not a usable kubeconfig"),
    ("dangling-context", yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "x", "clusters": [], "users": [],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}]}), "Expected object with name c"),
    ("bad-server", yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "x",
        "clusters": [{"name": "c", "cluster": {"server": "ht tp://::bad"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}]}),
     "the cluster's server 'ht tp://::bad' is not an https:// URL"),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in KUBECONFIGS], ids=[c[0] for c in KUBECONFIGS])
def test_unusable_kubeconfig_exits_2_naming_it(text, expected, tmp_path, capsys):
    path = tmp_path / "kubeconfig"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    code, out, err = run(["list", "--kubeconfig", str(path)], capsys)
    assert (code, out) == (2, "")
    assert "torchfleet list: --kubeconfig" in err and str(path) in err
    assert expected in err


@pytest.mark.parametrize("path", ["/tmp", "/dev/null"])
def test_kubeconfig_that_is_no_file_exits_2(path, capsys):
    code, _, err = run(["list", "--kubeconfig", path], capsys)
    assert code == 2 and f"--kubeconfig: {path} is" in err


STACK_FILES = [
    # Regression (issue 12): `--stack NAME` naming a malformed stack file was a traceback.
    ("not-yaml", "config: [\n", "not valid YAML"),
    ("a-list", "- config\n", "expected a mapping with a 'config:' key"),
    ("config-string", "config: aws\n", "'config' must be a mapping"),
    ("duplicate-key", "config:\n  torchfleet:cloud: aws\n  torchfleet:cloud: gcp\n", "appears twice"),
    ("alias-bomb", "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{n}: &{n} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, n in zip("abcdefgh", "bcdefghi", strict=True)) + "config: {torchfleet:cloud: local}\n",
     "expands to more than"),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in STACK_FILES], ids=[c[0] for c in STACK_FILES])
def test_malformed_stack_file_behind_stack_exits_2(text, expected, tmp_path, capsys):
    (tmp_path / "Pulumi.bad.yaml").write_text(text)
    code, out, err = run(["submit", "j", "--stack", "bad", "--stacks-dir", str(tmp_path), "--cpu",
                          "--image", "r/t:1", "--dry-run", *CMD], capsys)
    assert (code, out) == (2, "")
    assert "torchfleet submit: --stack bad: " in err and expected in err
    assert len(err) < 2000  # one clear error, not the expansion


# A name never reaches outside stacks/; since issue 13 a path (anything with '/' or a .yaml ending)
# is taken as the path it is, so one that names no file says so.
@pytest.mark.parametrize(("stack", "expected"), [
    ("../stacks/Pulumi.local", "--stack: ../stacks/Pulumi.local does not exist; give a stack name"),
    ("a/b", "--stack: a/b does not exist"),
    (".hidden", "--stack: '.hidden' is not a stack name"),
    ("", "--stack: empty; give a stack name or file"),
])
def test_stack_name_cannot_reach_outside_stacks(stack, expected, capsys):
    code, _, err = run(["submit", "j", "--stack", stack, "--cpu", "--image", "r/t:1", "--dry-run", *CMD], capsys)
    assert code == 2 and expected in err


# Regression (issue 13): `submit --stack stacks/Pulumi.aws-usw2.yaml` looked for
# stacks/Pulumi.stacks/Pulumi.aws-usw2.yaml.yaml; a name and a path now name the same stack, everywhere.
AWS_FILE = REPO / "stacks" / "Pulumi.aws-usw2.yaml"


@pytest.mark.parametrize("stack", ["aws-usw2", "stacks/Pulumi.aws-usw2.yaml", str(AWS_FILE)])
def test_a_stack_is_named_by_name_or_path_on_every_command(stack, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    argv = ["submit", "j", "--stack", stack, "--gpu", "t4", "--image", "r/t:1", "--dry-run", *CMD]
    code, out, err = run(argv, capsys)
    assert code == 0, err
    assert "torchfleet.io/gpu: t4" in out


def test_check_takes_a_stack_name_as_submit_does(capsys):
    code, out, err = run(["check", "--stack", "aws-usw2"], capsys)  # --stack-file PATH: the README's
    # exit 1: the example's one placeholder (components/placeholders.py), and nothing else
    assert code == 1 and "aws-usw2: 0 violation(s)" in err, err
    assert [line.split("  ")[:2] for line in out.splitlines()] == [
        ["placeholder", "torchfleet:network.publicAccessCidrs[0]"]]


def test_status_shared_dir_that_is_no_folder_exits_2(a_file, capsys):
    code, _, err = run(["status", "j", "--shared-dir", str(a_file)], capsys)
    assert code == 2 and f"--shared-dir: {a_file} is not a folder" in err


# ---------------------------------------------------------------- the last line of defence


def _boom(args):
    raise RuntimeError("boom\nsecond line")


def test_unexpected_error_is_one_line_with_where_to_report_and_exit_1(capsys, monkeypatch):
    monkeypatch.delenv(cli.DEBUG_ENV, raising=False)
    parsed = cli.parse(["list"])
    parsed.func = _boom
    assert cli.run(parsed) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "torchfleet list: unexpected error (RuntimeError: boom second line)" in err
    assert "report it" in err and f"{cli.DEBUG_ENV}=1" in err


def test_debug_env_shows_the_traceback(capsys, monkeypatch):
    monkeypatch.setenv(cli.DEBUG_ENV, "1")
    parsed = cli.parse(["list"])
    parsed.func = _boom
    assert cli.run(parsed) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "unexpected error (RuntimeError" in err


def test_broken_pipe_is_quiet(capsys):
    parsed = cli.parse(["list"])
    parsed.func = lambda args: (_ for _ in ()).throw(BrokenPipeError())
    assert cli.run(parsed) == 1
    assert capsys.readouterr().err == ""


def test_an_argument_with_a_nul_exits_2(capsys):
    # Found by tests/property/test_cli_args.py: `synth --out '\x00'` was a ValueError from the OS layer.
    with pytest.raises(SystemExit) as exit_:
        main(["synth", "--stack-file", LOCAL_STACK, "--out", "\x00"])
    assert exit_.value.code == 2
    assert "argument 5 ('\\x00') contains a NUL character" in capsys.readouterr().err


def test_an_argument_that_is_not_utf8_exits_2(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["submit", "j\udcff", "--cpu", "--image", "r/t:1", "--dry-run", *CMD])
    assert exit_.value.code == 2
    assert "argument 2 ('j\\udcff') is not valid UTF-8 text" in capsys.readouterr().err


# ---------------------------------------------------------------- a misspelled option names the one meant


@pytest.mark.parametrize(("argv", "meant"), [
    (["submit", "resnet", "--gpus", "t4", "--dry-run", *CMD], "--gpus: did you mean --gpu?"),
    (["submit", "resnet", "--node", "2", "--dry-run", *CMD], "--node: did you mean --nodes?"),
    (["run", "--local", "--kill_at", "60", "--", "train.py"], "--kill_at: did you mean --kill-at?"),
    (["check", "--stak", "local"], "--stak: did you mean --stack?"),
])
def test_a_misspelled_option_suggests_the_one_meant(argv, meant, capsys):
    """They said only 'abbreviations are not accepted' (issue 32's walk): the close option is named, and an
    abbreviation is still refused."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    err = capsys.readouterr().err
    assert exited.value.code == 2 and meant in err and "--help" in err, err


def test_an_option_far_from_every_other_gets_no_guess(capsys):
    with pytest.raises(SystemExit):
        main(["check", "--stack", "local", "--frobnicate"])
    assert "did you mean" not in capsys.readouterr().err
