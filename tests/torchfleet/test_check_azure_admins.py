"""`torchfleet check` says whether whoever runs `pulumi up` is in torchfleet:admins on Azure (issue 29: the
implicit deployer grant is gone, the list is the one source), reading the `oid` of the Azure CLI's token."""

from __future__ import annotations

import base64
import json
import os
import stat

import pytest

from tests.harness import STACKS_DIR
from tests.harness.placeholders import replaced_file
from torchfleet import azure_admins
from torchfleet.cli import main
from torchfleet.preview.runner import stack_spec

LISTED = "00000000-0000-0000-0000-000000000000"  # the example stack's placeholder admin
STRANGER = "00000000-0000-0000-0000-0000000000d4"


def _jwt(claims: dict) -> str:
    part = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).decode().rstrip("=")  # noqa: E731
    return f"{part({'alg': 'none'})}.{part(claims)}.sig"


@pytest.fixture
def fake_az(tmp_path, monkeypatch):
    """An `az` on PATH that prints the token it is given (the real one prints the CLI's cached token)."""
    def install(stdout: str, code: int = 0):
        script = tmp_path / "az"
        script.write_text(f"#!/bin/sh\n[ \"$1 $2\" = 'account get-access-token' ] || exit 9\n"
                          f"printf '%s\\n' '{stdout}'\nexit {code}\n")
        script.chmod(script.stat().st_mode | stat.S_IEXEC)
        monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
        monkeypatch.delenv(azure_admins.CALLER_ENV, raising=False)
    return install


@pytest.fixture(scope="module")
def spec():
    return stack_spec(STACKS_DIR / "Pulumi.azure-eus.yaml")


def test_the_token_oid_is_read_without_a_library():
    assert azure_admins.token_object_id(_jwt({"oid": STRANGER, "tid": "t"})) == STRANGER
    assert azure_admins.token_object_id("not-a-token") is None
    assert azure_admins.token_object_id(_jwt({"sub": "x"})) is None


def test_a_listed_caller_is_confirmed(fake_az, spec):
    fake_az(_jwt({"oid": LISTED.upper()}))  # object ids compare case-insensitively
    (line,) = azure_admins.report(spec)
    assert line.startswith("admins: you (") and f"User:{LISTED}" in line


def test_a_caller_not_listed_is_warned_with_the_line_that_adds_them(fake_az, spec):
    fake_az(_jwt({"oid": STRANGER}))
    (line,) = azure_admins.report(spec)
    assert "warning" in line and "403" in line
    assert f"pulumi config set --path 'torchfleet:admins[1]' User:{STRANGER}" in line


def test_no_login_says_it_could_not_tell(fake_az, spec):
    fake_az("", code=1)
    (line,) = azure_admins.report(spec)
    assert "could not tell" in line and "az login" in line


def test_the_variable_names_the_caller_or_turns_the_check_off(monkeypatch, spec):
    monkeypatch.setenv(azure_admins.CALLER_ENV, STRANGER)
    assert "warning" in azure_admins.report(spec)[0]
    monkeypatch.setenv(azure_admins.CALLER_ENV, "off")
    assert azure_admins.report(spec) == []


def test_check_prints_it_and_keeps_its_exit_code(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv(azure_admins.CALLER_ENV, STRANGER)
    code = main(["check", "--stack-file", str(replaced_file("azure-eus", tmp_path))])  # no placeholder left
    err = capsys.readouterr().err
    assert code == 0
    assert any(line.startswith("admins: warning") for line in err.splitlines()), err


def test_other_clouds_say_nothing(monkeypatch):
    monkeypatch.setenv(azure_admins.CALLER_ENV, STRANGER)
    assert azure_admins.report(stack_spec(STACKS_DIR / "Pulumi.gcp-usc1.yaml")) == []


def test_the_suite_turns_the_lookup_off_under_the_same_name():
    from tests import conftest

    assert conftest.AZURE_CALLER_ENV == azure_admins.CALLER_ENV
