"""README.md's "offline" says where `check` uses the network, and the failure it quotes is check's own line.

The README said "Preview any stack offline: ... no network", while `check` looks up this machine's public
address over HTTPS (torchfleet/reach.py, for AWS and Azure stacks whose API admits only
network.publicAccessCidrs); only docs/deploy.md named TORCHFLEET_MY_IP_URL. Loopback only: the failing
lookup here is a port on 127.0.0.1 that refuses.
"""

from __future__ import annotations

import re

from tests.docs.test_readme import DOCS
from tests.harness import REPO
from tests.loopback import refusing_port
from torchfleet import reach
from torchfleet.cli import main

STACK = str(REPO / "stacks" / "Pulumi.aws-usw2.yaml")


def _offline_paragraph() -> str:
    [paragraph] = [p for p in DOCS["README.md"].split("\n\n") if p.startswith("Preview any stack offline")]
    return " ".join(paragraph.split())


def test_the_readme_s_offline_paragraph_names_the_lookup_and_how_to_turn_it_off():
    text = _offline_paragraph()
    assert "no network," not in text  # the claim that did not hold
    assert reach.DEFAULT_URL in text and f"{reach.URL_ENV}=off" in text
    assert "exit code does not change" in text


def test_the_failure_the_readme_quotes_is_what_check_prints(monkeypatch, capsys):
    quoted = re.search(r"`(reach: could not learn [^<`]*)<url>: <why>`", _offline_paragraph()).group(1)
    url = f"http://127.0.0.1:{refusing_port()}/"
    monkeypatch.setenv(reach.URL_ENV, url)
    code = main(["check", "--stack-file", STACK])
    err = capsys.readouterr().err
    [line] = [line for line in err.splitlines() if line.startswith("reach: ")]
    assert line.startswith(f"{quoted}{url}: no answer (") and f"curl -s {reach.DEFAULT_URL}" in line
    monkeypatch.setenv(reach.URL_ENV, "off")
    assert main(["check", "--stack-file", STACK]) == code  # the lookup never sets it
    assert not [line for line in capsys.readouterr().err.splitlines() if "public address" in line]
