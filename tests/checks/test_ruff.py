"""ruff (pinned in the project's dev extras, configured in pyproject.toml) on the whole repository."""

from __future__ import annotations

import sys

from tests.checks.tools import run


def test_ruff_reports_nothing_on_the_repository():
    proc = run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."])
    assert proc.returncode == 0, f"ruff found problems:\n{proc.stdout}{proc.stderr}"


def test_ruff_does_report_a_problem(tmp_path):
    """The check above can fail: the same command on a file with an unused import does."""
    (tmp_path / "bad.py").write_text("import os\n")
    proc = run([sys.executable, "-m", "ruff", "check", "--no-cache", "--isolated", "--output-format", "concise",
                str(tmp_path)])
    assert proc.returncode == 1 and "F401" in proc.stdout
