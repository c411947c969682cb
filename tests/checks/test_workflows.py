"""actionlint and zizmor on .github/workflows: both report nothing; every action is pinned by commit."""

from __future__ import annotations

import contextlib
import json
import re
import socket
import subprocess
import time

import pytest
import yaml

from tests.checks.tools import run, run_json, tool
from tests.harness import REPO

WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.y*ml"))
# `uses: owner/repo[/path]@<40 hex> # v1.2.3`, optionally `(YYYY-MM-DD)`, the release's date: a tag can be moved,
# a commit cannot
# (https://docs.github.com/en/actions/security-for-github-actions/security-guides/security-hardening-for-github-actions#using-third-party-actions).
PINNED = re.compile(
    r"^\s*(?:-\s+)?uses:\s+[\w.-]+/[\w./-]+@[0-9a-f]{40}\s+#\s+v\d+(\.\d+)*(\s+\(\d{4}-\d{2}-\d{2}\))?\s*$"
)

BAD_WORKFLOW = """\
name: bad
on:
  pull_request_target:
jobs:
  x:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
        with:
          ref: ${{ github.event.pull_request.head.sha }}
      - run: echo "${{ github.event.pull_request.title }}"
"""


def test_there_are_the_three_workflows():
    assert {w.name for w in WORKFLOWS} >= {"ci.yml", "preview.yml", "image.yml"}


def test_actionlint_reports_nothing():
    proc = run([tool("actionlint"), "-no-color", *map(str, WORKFLOWS)])
    assert proc.returncode == 0, f"actionlint:\n{proc.stdout}{proc.stderr}"


def test_zizmor_reports_nothing():
    # --offline: no GitHub API in tests (the online audits, e.g. ref-version-mismatch, need it).
    findings, proc = run_json([tool("zizmor"), "--offline", "--format", "json", *map(str, WORKFLOWS)])
    assert findings == [], "zizmor:\n" + "\n".join(f"{f['ident']}: {f['desc']}" for f in findings)
    assert proc.returncode == 0, proc.stderr


def test_both_linters_do_report_a_dangerous_workflow(tmp_path):
    """The checks above can fail: a pull_request_target workflow with injection and a tag pin."""
    bad = tmp_path / ".github" / "workflows" / "bad.yml"
    bad.parent.mkdir(parents=True)
    bad.write_text(BAD_WORKFLOW)
    proc = run([tool("actionlint"), "-no-color", str(bad)])
    assert proc.returncode == 1 and "potentially untrusted" in proc.stdout
    findings, _ = run_json([tool("zizmor"), "--offline", "--format", "json", str(bad)])
    assert {"dangerous-triggers", "template-injection", "unpinned-uses"} <= {f["ident"] for f in findings}


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_every_action_is_pinned_by_commit_with_its_release_named(workflow):
    lines = [line for line in workflow.read_text().splitlines() if re.match(r"^\s*(-\s+)?uses:", line)]
    assert lines, f"{workflow.name} uses no actions?"
    assert [line for line in lines if not PINNED.match(line)] == []


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_least_privilege_and_no_persisted_token(workflow):
    doc = yaml.safe_load(workflow.read_text())
    triggers = doc.get(True, doc.get("on"))  # YAML 1.1 reads the key `on` as True
    assert "pull_request_target" not in triggers
    assert doc["permissions"] == {}, "no default permissions at the top; each job asks for its own"
    for name, job in doc["jobs"].items():
        assert "permissions" in job, f"job {name} must state its permissions"
        for step in job["steps"]:
            if step.get("uses", "").startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False, f"job {name}: persist-credentials"


def test_preview_uses_oidc_and_never_long_lived_keys():
    doc = yaml.safe_load((REPO / ".github" / "workflows" / "preview.yml").read_text())
    text = json.dumps(doc)  # what runs, without the comments
    assert doc["jobs"]["preview"]["permissions"]["id-token"] == "write"
    assert "id-token" not in doc["jobs"]["offline"]["permissions"]
    for key in ("aws-access-key-id", "aws-secret-access-key", "credentials_json", "client-secret",
                '"creds"', "PULUMI_ACCESS_TOKEN", "secrets."):
        assert key not in text, f"preview.yml must not use {key}"


def test_the_image_is_pushed_on_a_tag_only_after_its_scan_with_the_jobs_own_token():
    """image.yml (issue 21): a release tag builds the training image, Trivy fails the run on a fixable HIGH or
    CRITICAL finding before anything is pushed, and the push uses the job's GITHUB_TOKEN, which may write
    packages and read the code, nothing more."""
    doc = yaml.safe_load((REPO / ".github" / "workflows" / "image.yml").read_text())
    assert doc[True] == {"push": {"tags": ["v*.*.*"]}}
    (job,) = doc["jobs"].values()
    assert job["permissions"] == {"contents": "read", "packages": "write"}
    steps = [s.get("uses", "").split("@")[0] or s.get("name", "") for s in job["steps"]]
    build, scan, login = (steps.index(a) for a in ("docker/build-push-action", "aquasecurity/trivy-action",
                                                   "docker/login-action"))
    push = next(i for i, s in enumerate(job["steps"]) if "docker push" in s.get("run", ""))
    assert build < scan < login < push
    assert job["steps"][build]["with"]["push"] is False and job["steps"][build]["with"]["context"] == "training-image"
    trivy = job["steps"][scan]["with"]
    assert (trivy["exit-code"], trivy["severity"], trivy["ignore-unfixed"]) == ("1", "HIGH,CRITICAL", True)
    assert job["steps"][login]["with"]["password"] == "${{ secrets.GITHUB_TOKEN }}"
    assert "secrets." not in json.dumps([s for i, s in enumerate(job["steps"]) if i != login])


