"""The offline checkers, run as the test suite's static checks (one `pytest` runs everything).

They live in their own virtualenv, .venv-tools, installed by .ci/setup from the pinned
.ci/tools-requirements.txt (checkov and parliament pin libraries the project also uses). A
missing tool fails the test with the command that installs it: a check never skips.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.harness import REPO

TOOLS_BIN = REPO / ".venv-tools" / "bin"


def tool(name: str) -> str:
    path = TOOLS_BIN / name
    if not path.exists():
        pytest.fail(f"{name} is not installed in {TOOLS_BIN}: run `bash .ci/setup` "
                    "(it installs .ci/tools-requirements.txt)")
    return str(path)


def run(args: list[str], timeout: int = 300, cwd: Path = REPO, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, input=stdin, capture_output=True, text=True, timeout=timeout, check=False)


def run_json(args: list[str], timeout: int = 300, cwd: Path = REPO) -> tuple[Any, subprocess.CompletedProcess]:
    proc = run(args, timeout=timeout, cwd=cwd)
    try:
        return json.loads(proc.stdout), proc
    except json.JSONDecodeError:
        pytest.fail(f"{Path(args[0]).name} did not print JSON (exit {proc.returncode}):\n"
                    f"{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
