"""Is whoever runs `pulumi up` an admin of the EKS cluster? (torchfleet:admins is the one source on AWS too)

The AWS stack grants cluster admin to torchfleet:admins only, and a real `pulumi up` by an identity it does
not list is refused before anything is created (components/clouds/aws/admins.py). `torchfleet check` says so
offline: the caller is $TORCHFLEET_AWS_CALLER, the role ARN `pulumi up` runs as (an assumed-role session's
arn:aws:sts::ACCOUNT:assumed-role/NAME/SESSION is read as arn:aws:iam::ACCOUNT:role/NAME, as EKS names it when
the role has no path); without it, check says how to find it. No network, no AWS call. Advice on stderr.
"""

from __future__ import annotations

import os
import re

from components.spec import PlatformSpec

CALLER_ENV = "TORCHFLEET_AWS_CALLER"
_SESSION = re.compile(r"^arn:(?P<partition>[^:]+):sts::(?P<account>\d{12}):assumed-role/(?P<role>[^/]+)/.+$")


def role_arn(arn: str) -> str:
    """The role an access entry names for `arn` (an assumed-role session's role; anything else as given)."""
    m = _SESSION.match(arn.strip())
    return f"arn:{m['partition']}:iam::{m['account']}:role/{m['role']}" if m else arn.strip()


def report(spec: PlatformSpec) -> list[str]:
    """What `check` prints about the caller and torchfleet:admins (each line starts with "admins: ")."""
    # Imported here: components.clouds.aws's __init__ imports pulumi_aws, which the CLI's slim install
    # (no `platform` extra) lacks, and cli imports check (tests/torchfleet/test_slim_install.py).
    from components.clouds.aws.admins import KEY, caller_problem

    named = os.environ.get(CALLER_ENV, "").strip()
    if spec.cloud != "aws" or named.lower() == "off":
        return []
    if not spec.access.admins:
        return [f"admins: warning: {KEY} lists no one, and on AWS nobody else is a cluster admin: `pulumi up` "
                f"refuses to start (list yourself and every identity that runs it: docs/deploy-aws.md)"]
    if not named:
        return [f"admins: set ${CALLER_ENV} to the role ARN `pulumi up` runs as to check it is in {KEY} "
                "(`aws sts get-caller-identity --query Arn`; `pulumi up` refuses to start when it is not)"]
    caller = role_arn(named)
    why = caller_problem(caller, spec.access.admins)
    if why is None:
        return [f"admins: you ({caller}, from ${CALLER_ENV}) are in {KEY}"]
    return [f"admins: warning: {KEY} {why}"]