def _preview_steps() -> list[dict]:
    doc = yaml.safe_load((REPO / ".github" / "workflows" / "preview.yml").read_text())
    return doc["jobs"]["preview"]["steps"]


def _step_index(steps: list[dict], uses: str) -> int:
    return next(i for i, s in enumerate(steps) if s.get("uses", "").startswith(uses + "@"))


def test_the_gcp_preview_installs_the_auth_plugin_before_the_preview():
    """The stack's kubeconfig execs gke-gcloud-auth-plugin, which the hosted runner's apt gcloud lacks and cannot
    install (actions/runner-images install-google-cloud-cli.sh @11425aeb): without it every GCP preview is a
    silent client-side diff."""
    steps = _preview_steps()
    auth, gcloud, preview = (_step_index(steps, a) for a in (
        "google-github-actions/auth", "google-github-actions/setup-gcloud", "pulumi/actions"))
    assert auth < gcloud < preview
    assert steps[gcloud]["if"] == "startsWith(matrix.stack, 'gcp-')"
    assert "gke-gcloud-auth-plugin" in steps[gcloud]["with"]["install_components"].split(",")
    assert re.fullmatch(r"\d+\.\d+\.\d+", steps[gcloud]["with"]["version"]), "a pinned gcloud, not latest"


def _reach_step() -> tuple[int, dict]:
    steps = _preview_steps()
    (found,) = [(i, s) for i, s in enumerate(steps) if "kubectl" in s.get("run", "")]
    return found


@pytest.mark.parametrize("case, code, says", [
    ("no-output", 0, "::notice title=gcp-usc1: no cluster::"),
    ("unreachable", 1, "::error title=gcp-usc1: cluster unreachable::"),
    ("reachable", 0, "::notice title=gcp-usc1: cluster reached::"),
])
def test_the_gcp_preview_says_whether_it_reached_the_cluster(tmp_path, case, code, says):
    """The step's own script, run by bash with a pulumi and a kubectl on PATH that answer as each case would:
    an unreachable cluster fails the job with an error annotation (pulumi-kubernetes itself says nothing)."""
    index, step = _reach_step()
    assert index > _step_index(_preview_steps(), "pulumi/actions") and step["if"].startswith("always() && ")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    output = "" if case == "no-output" else "apiVersion: v1\nkind: Config\n"
    (bin_dir / "pulumi").write_text(f"#!/bin/sh\nprintf '%s' '{output}'\n[ -n '{output}' ]\n")
    kubectl = ("echo 'Unable to connect to the server: getting credentials: exec: executable "
               "gke-gcloud-auth-plugin not found' >&2; exit 1") if case == "unreachable" else 'echo "{}"'
    (bin_dir / "kubectl").write_text(f"#!/bin/sh\n{kubectl}\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    summary = tmp_path / "summary.md"
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "RUNNER_TEMP": str(tmp_path), "GITHUB_STEP_SUMMARY": str(summary),
           "STACK": "gcp-usc1", "PULUMI_STACK": "org/torchfleet/gcp-usc1"}
    proc = subprocess.run(["bash", "-e", "-c", step["run"]], env=env, capture_output=True, text=True, timeout=30,
                          check=False)
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert proc.stdout.startswith(says)
    assert "gcp-usc1" in summary.read_text()
    if case == "unreachable":
        assert "client-side diff" in proc.stdout and "gke-gcloud-auth-plugin not found" in proc.stdout


def _probe_step() -> tuple[int, dict]:
    steps = _preview_steps()
    (found,) = [(i, s) for i, s in enumerate(steps) if "torchfleet.api_probe" in s.get("run", "")]
    return found


def test_the_aws_and_azure_previews_probe_the_api_before_the_preview():
    """Issue 29: a hosted runner is outside network.publicAccessCidrs, whose endpoint drops its connections, and
    the provider's preview then does not end: the probe decides on TORCHFLEET_PREVIEW_WITHOUT_CLUSTER first."""
    steps = _preview_steps()
    index, _ = _probe_step()
    install = next(i for i, s in enumerate(steps) if "pip install -q -e" in s.get("run", ""))
    cli = next(i for i, s in enumerate(steps)
               if s.get("uses", "").startswith("pulumi/actions@") and "command" not in s["with"])
    login = _step_index(steps, "pulumi/auth-actions")
    preview = next(i for i, s in enumerate(steps) if s.get("with", {}).get("command") == "preview")
    assert install < cli < index < preview and login < index
    for i in (cli, index):
        assert steps[i]["if"] == "startsWith(matrix.stack, 'aws-') || startsWith(matrix.stack, 'azure-')"
    assert steps[cli]["with"]["pulumi-version"] == steps[preview]["with"]["pulumi-version"]
    assert not [s for s in steps if "azure-" in s.get("if", "") and "client-side diff (no schema" in s.get("run", "")]


