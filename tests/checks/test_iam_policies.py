"""parliament on every IAM policy document the AWS stack creates (stacks/Pulumi.aws-usw2.yaml).

Parametrized over what the offline synth records: managed and inline policies (`policy`), inline
policies of roles, the roles' trust policies (`assumeRolePolicy`), and resource policies such as
the EFS file system policy (`policy`, read as written: parliament accepts a Principal). If the
synth fails, one placeholder case reports its error.
"""

from __future__ import annotations

import json
from functools import cache

import pytest

from tests.checks.tools import TOOLS_BIN, run, tool
from tests.harness import synth_stack

STACK = "aws-usw2"
ACCOUNT = "123456789012"
POLICY_TYPES = ("aws:iam/policy:Policy", "aws:iam/rolePolicy:RolePolicy", "aws:iam/userPolicy:UserPolicy",
                "aws:iam/groupPolicy:GroupPolicy", "aws:efs/fileSystemPolicy:FileSystemPolicy")
# Findings we accept, by parliament issue code, each with the reason.
PARLIAMENT_IGNORES: dict[str, str] = {}
TRUST_POLICY_IGNORES: dict[str, str] = {
    "CREDENTIALS_EXPOSURE": "a trust policy exists to hand its principal the role's credentials "
    "(sts:AssumeRole); read as an identity policy, parliament sees that as exposing credentials",
}

# Runs inside .venv-tools (parliament pins libraries the project also uses): documents in on
# stdin, findings out on stdout. Community auditors on: they add checks, never hide any.
_RUNNER = """
import json, sys
from parliament import analyze_policy_string
out = {}
for key, doc in json.load(sys.stdin).items():
    policy = analyze_policy_string(doc, include_community_auditors=True)
    out[key] = [{"issue": f.issue, "severity": f.severity, "detail": str(f.detail)} for f in policy.findings]
json.dump(out, sys.stdout)
"""


def trust_as_identity_policy(doc: str, role: str) -> str:
    """A trust policy as parliament can read it.

    parliament lints identity policies, whose statements name a Resource; a trust policy's
    statements name a Principal instead, and its resource is the role itself. So the Principal
    becomes the role's ARN as Resource: the actions, effects and conditions are all checked.
    """
    policy = json.loads(doc)
    statements = policy["Statement"] if isinstance(policy["Statement"], list) else [policy["Statement"]]
    for statement in statements:
        statement.pop("Principal", None)
        statement.pop("NotPrincipal", None)
        statement["Resource"] = f"arn:aws:iam::{ACCOUNT}:role/{role}"
    return json.dumps({**policy, "Statement": statements})


@cache
def documents() -> dict[str, str] | Exception:
    """'<resource> <property>' -> policy JSON, for every IAM policy the stack's synth records."""
    try:
        result = synth_stack(STACK)
    except Exception as error:  # reported by the placeholder case below, not at collection
        return error
    docs = {}
    for r in result.resources:
        if r.type in POLICY_TYPES and isinstance(r.inputs.get("policy"), str):
            docs[f"{r.name} policy"] = r.inputs["policy"]
        if r.type == "aws:iam/role:Role":
            name = r.inputs.get("name") or r.name
            if isinstance(r.inputs.get("assumeRolePolicy"), str):
                docs[f"{r.name} assumeRolePolicy"] = trust_as_identity_policy(r.inputs["assumeRolePolicy"], name)
            for inline in r.inputs.get("inlinePolicies") or []:
                if isinstance(inline.get("policy"), str):
                    docs[f"{r.name} inlinePolicies.{inline.get('name')}"] = inline["policy"]
    return docs


def cases() -> list:
    docs = documents()
    if isinstance(docs, Exception):
        return [pytest.param(None, id=f"{STACK}-synth")]
    return sorted(docs)


@cache
def findings() -> dict[str, list[dict]]:
    proc = run([str(TOOLS_BIN / "python"), "-c", _RUNNER], timeout=300, stdin=json.dumps(documents()))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


@pytest.mark.parametrize("key", cases())
def test_parliament_reports_nothing_on_the_policy(key):
    docs = documents()
    if isinstance(docs, Exception):
        raise docs
    tool("parliament")
    ignored = {**PARLIAMENT_IGNORES, **(TRUST_POLICY_IGNORES if key.endswith(" assumeRolePolicy") else {})}
    found = [f for f in findings()[key] if f["issue"] not in ignored]
    assert found == [], f"{key}:\n{docs[key]}\n" + "\n".join(f"{f['issue']} ({f['severity']}): {f['detail']}"
                                                          for f in found)


def test_every_accepted_finding_has_a_reason():
    assert all(reason.strip() for reason in {**PARLIAMENT_IGNORES, **TRUST_POLICY_IGNORES}.values())


def test_the_aws_stack_has_trust_and_permission_policies_to_check():
    docs = documents()
    assert isinstance(docs, dict), docs
    assert any(k.endswith(" assumeRolePolicy") for k in docs)
    assert any(k.endswith(" policy") or ".inlinePolicies." in k for k in docs)
    assert any(k.endswith("-efs-policy policy") for k in docs), "the EFS file system policy is not checked"


def test_parliament_does_report_a_bad_policy():
    """The check above can fail: a misspelt action, a mismatched resource and s3:* on * are found."""
    tool("parliament")
    statements = {
        "UNKNOWN_ACTION": {"Action": "s3:GetObjekt", "Resource": "*"},
        "RESOURCE_MISMATCH": {"Action": "s3:GetObject", "Resource": "arn:aws:ec2:us-east-1:123456789012:instance/*"},
        "RESOURCE_STAR": {"Action": "s3:*", "Resource": "*"},
    }
    bad = {issue: json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", **statement}]})
           for issue, statement in statements.items()}
    proc = run([str(TOOLS_BIN / "python"), "-c", _RUNNER], stdin=json.dumps(bad))
    found = json.loads(proc.stdout)
    assert all(issue in {f["issue"] for f in found[issue]} for issue in statements), found


def test_trust_policy_becomes_a_statement_on_the_role():
    trust = json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}]})
    statement = json.loads(trust_as_identity_policy(trust, "nodes"))["Statement"][0]
    assert statement == {"Effect": "Allow", "Action": "sts:AssumeRole",
                         "Resource": f"arn:aws:iam::{ACCOUNT}:role/nodes"}
