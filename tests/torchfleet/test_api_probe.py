"""torchfleet.api_probe against loopback endpoints that listen, refuse and drop (tests/loopback.py): the
probe the preview workflow runs before deciding on TORCHFLEET_PREVIEW_WITHOUT_CLUSTER (issue 29)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time

import pytest

from tests.loopback import dropping, refusing_port
from torchfleet import api_probe


def kubeconfig(tmp_path, server: str) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
        "users": [{"name": "u", "user": {}}],
    }))
    return str(path)


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "torchfleet.api_probe", *args], capture_output=True, text=True,
                          timeout=120, check=False)


def test_a_listening_server_is_reachable(tmp_path):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        port = server.getsockname()[1]
        proc = run(kubeconfig(tmp_path, f"https://127.0.0.1:{port}"))
    assert (proc.returncode, proc.stdout) == (0, f"reachable: 127.0.0.1:{port}\n"), proc.stderr


def test_a_refusing_server_is_unreachable(tmp_path):
    port = refusing_port()
    proc = run(kubeconfig(tmp_path, f"https://127.0.0.1:{port}"), "--timeout", "30")
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.startswith(f"unreachable: 127.0.0.1:{port}: ConnectionRefusedError")


def test_a_dropping_server_is_unreachable_within_the_timeout(tmp_path):
    """Without the probe's own deadline this is what hangs: the connect neither succeeds nor fails."""
    with dropping() as port:
        with socket.socket() as s:  # the endpoint does drop: a plain connect does not get through in 1 s
            s.settimeout(1)
            with pytest.raises(TimeoutError):
                s.connect(("127.0.0.1", port))
        started = time.monotonic()
        proc = run(kubeconfig(tmp_path, f"https://127.0.0.1:{port}"), "--timeout", "2")
        elapsed = time.monotonic() - started
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.startswith(f"unreachable: 127.0.0.1:{port}:")
    assert "timed out" in proc.stdout or "no answer within 2 s" in proc.stdout  # the socket's or the probe's deadline
    assert elapsed >= 2  # it waited its timeout: a drop is not a refusal


def test_the_deadline_covers_a_hung_attempt(monkeypatch):
    """The whole probe, name resolution included, ends at its deadline."""
    released = threading.Event()

    def hung(*args, **kwargs):
        released.wait(60)
        raise OSError("released by the test")  # the probe's thread ends with an error it handles

    monkeypatch.setattr(api_probe.socket, "create_connection", hung)
    started = time.monotonic()
    try:
        assert "no answer within 0.5 s" in api_probe.probe("api.example.invalid", 443, 0.5)
        assert time.monotonic() - started < 30
    finally:
        released.set()  # else the thread outlives the test and fails in a later one (CI's warning)


def test_the_server_is_the_current_contexts(tmp_path):
    text = json.dumps({
        "clusters": [{"name": "a", "cluster": {"server": "https://127.0.0.9:6443"}},
                     {"name": "b", "cluster": {"server": "https://API.example:8443/path"}}],
        "contexts": [{"name": "ca", "context": {"cluster": "a"}}, {"name": "cb", "context": {"cluster": "b"}}],
        "current-context": "cb",
    })
    assert api_probe.server_of(text) == ("api.example", 8443)
    assert api_probe.server_of(text.replace(":8443/path", "")) == ("api.example", 443)


@pytest.mark.parametrize("text, says", [
    ("[", "not YAML"),
    ("- a list", "not a kubeconfig"),
    ('{"contexts": [], "current-context": "x"}', "current-context 'x' is not one of the contexts []"),
    ('{"contexts": [{"name": "x", "context": {"cluster": "c"}}], "current-context": "x"}', "has no server"),
    ('{"clusters": [{"name": "c", "cluster": {"server": "127.0.0.1:6443"}}],'
     ' "contexts": [{"name": "x", "context": {"cluster": "c"}}], "current-context": "x"}', "expected https://HOST"),
])
def test_a_file_without_a_server_exits_2_naming_what_is_wrong(tmp_path, text, says):
    path = tmp_path / "kubeconfig"
    path.write_text(text)
    proc = run(str(path))
    assert (proc.returncode, proc.stdout) == (2, "")
    assert says in proc.stderr and str(path) in proc.stderr


@pytest.mark.parametrize("timeout", ["0", "-1", "61"])
def test_a_timeout_out_of_range_exits_2(tmp_path, timeout):
    proc = run(kubeconfig(tmp_path, "https://127.0.0.1:1"), "--timeout", timeout)
    assert proc.returncode == 2 and "--timeout" in proc.stderr