def _kubeconfig(port: int) -> str:
    return json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "x", "users": [{"name": "u", "user": {}}],
        "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{port}"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
    })


NOT_REACHED = "::notice title=azure-eus: cluster not reached::cluster NOT reached (unreachable: 127.0.0.1:"


@pytest.mark.parametrize("case, code, switched, says", [
    ("no-output", 0, False, "::notice title=azure-eus: no cluster::"),
    ("listening", 0, False, "::notice title=azure-eus: cluster reached::cluster reached (reachable: 127.0.0.1:"),
    ("listening-aws", 0, False, "::notice title=aws-usw2: cluster reached::cluster reached (reachable: 127.0.0.1:"),
    ("refusing", 0, True, NOT_REACHED),
    ("dropping", 0, True, NOT_REACHED),
    ("not-a-kubeconfig", 1, False, "::error title=azure-eus: probe failed::"),
])
def test_the_probe_step_sets_the_switch_only_when_the_api_cannot_be_reached(tmp_path, case, code, switched, says):
    """The step's own script, with a pulumi on PATH printing a kubeconfig whose server is a loopback endpoint
    that listens, refuses or drops (tests/loopback.py), and the real probe (.venv's python, the repository's
    torchfleet): the switch goes to GITHUB_ENV only when the API cannot be reached, in bounded time."""
    from tests.loopback import dropping, refusing_port

    _, step = _probe_step()
    stack_name = "aws-usw2" if case.endswith("-aws") else "azure-eus"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    env_file, summary = tmp_path / "env", tmp_path / "summary.md"
    env_file.write_text("")
    with contextlib.ExitStack() as stack:
        if case.startswith("listening"):
            server = stack.enter_context(socket.socket())
            server.bind(("127.0.0.1", 0))
            server.listen(8)
            port = server.getsockname()[1]
        elif case == "dropping":
            port = stack.enter_context(dropping())
        else:
            port = refusing_port()
        output = {"no-output": "", "not-a-kubeconfig": "[1, 2]"}.get(case, _kubeconfig(port))
        (bin_dir / "pulumi").write_text(f"#!/bin/sh\nprintf '%s' '{output}'\n[ -n '{output}' ]\n")
        (bin_dir / "pulumi").chmod(0o755)
        env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "RUNNER_TEMP": str(tmp_path), "GITHUB_STEP_SUMMARY": str(summary),
               "GITHUB_ENV": str(env_file), "STACK": stack_name, "PULUMI_STACK": f"org/torchfleet/{stack_name}"}
        started = time.monotonic()
        proc = subprocess.run(["bash", "-e", "-c", step["run"]], env=env, cwd=REPO, capture_output=True, text=True,
                              timeout=120, check=False)
        elapsed = time.monotonic() - started
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert proc.stdout.startswith(says), proc.stdout
    assert env_file.read_text() == ("TORCHFLEET_PREVIEW_WITHOUT_CLUSTER=true\n" if switched else "")
    assert not (tmp_path / "kubeconfig").exists(), "the kubeconfig is deleted after the probe"
    if case == "dropping":
        assert elapsed >= 10  # the probe waited out its 10 s: a drop is not a refusal
    if code == 0:
        assert stack_name in summary.read_text()
    if switched:
        assert "client-side diff" in proc.stdout and "no drift" in proc.stdout
    if case.startswith("listening"):
        # Reached is not let in (a review): the provider still diffs client-side, and the summary says why.
        assert "previews against the API server" not in proc.stdout
        assert "client-side diff" in proc.stdout and "marks the cluster unreachable" in proc.stdout
        assert ("401 Unauthorized" if stack_name == "aws-usw2" else "does not install") in proc.stdout


def test_the_preview_never_refreshes():
    """A refresh dials the kubeconfig kept in the state before the program runs, so the switch cannot help it;
    from a hosted runner it fails after about a minute and suggests PULUMI_K8S_DELETE_UNREACHABLE, which would
    drop a living cluster's objects from the state (docs/deploy.md). pulumi/actions' `refresh` input adds
    --refresh, and Pulumi.yaml's options.refresh: always refreshes every preview the CLI runs without an
    explicit --refresh=false (pulumi pkg/cmd/pulumi/operations/io.go GetRefreshOption, v3.274.0)."""
    text = (REPO / ".github" / "workflows" / "preview.yml").read_text()
    assert "--refresh" not in text and "--run-program" not in text
    steps = _preview_steps()
    runs = [s for s in steps if s.get("uses", "").startswith("pulumi/actions@") and "command" in s.get("with", {})]
    assert [s["with"]["command"] for s in runs] == ["preview"]
    assert runs[0]["with"].get("refresh") is False
    project = yaml.safe_load((REPO / "Pulumi.yaml").read_text())
    assert (project.get("options") or {}).get("refresh") != "always"
