"""torchfleet/preview/stack_file.py: the one reader of stack files for synth, check and --stack.

Each bad file of issue 12 gets its own message naming the file (or key), what is wrong and the
fix; `torchfleet synth` and `torchfleet check` exit 2 with it on stderr, nothing on stdout and no
traceback.
"""

from __future__ import annotations

import pytest

from components.spec import ConfigError
from tests.harness import REPO
from torchfleet.cli import main
from torchfleet.preview import runner, stack_file
from torchfleet.preview.stack_file import MAX_NODES, StackFileError, load_stack_file

GOOD = "config:\n  torchfleet:cloud: local\n"


def alias_bomb(levels: int) -> str:
    """The billion-laughs document: each level lists the one below nine times (about 1 KB)."""
    lines = ['l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * 9) + "]")
    return "config:\n  torchfleet:cloud: local\n  torchfleet:bomb:\n" + "".join(f"    {line}\n" for line in lines)


def problems_of(tmp_path, content: str | bytes, name: str = "Pulumi.bad.yaml") -> list[str]:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    with pytest.raises(StackFileError) as caught:
        load_stack_file(path)
    return caught.value.problems


def test_stack_file_error_is_a_config_error():
    # So every reader that reports ConfigError (synth, check, the CLI's --stack) reports it too.
    assert issubclass(StackFileError, ConfigError)


def test_the_repositorys_stacks_load():
    for path in sorted((REPO / "stacks").glob("Pulumi.*.yaml")):
        assert load_stack_file(path)["torchfleet:cloud"] in ("aws", "gcp", "azure", "local")


@pytest.mark.parametrize(
    "content, expected",
    [
        (
            "config: [unclosed\n  x: {\n",
            "not valid YAML: while parsing a flow sequence, expected ',' or ']', but got ':' at line 2, column 4; "
            "fix the line it names",
        ),
        ("- aws\n- gcp\n", "expected a mapping with a 'config:' key, got a list (['aws', 'gcp'])"),
        ("just text\n", "expected a mapping with a 'config:' key, got a string ('just text')"),
        ("config: local\n", "'config' must be a mapping of 'namespace:key: value' lines, got a string ('local')"),
        ("config: [a, b]\n", "'config' must be a mapping of 'namespace:key: value' lines, got a list (['a', 'b'])"),
        ("confg:\n  torchfleet:cloud: aws\n", "unknown top-level key 'confg'; did you mean 'config'?"),
        ("a: 1\n---\nb: 2\n", "not valid YAML: expected a single document in the stream, but found another document"),
    ],
)
def test_malformed_stack_files(tmp_path, content, expected):
    [problem] = problems_of(tmp_path, content)
    assert problem.startswith(f"{tmp_path / 'Pulumi.bad.yaml'}: {expected}")


def test_binary_file(tmp_path):
    [problem] = problems_of(tmp_path, bytes(range(256)))
    assert problem.endswith("a binary file, not YAML text; give a Pulumi.<stack>.yaml")


def test_not_utf8(tmp_path):
    [problem] = problems_of(tmp_path, "config:\n  torchfleet:cloud: caf\xe9\n".encode("latin-1"))
    assert "not UTF-8 text (byte 31); save the file as UTF-8" in problem


def test_too_large(tmp_path):
    [problem] = problems_of(tmp_path, GOOD + "#" * stack_file.MAX_BYTES)
    assert problem.endswith("larger than 256 KiB; a stack file holds a few keys")


def test_duplicate_key_is_refused_not_last_wins(tmp_path):
    # Regression (issue 12): YAML keeps the last of two equal keys; the stack silently used gcp.
    [problem] = problems_of(tmp_path, "config:\n  torchfleet:cloud: aws\n  torchfleet:cloud: gcp\n")
    assert problem.endswith("key 'torchfleet:cloud' appears twice (lines 2 and 3); YAML keeps only the last, "
                            "so delete one")


def test_duplicate_key_deep_inside_a_value(tmp_path):
    content = "config:\n  torchfleet:gpuPools:\n    - gpu: t4\n      maxNodes: 2\n      maxNodes: 8\n"
    [problem] = problems_of(tmp_path, content)
    assert "key 'maxNodes' appears twice (lines 4 and 5)" in problem


def test_alias_bomb_is_refused_before_it_expands(tmp_path):
    # Regression (issue 12): a 1 KB bomb (9 levels: 9**9 strings) ran 36 s into a MemoryError at
    # 2.9 GB; the budget counts the expansion on the composed graph, which stays 1 KB.
    text = alias_bomb(9)
    assert len(text) < 1100
    [problem] = problems_of(tmp_path, text)
    assert f"expands to more than {MAX_NODES} values (YAML aliases repeat what they point to)" in problem
    assert len(problem) < 300


def test_small_alias_bomb_gives_a_short_message(tmp_path):
    # Regression (issue 12): a smaller bomb got through and printed a 310 KB error message.
    [problem] = problems_of(tmp_path, alias_bomb(5))  # 9**5 = 59049 values
    assert len(problem) < 300


def test_plain_aliases_within_the_budget_are_fine(tmp_path):
    path = tmp_path / "Pulumi.ok.yaml"
    path.write_text("config:\n  torchfleet:cloud: local\n  torchfleet:storage: &s {protect: false}\n"
                    "  torchfleet:training: {namespace: jobs}\n")
    assert load_stack_file(path)["torchfleet:storage"] == {"protect": False}


def test_recursive_alias(tmp_path):
    [problem] = problems_of(tmp_path, "config:\n  torchfleet:x: &a [*a]\n")
    assert problem.endswith("an alias refers to the node that contains it; remove the alias")


def test_deep_nesting(tmp_path):
    [problem] = problems_of(tmp_path, "config:\n  torchfleet:x: " + "[" * 3000 + "]" * 3000 + "\n")
    assert "levels" in problem


@pytest.mark.parametrize(
    "line, expected",
    [
        ("  nocolon: 1\n", "a config key is 'namespace:name' (e.g. torchfleet:cloud, aws:region)"),
        ("  torchfleet:x: !!binary aGVsbG8=\n", "torchfleet:x: a YAML bytes (b'hello') cannot be a config value"),
        ("  torchfleet:x: !!set {a, b}\n", "torchfleet:x: a YAML set"),
        ("  [a, b]: 1\n", "a key must be a plain value, got sequence"),
    ],
)
def test_values_and_keys_pulumi_config_cannot_carry(tmp_path, line, expected):
    found = problems_of(tmp_path, GOOD + line)
    assert any(expected in p for p in found), found


def test_number_too_long_for_python_stays_its_text(tmp_path):
    # Past Python's 4,300-digit int() limit the reader once stopped naming only the file; it keeps the
    # digits as text now and components/spec names the key (test_parse_issue23.py, issue 23).
    path = tmp_path / "Pulumi.long.yaml"
    path.write_text(GOOD + "  torchfleet:x: " + "1" * 5000 + "\n")
    assert load_stack_file(path)["torchfleet:x"] == "1" * 5000


def test_dates_stay_as_written(tmp_path):
    # Pulumi passes "2025-01-01" as text; safe_load would have made a datetime.date (no JSON for it).
    path = tmp_path / "Pulumi.dated.yaml"
    path.write_text(GOOD + "  torchfleet:since: 2025-01-01\n")
    assert load_stack_file(path)["torchfleet:since"] == "2025-01-01"


def test_empty_file_is_an_empty_config(tmp_path):
    path = tmp_path / "Pulumi.empty.yaml"
    path.write_text("")
    assert load_stack_file(path) == {}


def test_stack_spec_reads_through_the_safe_loader(tmp_path):
    # The CLI's --stack resolution (torchfleet/jobs/target.py) calls runner.stack_spec.
    path = tmp_path / "Pulumi.dup.yaml"
    path.write_text("config:\n  torchfleet:cloud: local\n  torchfleet:cloud: aws\n")
    with pytest.raises(StackFileError):
        runner.stack_spec(path)


# ---------------------------------------------------------------- exit codes of synth and check


BAD_FILES = {
    "not yaml": "config: [unclosed\n",
    "binary": b"\x00\x01\xff\xfe",
    "a list": "- a\n- b\n",
    "config a string": "config: aws\n",
    "config a list": "config: [aws]\n",
    "duplicate key": "config:\n  torchfleet:cloud: local\n  torchfleet:cloud: local\n",
    "alias bomb": alias_bomb(9),
    "region a list": "config:\n  torchfleet:cloud: aws\n  aws:region: [us-west-2]\n  torchfleet:zones: [us-west-2a]\n"
                     "  torchfleet:gpuPools: [{gpu: t4, maxNodes: 2}]\n",
    "huge number": "config:\n  torchfleet:cloud: aws\n  aws:region: us-west-2\n  torchfleet:zones: [us-west-2a]\n"
                   "  torchfleet:gpuPools: [{gpu: t4, maxNodes: 99999999999999999999}]\n",
    "long namespace on local": "config:\n  torchfleet:cloud: local\n  torchfleet:training: {namespace: "
                               + "n" * 50 + "}\n",
}


@pytest.mark.parametrize("command", ["synth", "check"])
@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_stack_file_exits_2_with_the_problem_and_no_traceback(tmp_path, capsys, command, case):
    path = tmp_path / "Pulumi.bad.yaml"
    content = BAD_FILES[case]
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    assert main([command, "--stack-file", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("invalid stack config:\n  - ")
    assert "Traceback" not in captured.err
    assert len(captured.err) < 2000
