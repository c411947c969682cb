"""Every command README.md and docs/*.md show is run here, or listed with the reason it cannot be
(issue 13: README statements that did not hold when run; issue 22: the README shrank to a researcher's
day and its reference moved to docs/, still run here).

- `bash`/`sh` blocks: each command that runs offline (synth, check, gpus, --help, submit and sweep
  as dry runs, plain file commands) runs in a sandbox folder and must exit 0; `submit`/`sweep`
  without --dry-run run as their --dry-run twin. Commands that need a cloud, a cluster, Docker or
  the Pulumi CLI are matched by SKIPPED, each with its reason; a command matching neither fails the
  test, so a new README example is run or explicitly skipped.
- `console` blocks: the `$ ` commands run in order in one sandbox, and what they print (stdout then
  stderr, as a terminal shows this CLI's output) must be the lines the README shows.
- A YAML block introduced as "this `NAME.yaml`" is written to NAME.yaml for the console block after it.

`torchfleet ...` runs in this process (torchfleet.cli.main), other commands through bash.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.harness import REPO
from torchfleet.cli import main

README = REPO / "README.md"
# The README first, then docs/ in name order: every page whose commands a reader copies.
DOCS = {path.relative_to(REPO).as_posix(): path.read_text() for path in [README, *sorted((REPO / "docs").glob("*.md"))]}
README_MAX_LINES = 300  # issue 22: the README is a researcher's day; the reference lives in docs/
# What the sandbox sees of the repository, by relative path as the README's commands use it.
LINKED = ("stacks", "training-image", "k8s", "components", "Pulumi.yaml", "policy")

# (pattern matched at the start of a command, why it is not run here)
SKIPPED: list[tuple[str, str]] = [
    (r"bash \.ci/setup", "installs everything (minutes); CI runs it (.ci/run, .github/workflows/ci.yml)"),
    (r"bash \.ci/run", "the whole suite: it is what CI runs"),
    (r"source (\.venv|~/\.venvs/torchfleet)/bin/activate", "changes the reader's shell only"),
    (r"export PIP_EXTRA_INDEX_URL=", "pip's environment; .github/workflows/ci.yml sets the same"),
    (r"pulumi ", "needs the Pulumi CLI and a cloud account or cluster (none here)"),
    (r"kubectl ", "needs a Kubernetes cluster (none here)"),
    (r"kind ", "needs Docker to run a kind cluster (none here)"),
    (r"docker ", "needs Docker (none here); tests/checks/test_dockerfile.py lints both Dockerfiles"),
    (r"az ", "needs the Azure CLI and a subscription"),
    (r"gcloud ", "needs the Google Cloud CLI and a project"),
    (r"python3\.11 -m venv policy/venv", "installs the CrossGuard pack's venv; tests/policy runs the pack in-process"),
    (r"torchfleet (list|status|logs|delete|tensorboard)\b",
     "needs a cluster; tests/torchfleet/test_jobs_cluster.py runs each against a mocked Kubernetes API"),
    (r"python3\.11 -m venv ~/\.venvs/torchfleet",
     "installs the command line into a venv of its own (minutes); tests/torchfleet/test_slim_install.py runs its "
     "commands without the extras"),
    (r"torchfleet (checkpoints|cp)\b",
     "needs a job's folder: a cluster's (tests/controlplane/test_reader_pod.py) or a local run's "
     "(tests/training_image/test_results_run.py runs both commands on one)"),
    (r"torchfleet upload ", "needs a folder and a bucket or a store mounted here: tests/torchfleet/test_data_upload.py "
     "runs upload (the dry run, the cloud CLI's command, a copy onto a folder)"),
    (r"torchfleet (submit|sweep) .*--dataset ",
     "needs a stack that declares datasets: tests/torchfleet/test_dataset_flag.py submits on one (dry run), "
     "tests/controlplane/test_datasets.py against the real API server"),
    (r"\.venv/bin/python bench/",
     "a benchmark (minutes): docs/benchmarks.md's figures come from it, never from a test"),
    (r"TORCHFLEET_ETCD_BINARY=\S+ PYTHONPATH=\S+ \.venv/bin/python -m pytest tests/training_image/test_gpu\.py",
     "needs a GPU (the `gpu` tests skip without CUDA); TORCHFLEET_GPU_TESTS_ON_CPU=1 runs the same bodies on a CPU"),
    (r"PYTHONPATH=training-image \.venv/bin/python -m elastic_trainer\.launcher",
     "a real training run: tests/training_image/test_custom_example.py runs the same command (slow)"),
    (r"\.venv/bin/python -m tests\.containers\.image",
     "builds the training image (about 3 min and 2.7 GB the first time); tests/containers runs it when named"),
    (r".*\.venv/bin/torchfleet demo", "the demo (real processes, minutes): tests/training_image/test_demo.py"),
    (r"(.*\.venv/bin/)?torchfleet (run|status|logs) --local",
     "a local run with a kill (real processes, a minute) and its folder: tests/training_image/test_run_local.py "
     "runs README.md's `run --local` line word for word, and status/logs --local on a run's folder"),
]

# (pattern matched at the start of a command, its exit code, why it is not 0): commands shown on purpose
# where they fail. Every other run command must exit 0.
EXITS: list[tuple[str, int, str]] = [
    (r"torchfleet check --stack-file stacks/Pulumi\.(aws-usw2|azure-eus|gcp-usc1)\.yaml", 1,
     "the example stacks carry placeholders a user replaces first (components/placeholders.py: the API's "
     "203.0.113.0/24, an all-zero admin, the example's project id); check reports each as an error"),
]


def expected_exit(line: str) -> int:
    return next((code for pattern, code, _ in EXITS if re.match(pattern, line)), 0)


@dataclass(frozen=True)
class Command:
    line: str
    section: str  # "<page>: <heading>"
    block: int  # index of its code block in its page

    @property
    def id(self) -> str:
        return f"{self.section[:36]}: {self.line[:70]}"


def _section(page: str, offset: int) -> str:
    heads = [m for m in re.finditer(r"^##+ (.+)$", DOCS[page], re.M) if m.start() < offset]
    return f"{page}: {heads[-1].group(1) if heads else 'top'}"


def blocks(lang: str) -> list[tuple[str, int, int, str]]:
    """(page, block index, offset, body) of every fenced block of a language, continuation lines joined."""
    found = []
    for page, text in DOCS.items():
        for i, m in enumerate(re.finditer(r"^```(\w*)\n(.*?)^```", text, re.S | re.M)):
            if m.group(1) == lang:
                found.append((page, i, m.start(), m.group(2).replace("\\\n", " ")))
    return found


def shell_commands() -> list[Command]:
    commands = []
    for lang in ("bash", "sh"):
        for page, i, offset, body in blocks(lang):
            for line in body.splitlines():
                line = line.strip()
                if line and not line.startswith("#"):
                    commands.append(Command(_strip_comment(line), _section(page, offset), i))
    return commands


def _strip_comment(line: str) -> str:
    """The command without its trailing `# comment` (a '#' after a space, outside quotes)."""
    quote = None
    for pos, char in enumerate(line):
        if char in "'\"":
            quote = None if quote == char else (quote or char)
        elif char == "#" and quote is None and pos and line[pos - 1] == " ":
            return line[:pos].rstrip()
    return line


def skip_reason(line: str) -> str | None:
    for pattern, reason in SKIPPED:
        if re.match(pattern, line):
            return reason
    return None


COMMANDS = shell_commands()
RUN = [c for c in COMMANDS if skip_reason(c.line) is None]


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    for name in LINKED:
        (tmp_path / name).symlink_to(REPO / name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run_line(line: str, sandbox: Path, capsys) -> tuple[int, str, str]:
    """Run one README command in the sandbox: (exit code, stdout, stderr)."""
    line = line.replace("/tmp/", f"{sandbox}/tmp/")
    line = re.sub(r"\s*(\| less|> /dev/null)$", "", line)
    words = shlex.split(line)
    if words[0] == "torchfleet":
        capsys.readouterr()
        try:
            code = main(words[1:])
        except SystemExit as exited:  # argparse's --help and usage errors
            code = exited.code
        out, err = capsys.readouterr()
        return code, out, err
    done = subprocess.run(["bash", "-c", line], cwd=sandbox, capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout, done.stderr


def dry_run_twin(line: str) -> str:
    """A submit/sweep without --dry-run, as the dry run that checks the same flags and sends nothing."""
    if re.match(r"torchfleet (submit|sweep) ", line) and "--dry-run" not in line:
        head, cut, command = line.partition(" -- ")
        return f"{head} --dry-run{cut}{command}"
    return line


@pytest.mark.parametrize("command", RUN, ids=[c.id for c in RUN])
def test_readme_command_runs(command, sandbox, capsys):
    if " ... " in f" {command.line} ":
        pytest.skip("abbreviated in README.md (`...`): its full form is the command shown just before it")
    code, out, err = run_line(dry_run_twin(command.line), sandbox, capsys)
    expected = expected_exit(command.line)
    assert code == expected, f"{command.line}\nexit {code}, expected {expected}\n{out[-2000:]}\n{err[-2000:]}"
    if expected:  # a documented failure fails for the documented reason only
        assert out and all(line.startswith("placeholder  ") for line in out.splitlines()), out


@pytest.mark.parametrize("command", [c for c in COMMANDS if c not in RUN], ids=[c.id for c in COMMANDS if c not in RUN])
def test_readme_command_not_run_here_says_why(command):
    reason = skip_reason(command.line)
    assert reason and len(reason) > 20
    pytest.skip(reason)


def test_every_expected_failure_is_a_documented_command():
    for pattern, _, why in EXITS:
        assert len(why) > 20 and any(re.match(pattern, c.line) for c in RUN), pattern


def test_every_offline_command_kind_is_run():
    """The README's offline examples are run, not skipped: a skip pattern must not swallow them."""
    kinds = {re.match(r"torchfleet (\w+)", c.line).group(1) for c in RUN if c.line.startswith("torchfleet ")}
    assert {"synth", "check", "gpus", "submit", "sweep"} <= kinds
    assert any("--dry-run" in c.line for c in RUN) and any("--help" in c.line for c in RUN)


