"""`torchfleet check` says whether this machine reaches the API the stack makes (torchfleet/reach.py, issue 29).

The what-is-my-IP service is a server of the test's own on 127.0.0.1 (TORCHFLEET_MY_IP_URL), answering
an address from a documentation range (RFC 5737) that nothing dials. The answer is compared with the
stack's network.publicAccessCidrs; a failed lookup (a closed port, a wrong answer, an HTTP error) says
so and never changes the exit code.
"""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
import yaml

from tests import conftest
from tests.harness import STACKS_DIR
from tests.harness.placeholders import replaced
from torchfleet import reach
from torchfleet.cli import main

ME = "127.0.0.23"  # only data, never dialled (documentation ranges are placeholders: components/placeholders.py)


@pytest.fixture
def ip_service(monkeypatch):
    """A what-is-my-IP service on 127.0.0.1; set ``.answer`` (bytes) and ``.status``."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(server.status)
            self.end_headers()
            self.wfile.write(server.answer)

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    server.answer, server.status = f"{ME}\n".encode(), 200
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv(reach.URL_ENV, f"http://127.0.0.1:{server.server_port}/")
    for proxy in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY"):
        monkeypatch.delenv(proxy, raising=False)  # the test's server is reached directly
    yield server
    server.shutdown()
    server.server_close()


def check(capsys, tmp_path: Path, stack: str, network: dict) -> tuple[int, list[str]]:
    config = replaced(stack)  # placeholders replaced
    config["torchfleet:network"] = {**config.get("torchfleet:network", {}), **network}
    path = tmp_path / f"Pulumi.{stack}.yaml"
    path.write_text(yaml.safe_dump({"config": config}, sort_keys=False))
    code = main(["check", "--stack", str(path)])
    err = capsys.readouterr().err
    lines = err.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("reach: ")), len(lines))
    return code, lines[start:]


def test_conftest_turns_off_the_lookup_by_the_same_name():
    assert conftest.URL_ENV == reach.URL_ENV


@pytest.mark.parametrize("stack", ["aws-usw2", "azure-eus"])
def test_a_machine_outside_the_cidrs_gets_the_config_line(capsys, tmp_path, ip_service, stack):
    code, lines = check(capsys, tmp_path, stack, {"publicAccessCidrs": ["127.1.0.0/24"], "privateOnly": False})
    assert code == 0, lines  # advice, not a violation
    assert f"this machine ({ME}," in lines[0] and "is NOT in" in lines[0]
    assert lines[1] == (f"  pulumi config set --path 'torchfleet:network.publicAccessCidrs[1]' {ME}/32 "
                        f"--stack {stack}")


def test_a_machine_inside_the_cidrs_reaches_it(capsys, tmp_path, ip_service):
    _, lines = check(capsys, tmp_path, "aws-usw2", {"publicAccessCidrs": ["127.1.0.0/24", "127.0.0.0/24"]})
    assert lines == [f"reach: this machine ({ME}, as http://127.0.0.1:{ip_service.server_port}/ sees it) is in "
                     "torchfleet:network.publicAccessCidrs ['127.1.0.0/24', '127.0.0.0/24'] (127.0.0.0/24): "
                     "it reaches the API"]


@pytest.mark.parametrize(("answer", "status", "problem"), [
    (b"<html>hello</html>", 200, "not one IP address"),
    (b"", 503, "HTTP 503"),
    (b"1" * 500, 200, "not one IP address"),
])
def test_a_wrong_answer_says_so(capsys, tmp_path, ip_service, answer, status, problem):
    ip_service.answer, ip_service.status = answer, status
    code, lines = check(capsys, tmp_path, "aws-usw2", {"publicAccessCidrs": ["127.1.0.0/24"]})
    assert code == 0 and len(lines) == 1
    assert "could not learn this machine's public address" in lines[0] and problem in lines[0]
    assert "curl -s https://checkip.amazonaws.com" in lines[0]


def test_offline_says_so(capsys, tmp_path, monkeypatch):
    with socket.socket() as s:  # a port on loopback that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv(reach.URL_ENV, f"http://127.0.0.1:{port}/")
    code, lines = check(capsys, tmp_path, "azure-eus", {"publicAccessCidrs": ["127.1.0.0/24"]})
    assert code == 0 and "could not learn" in lines[0] and "no answer" in lines[0]


def test_plain_http_elsewhere_is_refused_before_dialling():
    found = reach.my_address("http://203.0.113.9/")  # RFC 5737: refused before any connection
    assert found.address is None and "https://" in found.problem


def test_gke_dns_endpoint_is_reachable_with_iam(capsys, tmp_path, ip_service):
    _, lines = check(capsys, tmp_path, "gcp-usc1", {})
    assert len(lines) == 1 and "DNS-based endpoint" in lines[0] and "gated by IAM" in lines[0]


def test_private_only_names_the_docs_section(capsys, tmp_path, ip_service):
    network = {"publicAccessCidrs": [], "privateOnly": True}
    _, lines = check(capsys, tmp_path, "azure-eus", network)
    assert len(lines) == 1 and "must run from inside the network" in lines[0]
    assert "docs/deploy.md#reaching-the-api" in lines[0]
    assert "## Reaching the API" in (STACKS_DIR.parent / "docs" / "deploy.md").read_text()


def test_lookup_off_never_dials(capsys, tmp_path):
    """The suite's default (tests/conftest.py): no address lookup, nothing said about one."""
    _, lines = check(capsys, tmp_path, "aws-usw2", {"publicAccessCidrs": ["127.1.0.0/24"]})
    assert lines == []
