"""checkov over the manifests a test wrote to a folder: the job pods (test_jobs_checkov.py) and the
tensorboard pod (test_jobs_tensorboard.py) run it the same way, each with its own skips."""

import json
import subprocess
from collections.abc import Iterable
from pathlib import Path

import pytest

from tests.harness import REPO

CHECKOV = REPO / ".venv-tools" / "bin" / "checkov"


def checkov_results(directory: Path, skips: Iterable[str]) -> list[dict]:
    """The `results` of each checkov report ({"passed_checks": [...], "failed_checks": [...]}) for the
    Kubernetes manifests under `directory`, with the checks `skips` names skipped."""
    if not CHECKOV.exists():
        pytest.fail(f"{CHECKOV} is missing: run bash .ci/setup")
    proc = subprocess.run(
        [str(CHECKOV), "--directory", str(directory), "--framework", "kubernetes", "--output", "json", "--compact",
         "--skip-download", "--skip-check", ",".join(skips)],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert proc.returncode in (0, 1) and proc.stdout.strip(), proc.stderr[-2000:]
    reports = json.loads(proc.stdout)
    return [r.get("results", {}) for r in (reports if isinstance(reports, list) else [reports])]
