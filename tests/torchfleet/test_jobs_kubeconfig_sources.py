"""The kubeconfig the client reads without --kubeconfig, and its exec credential plugin (issue 23).

Regressions: ``$KUBECONFIG`` (or ~/.kube/config) naming a folder or an unreadable file ended in
"unexpected error" (exit 1), where ``--kubeconfig`` of the same gave a clear exit 2; an exec plugin
that never answered hung `torchfleet list` for ever (the client waits on it with no timeout).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest
import yaml

from torchfleet.cli import main
from torchfleet.jobs import exec_auth


def run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    for var in ("TORCHFLEET_STACK", "TORCHFLEET_CONTEXT", "KUBECONFIG"):
        monkeypatch.delenv(var, raising=False)


@pytest.mark.parametrize("where", ["KUBECONFIG", "~/.kube/config", "second in KUBECONFIG"])
def test_a_default_kubeconfig_that_is_a_folder_is_exit_2_naming_it(tmp_path, monkeypatch, capsys, where):
    folder = tmp_path / "home" / ".kube" / "config"
    folder.mkdir(parents=True)
    if where == "KUBECONFIG":
        monkeypatch.setenv("KUBECONFIG", str(folder))
    elif where == "second in KUBECONFIG":
        monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(tmp_path / "missing"), str(folder)]))
    code, out, err = run(["list", "--operator", "torchelastic"], capsys)
    assert (code, out) == (2, "")
    label = "~/.kube/config" if where == "~/.kube/config" else f"$KUBECONFIG: {folder}"
    assert f"{label} is a folder" in err and "unexpected error" not in err


def test_an_unreadable_default_kubeconfig_is_exit_2_naming_it(tmp_path):
    # file modes do not stop root: the command runs in a user namespace without root's capabilities
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("no unshare(1)")
    secret = tmp_path / "kubeconfig"
    secret.write_text("apiVersion: v1\nclusters: []\n")
    secret.chmod(0)
    env = {**os.environ, "KUBECONFIG": str(secret), "HOME": str(tmp_path)}
    env.pop("TORCHFLEET_STACK", None)
    done = subprocess.run([unshare, "--user", sys.executable, "-m", "torchfleet", "list", "--operator", "torchelastic"],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    assert f"$KUBECONFIG: {secret} cannot be read (Permission denied)" in done.stderr


def test_an_exec_plugin_that_never_answers_is_stopped_and_named(tmp_path, monkeypatch, capsys):
    plugin = tmp_path / "hung-plugin"
    plugin.write_text("#!/bin/sh\nexec sleep 600\n")
    plugin.chmod(0o755)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1",
                                                  "command": str(plugin), "interactiveMode": "Never"}}}],
    }))
    monkeypatch.setattr(exec_auth, "EXEC_TIMEOUT_S", 2.0)
    started = time.monotonic()
    code, out, err = run(["list", "--operator", "torchelastic", "--kubeconfig", str(kubeconfig)], capsys)
    assert time.monotonic() - started < 60  # bounded: before the fix it never returned
    assert (code, out) == (2, "")
    assert f"the credential plugin '{plugin}'" in err and "gave no answer in 2 s" in err
