"""`torchfleet check` on AWS says whether whoever runs `pulumi up` is in torchfleet:admins (the one source of
cluster admins; `pulumi up` refuses otherwise: components/clouds/aws/admins.py), offline from
$TORCHFLEET_AWS_CALLER, and warns when the list names no one."""

from __future__ import annotations

import pytest

from tests.components.spec.configs import config, ok
from tests.harness.placeholders import replaced_file
from torchfleet import aws_admins
from torchfleet.cli import main

ROLE = "arn:aws:iam::123456789012:role/platform"


def spec(admins):
    return ok(config("aws", admins=admins))


def test_an_empty_list_is_a_warning_naming_the_key(monkeypatch):
    monkeypatch.delenv(aws_admins.CALLER_ENV, raising=False)
    [line] = aws_admins.report(spec(None))
    assert line.startswith("admins: warning: torchfleet:admins lists no one") and "refuses to start" in line


def test_a_listed_caller_is_confirmed_from_its_assumed_role_session(monkeypatch):
    monkeypatch.setenv(aws_admins.CALLER_ENV, "arn:aws:sts::123456789012:assumed-role/platform/alice-cli")
    assert aws_admins.report(spec([ROLE])) == [f"admins: you ({ROLE}, from $TORCHFLEET_AWS_CALLER) are in "
                                               "torchfleet:admins"]


def test_an_unlisted_caller_gets_the_line_that_adds_it(monkeypatch):
    monkeypatch.setenv(aws_admins.CALLER_ENV, "arn:aws:iam::123456789012:role/ci-preview")
    [line] = aws_admins.report(spec([ROLE]))
    assert line.startswith("admins: warning: torchfleet:admins does not list arn:aws:iam::123456789012:role/ci-preview")
    assert "pulumi config set --path 'torchfleet:admins[1]' arn:aws:iam::123456789012:role/ci-preview" in line


def test_without_the_variable_check_says_how_to_tell_and_other_clouds_get_nothing(monkeypatch):
    monkeypatch.delenv(aws_admins.CALLER_ENV, raising=False)
    [line] = aws_admins.report(spec([ROLE]))
    assert "set $TORCHFLEET_AWS_CALLER" in line and "aws sts get-caller-identity" in line
    assert aws_admins.report(ok(config("gcp"))) == []
    monkeypatch.setenv(aws_admins.CALLER_ENV, "off")
    assert aws_admins.report(spec([ROLE])) == []


@pytest.mark.parametrize("caller", ["arn:aws:iam::123456789012:user/someone"])
def test_check_prints_it_on_stderr_and_keeps_its_exit_code(monkeypatch, capsys, caller, tmp_path):
    monkeypatch.setenv(aws_admins.CALLER_ENV, caller)
    code = main(["check", "--stack-file", str(replaced_file("aws-usw2", tmp_path))])  # no placeholder left
    err = capsys.readouterr().err
    assert code == 0
    assert "admins: warning: torchfleet:admins lists no one" in err  # the example stack lists no admin
    assert "deployer actions autoscaling:CreateOrUpdateTags" in err
