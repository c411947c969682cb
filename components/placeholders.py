"""The example stacks' placeholders: values a user must replace before the first `pulumi up` (issue 29).

The shipped stacks (stacks/Pulumi.*.yaml) must synthesize, preview in CI and pass `check`'s guardrails as
they are, so where a value can only be the user's (who reaches the API, who administers the cluster, which
project) they carry a value that is valid in form and belongs to nobody. Deployed as is, such a stack makes
a cluster nobody can reach or administer: `pulumi up` would create it and then fail on every Kubernetes
resource. So:

- `torchfleet check` reports each one as an error (exit 1) naming the key, the value and the
  `pulumi config set --path` line that replaces it;
- a real `pulumi up` refuses before any resource is created (components/config.py);
- `pulumi preview` (CI previews the shipped stacks on pull requests), `torchfleet synth` and
  `torchfleet plan` only warn.

RULES is the table: each row recognises one kind of value that is nobody's, with the source that reserves
it. Which keys are looked at is `find`'s (every key of the stack that names an address, an identity or a
project). The shipped stacks' placeholders, by row:

| stack | key | value | row |
|---|---|---|---|
| aws-usw2 | torchfleet:network.publicAccessCidrs[0] | 203.0.113.0/24 | rfc5737 |
| azure-eus | torchfleet:network.publicAccessCidrs[0] | 203.0.113.0/24 | rfc5737 |
| azure-eus | torchfleet:admins[0] | User:00000000-0000-0000-0000-000000000000 | zero-guid |
| gcp-usc1 | gcp:project | my-ml-project | example-project |

(tests/components/test_placeholders.py holds this table equal to what `find` reports on the stacks.)
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from components.spec import ConfigError, PlatformSpec

# Address blocks reserved for documentation: never routed, never anyone's egress address.
DOCUMENTATION_NETWORKS = {
    # RFC 5737 section 3: TEST-NET-1, -2, -3 (https://www.rfc-editor.org/rfc/rfc5737#section-3)
    "192.0.2.0/24": "rfc5737",
    "198.51.100.0/24": "rfc5737",
    "203.0.113.0/24": "rfc5737",
    # RFC 3849: the IPv6 documentation prefix (https://www.rfc-editor.org/rfc/rfc3849)
    "2001:db8::/32": "rfc3849",
    # RFC 9637 (2024): the larger IPv6 documentation prefix (https://www.rfc-editor.org/rfc/rfc9637)
    "3fff::/20": "rfc9637",
}


@dataclass(frozen=True)
class Rule:
    name: str
    why: str  # completes "<value> is ..."
    source: str


RULES = {rule.name: rule for rule in (
    Rule("rfc5737", "an IPv4 documentation range (RFC 5737 TEST-NET): it is never anyone's address",
         "https://www.rfc-editor.org/rfc/rfc5737#section-3"),
    Rule("rfc3849", "in the IPv6 documentation prefix 2001:db8::/32 (RFC 3849): it is never anyone's address",
         "https://www.rfc-editor.org/rfc/rfc3849"),
    Rule("rfc9637", "in the IPv6 documentation prefix 3fff::/20 (RFC 9637): it is never anyone's address",
         "https://www.rfc-editor.org/rfc/rfc9637"),
    # Microsoft Entra object ids are random GUIDs; the nil UUID (RFC 9562 section 5.9) is none of them.
    Rule("zero-guid", "the all-zero object id (the nil UUID): no Microsoft Entra user, group or service principal "
                      "has it", "https://www.rfc-editor.org/rfc/rfc9562#section-5.9"),
    # AWS's documentation writes its examples with these account ids (IAM identifiers, "ARNs" examples:
    # 123456789012; the IAM user guide's policy examples: 111122223333); 000000000000 is no account.
    Rule("example-account", "an AWS account id the AWS documentation uses for examples (or all zeros)",
         "https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_identifiers.html"),
    # RFC 2606 section 3 reserves example.com/.net/.org (and section 2 the .example TLD) for documentation.
    Rule("example-domain", "an e-mail at a domain reserved for documentation (RFC 2606): no Google account is there",
         "https://www.rfc-editor.org/rfc/rfc2606"),
    # stacks/Pulumi.gcp-usc1.yaml's own "# your project id": a project id of the example, not the user's.
    Rule("example-project", "the example stack's project id (stacks/Pulumi.gcp-usc1.yaml: `# your project id`), "
                            "not yours", "stacks/Pulumi.gcp-usc1.yaml"),
)}

EXAMPLE_ACCOUNTS = ("000000000000", "123456789012", "111122223333")
EXAMPLE_PROJECTS = ("my-ml-project",)
ZERO_GUID = "00000000-0000-0000-0000-000000000000"
_EXAMPLE_DOMAIN = re.compile(r"@(.+\.)?(example\.(com|net|org)|[^@]*\.example)$", re.IGNORECASE)
MY_IP_URL = "https://checkip.amazonaws.com"  # torchfleet/reach.py's DEFAULT_URL (AWS's own)


@dataclass(frozen=True)
class Placeholder:
    key: str  # as `pulumi config set --path` takes it: torchfleet:network.publicAccessCidrs[0]
    value: str
    rule: str  # a key of RULES
    replacement: str  # the new value, as a shell word (it may run a command that prints yours)

    @property
    def why(self) -> str:
        return f"{self.value} is {RULES[self.rule].why}"

    def command(self, stack: str) -> str:
        path = " --path" if "." in self.key.split(":", 1)[1] or "[" in self.key else ""
        return f"pulumi config set{path} '{self.key}' {self.replacement} --stack {stack}"

    def line(self, stack: str) -> str:
        return f"{self.why}; replace it: {self.command(stack)}"


def _network_rule(cidr: str) -> str | None:
    try:
        net = ipaddress.ip_network(cidr, strict=False)
    except ValueError:
        return None  # spec validation names it
    for doc, rule in DOCUMENTATION_NETWORKS.items():
        reserved = ipaddress.ip_network(doc)
        if net.version == reserved.version and net.subnet_of(reserved):
            return rule
    return None


def _identity(value: str, cloud: str) -> tuple[str, str] | None:
    """(rule, replacement) for an admin or researcher identity that is nobody's, else None."""
    if cloud == "azure":
        kind, _, guid = value.partition(":")
        if guid != ZERO_GUID:
            return None
        lookup = {"User": "az ad signed-in-user show --query id -o tsv",
                  "Group": "az ad group show --group '<your group>' --query id -o tsv",
                  "ServicePrincipal": "az ad sp show --id \"$ARM_CLIENT_ID\" --query id -o tsv"}[kind]
        return "zero-guid", f'"{kind}:$({lookup})"'
    if cloud == "aws":
        match = re.match(r"arn:aws[a-z-]*:iam::(\d{12}):(role|user)/", value)
        if match is None or match.group(1) not in EXAMPLE_ACCOUNTS:
            return None
        lookup = ("aws iam get-role --role-name '<your role>' --query Role.Arn --output text"
                  if match.group(2) == "role" else "aws iam get-user --query User.Arn --output text")
        return "example-account", f'"$({lookup})"'
    if cloud == "gcp" and _EXAMPLE_DOMAIN.search(value):
        kind = value.split(":", 1)[0]
        lookup = ('"user:$(gcloud config get-value account)"' if kind == "user"
                  else "'serviceAccount:<name>@<your project>.iam.gserviceaccount.com'")
        return "example-domain", lookup
    return None


