"""Every test: `torchfleet check` never asks a what-is-my-IP service beyond loopback (torchfleet/reach.py).

The team's rule: no test dials an address outside 127.0.0.0/8. The reach tests point
TORCHFLEET_MY_IP_URL at a server of their own on 127.0.0.1; every other test (and every command a test
runs as a subprocess, which inherits the variable) has the lookup off. Likewise no test asks a real Azure
CLI who is logged in (torchfleet/azure_admins.py): test_check_azure_admins gives its own `az`.
"""

from __future__ import annotations

import pytest

URL_ENV = "TORCHFLEET_MY_IP_URL"  # torchfleet.reach.URL_ENV (test_check_reach holds them equal)
AZURE_CALLER_ENV = "TORCHFLEET_AZURE_CALLER"  # torchfleet.azure_admins.CALLER_ENV
AWS_CALLER_ENV = "TORCHFLEET_AWS_CALLER"  # torchfleet.aws_admins.CALLER_ENV


@pytest.fixture(autouse=True)
def _no_ip_lookup(monkeypatch):
    monkeypatch.setenv(URL_ENV, "off")
    monkeypatch.setenv(AZURE_CALLER_ENV, "off")
    monkeypatch.setenv(AWS_CALLER_ENV, "off")  # test_check_aws_admins sets its own