def files_shown(page: str) -> dict[str, str]:
    """`NAME.yaml`: followed by a yaml block: the file a console block after it (same page) reads."""
    pattern = r"`([\w.-]+\.yaml)`:\n\n```yaml\n(.*?)^```"
    return {m.group(1): m.group(2) for m in re.finditer(pattern, DOCS[page], re.S | re.M)}


CONSOLES = [(page, i, _section(page, offset), body) for page, i, offset, body in blocks("console")]


def _dated(lines: list[str]) -> list[str]:
    """A spot price snapshot's age (components/catalog/spot_prices.py stale()) grows by one every day, and its
    line appears once the snapshot is over STALE_DAYS old: that line is the one part of shown output not
    compared (test_gpus_regional and test_cost_regional check it against today's date)."""
    return [line for line in lines if not re.fullmatch(r"the \S+ spot price snapshot is \d+ days old .*", line)]


def console_mismatch(page: str, body: str, sandbox: Path, capsys) -> str | None:
    """The first `$ ` command of a console block whose output is not the lines shown, else None."""
    for name, text in files_shown(page).items():
        (sandbox / name).write_text(text)
    expected: list[tuple[str, list[str]]] = []
    for line in body.splitlines():
        if line.startswith("$ "):
            expected.append((line[2:], []))
        else:
            expected[-1][1].append(line)
    for line, shown in expected:
        _, out, err = run_line(line, sandbox, capsys)
        if _dated((out + err).splitlines()) != _dated(shown):
            return f"{line}\nshown:\n" + "\n".join(shown) + f"\nprinted:\n{out}{err}"
    return None


