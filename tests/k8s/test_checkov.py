"""checkov finds nothing in k8s/ or in any stack's rendered manifests, apart from the listed skips.

One checkov run covers k8s/ and every stack (each in its own folder): checkov's start-up is
most of its time.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from components.kube import K8S_BASE, K8S_ROOT
from tests.harness import REPO, STACKS
from tests.k8s.rendered import STATIC_FILES, render

CHECKOV = REPO / ".venv-tools" / "bin" / "checkov"
SKIPS: dict[str, str] = yaml.safe_load((Path(__file__).parent / "checkov_skips.yaml").read_text())
STATIC = "k8s"


def test_every_skip_has_a_reason():
    assert SKIPS
    for check, reason in SKIPS.items():
        assert check.startswith("CKV"), check
        assert isinstance(reason, str) and len(reason.split()) >= 8, f"{check}: say why it is skipped"


def run_checkov(directory: Path) -> dict[str, list[dict]]:
    """checkov's passed and failed checks for the Kubernetes manifests under `directory`."""
    if not CHECKOV.exists():
        pytest.fail(f"{CHECKOV} is missing: run bash .ci/setup")
    proc = subprocess.run(
        [str(CHECKOV), "--directory", str(directory), "--framework", "kubernetes", "--output", "json",
         "--compact", "--skip-download", "--skip-check", ",".join(SKIPS)],
        capture_output=True, text=True, timeout=300, check=False,
    )
    if proc.returncode not in (0, 1) or not proc.stdout.strip():
        pytest.fail(f"checkov did not run (exit {proc.returncode}): {proc.stderr[-2000:]}")
    reports = json.loads(proc.stdout)
    reports = reports if isinstance(reports, list) else [reports]
    return {
        kind: [c for r in reports for c in r.get("results", {}).get(f"{kind}_checks", [])]
        for kind in ("passed", "failed")
    }


@pytest.fixture(scope="module")
def scanned(tmp_path_factory) -> dict[str, list[dict]]:
    """checkov results for k8s/ and every stack's manifests."""
    root = tmp_path_factory.mktemp("checkov")
    for path in STATIC_FILES:
        target = root / STATIC / path.relative_to(K8S_ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
    for stack in STACKS:
        render(stack, root / stack)
    return run_checkov(root)


def under(checks: list[dict], folder: str) -> list[dict]:
    return [c for c in checks if c["file_path"].lstrip("/").startswith(f"{folder}/")]


def failures(checks: list[dict]) -> list[str]:
    return sorted(f"{c['check_id']} {c['check_name']} in {c['file_path']} ({c['resource']})" for c in checks)


@pytest.mark.parametrize("folder", [STATIC, *STACKS])
def test_no_failed_check(scanned, folder):
    assert under(scanned["passed"], folder), f"checkov checked nothing in {folder}: it would pass anything"
    assert failures(under(scanned["failed"], folder)) == []


def test_checkov_does_report_a_bad_manifest(tmp_path):
    """The check can fail: a privileged root container is reported."""
    deployment = yaml.safe_load((K8S_BASE / "controller" / "deployment.yaml").read_text())
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["securityContext"] = {"privileged": True, "runAsUser": 0}
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(deployment))
    ids = {c["check_id"] for c in run_checkov(tmp_path)["failed"]}
    assert "CKV_K8S_16" in ids  # privileged container