def find(spec: PlatformSpec) -> list[Placeholder]:
    """Every value of the stack that is a placeholder, in the order of its keys."""
    found: list[Placeholder] = []
    net = "torchfleet:network"
    for field, values, replacement in (
        ("publicAccessCidrs", spec.network.public_access_cidrs, f'"$(curl -s {MY_IP_URL})/32"'),
        ("privateAccessCidrs", spec.network.private_access_cidrs, "'<your VPN or peered network CIDR>'"),
    ):
        for i, cidr in enumerate(values):
            rule = _network_rule(cidr)
            if rule:
                found.append(Placeholder(f"{net}.{field}[{i}]", cidr, rule, replacement))
    for name, values in (("admins", spec.access.admins), ("researchers", spec.access.researchers)):
        for i, value in enumerate(values):
            hit = _identity(value, spec.cloud)
            if hit:
                found.append(Placeholder(f"torchfleet:{name}[{i}]", value, *hit))
    if spec.cloud == "gcp" and spec.project in EXAMPLE_PROJECTS:
        found.append(Placeholder("gcp:project", spec.project, "example-project",
                                 '"$(gcloud config get-value project)"'))
    return found


def refusal(spec: PlatformSpec) -> list[str]:
    """ConfigError problems for a real `pulumi up`: 'key: why; replace it: command' each."""
    return [f"{p.key}: {p.line(spec.stack)} (the example's placeholder: `pulumi up` would make a cluster that "
            "nobody can reach or administer)" for p in find(spec)]


def warnings(spec: PlatformSpec) -> list[str]:
    """What preview, synth and plan print: the same, as a warning (they still run)."""
    return [f"placeholder: {p.key}: {p.line(spec.stack)} (`pulumi up` refuses it)" for p in find(spec)]


def enforce(spec: PlatformSpec) -> None:
    """As the program starts (components/config.py), before any resource: a real `pulumi up` with a
    placeholder raises ConfigError naming each; `pulumi preview` warns through the engine. Under
    torchfleet's mocks nothing: `synth`, `plan` and `check` print their own."""
    import pulumi

    if mocked():
        return
    if not pulumi.runtime.is_dry_run():
        problems = refusal(spec)
        if problems:
            raise ConfigError(problems)
        return
    for line in warnings(spec):
        pulumi.log.warn(line)


def mocked() -> bool:
    """Under torchfleet's offline synth (its mocks stand in for a preview: torchfleet/preview/runner.py)."""
    from pulumi.runtime import settings
    from pulumi.runtime.mocks import MockMonitor

    return isinstance(settings.get_monitor(), MockMonitor)