@pytest.mark.parametrize("page, index, section, body", CONSOLES, ids=[f"{s}-block{i}" for _, i, s, _ in CONSOLES])
def test_readme_console_output_is_what_the_command_prints(page, index, section, body, sandbox, capsys):
    mismatch = console_mismatch(page, body, sandbox, capsys)
    assert mismatch is None, f"{section} shows other output for: {mismatch}"


def test_a_changed_figure_in_shown_output_is_caught(sandbox, capsys):
    """The comparison can fail: the check example with one cost figure changed."""
    ((page, body),) = [(p, b) for p, _, _, b in CONSOLES if b.startswith("$ torchfleet check --stack-file stacks/")]
    assert "10.91 USD/hour" in body
    assert console_mismatch(page, body.replace("10.91 USD/hour", "10.92 USD/hour"), sandbox, capsys)


def test_setup_lines_are_what_ci_setup_prints():
    """The `[setup]` lines the docs show: the steps .ci/setup times, in its format."""
    (shown,) = [b for _, _, _, b in blocks("") if b.startswith("[setup] ")]
    calls = [shlex.split(line)[1] for line in (REPO / ".ci" / "setup").read_text().splitlines()
             if line.strip().startswith("step ")]
    names = list(dict.fromkeys(c.replace("$(basename $PY)", "python3.11") for c in calls))
    lines = shown.splitlines()
    assert [line.split(":")[0].removeprefix("[setup] ") for line in lines] == names
    for line in lines:
        assert re.fullmatch(r"\[setup\] [\w.-]+: .+ \((\d\.\d|\d{2,}) s\)", line), line


def test_the_python_excerpt_is_the_example_s():
    """README's train.py excerpt names the class and methods training-image/examples/train.py has."""
    (body,) = [b for page, _, _, b in blocks("python") if "class SpiralClassifier" in b and page == "README.md"]
    example = (REPO / "training-image" / "examples" / "train.py").read_text()
    for name in re.findall(r"(?:def|class) (\w+)", body):
        assert re.search(rf"(def|class) {name}\b", example), name
    for call in ("TrainConfig.add_arguments(parser)", "train(SpiralClassifier(", "reduction=\"sum\""):
        assert call in body and call in example


def test_the_readme_is_a_short_page():
    """Issue 22: 1,072 lines with the researcher's part at line 616; the reference lives in docs/."""
    lines = len(DOCS["README.md"].splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move reference material to docs/"


@pytest.mark.parametrize("page", list(DOCS))
def test_every_relative_link_names_a_file_that_exists(page):
    """A link to a doc, a file or a section heading that moved is a dead end for a reader."""
    base = (REPO / page).parent
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", DOCS[page]):
        if "://" not in target:
            assert (base / target).exists(), f"{page} links to {target}, which does not exist"
    for target, anchor in re.findall(r"\]\(([^)#\s]*)#([^)\s]+)\)", DOCS[page]):
        linked = (base / target) if target else REPO / page
        if linked.suffix == ".md" and linked.exists():
            heads = re.findall(r"^#+ (.+)$", linked.read_text(), re.M)
            slugs = {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in heads}
            assert anchor in slugs, f"{page} links to {target}#{anchor}: no such heading"
