"""Every cloud name Torchfleet derives, and every description a cloud API checks, against that
cloud's length and character rules.

Three parts, all pure Python (no pulumi import):

- NAME_RULES: resource kind -> most characters, allowed characters, source page. One table for
  every name the program writes, so a rule lives in one place.
- DERIVED: the names each cloud builds from the stack name and the training namespace, as
  templates. spec.parse checks them up front, so a stack name that would overflow a cloud name
  is refused naming the stack, not by the cloud halfway through `pulumi up`.
- names_in(resource): the (kind, where, name) triples of one resource as `torchfleet synth`
  prints it (type, name, inputs). Tests and the property test walk every resource of a synth
  with it; a template above that drifted from the code it mirrors shows up there.

Names a provider generates (Pulumi's auto-naming: the logical name plus '-' and 7 random
characters) are checked as the logical name plus 8 characters.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

# Pulumi's auto-naming: "<logical name>-<7 random hex>" (pulumi/pulumi resource.NewUniqueHex).
AUTONAME_SUFFIX = 8

_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_RFC1035 = r"[a-z]([-a-z0-9]*[a-z0-9])?"


def _aws_tag_chars(value: str) -> bool:
    # Letters and digits in any script, spaces, and _ . : / = + - @
    return all(c.isalnum() or c in " _.:/=+-@" for c in value)


def _azure_tag_name_chars(value: str) -> bool:
    return not any(c in '<>%&\\?/' for c in value)


@dataclass(frozen=True)
class NameRule:
    max_len: int
    source: str
    pattern: str | None = None  # full-match regex; None: any characters
    chars: Callable[[str], bool] | None = None  # for rules a regex cannot say (Unicode letters)
    allowed: str = "any characters"  # the rule in words, for the error message
    min_len: int = 1

    def problem(self, name: str) -> str | None:
        """Why `name` breaks this rule, or None."""
        if not isinstance(name, str):
            return f"{name!r} is not a string"
        if len(name) > self.max_len:
            return f"{len(name)} characters, over the limit of {self.max_len}"
        if len(name) < self.min_len:
            return f"{len(name)} characters, under the minimum of {self.min_len}"
        if (self.pattern and not re.fullmatch(self.pattern, name)) or (self.chars and not self.chars(name)):
            return f"not {self.allowed}"
        return None


_K8S_NAMES = "https://kubernetes.io/docs/concepts/overview/working-with-objects/names/"
_AWS_TAGS = "https://docs.aws.amazon.com/tag-editor/latest/userguide/tagging.html"
_AZURE_NAMES = "https://learn.microsoft.com/azure/azure-resource-manager/management/resource-name-rules"
_AZURE_TAGS = "https://learn.microsoft.com/azure/azure-resource-manager/management/tag-resources#limitations"
_GCP_LABELS = "https://cloud.google.com/compute/docs/labeling-resources#requirements"
# Rules several kinds share, written once (NameRule's pattern and allowed, or chars and allowed).
_EKS_NAME = {"pattern": r"[0-9A-Za-z][A-Za-z0-9_-]*",
             "allowed": "ASCII letters, digits, '-' and '_', starting with a letter or digit"}
_RFC1035_NAME = {"pattern": _RFC1035,
                 "allowed": "lowercase letters, digits and '-', starting with a letter, not ending with '-'"}
_EC2_TEXT = {"pattern": r"[A-Za-z0-9 ._\-:/()#,@\[\]+=&;{}!$*]*",
             "allowed": "ASCII letters, digits, spaces and ._-:/()#,@[]+=&;{}!$*"}
_AWS_TAG = {"chars": _aws_tag_chars, "allowed": "letters, digits, spaces and _ . : / = + - @"}

NAME_RULES: dict[str, NameRule] = {
    "pulumi-stack": NameRule(
        100, "https://www.pulumi.com/docs/iac/concepts/stacks/", r"[A-Za-z0-9_.-]+",
        allowed="letters, digits, '-', '_' and '.'",
    ),
    "eks-cluster": NameRule(
        100, "https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateCluster.html",
        **_EKS_NAME,
    ),
    "eks-nodegroup": NameRule(
        63, "https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateNodegroup.html",
        **_EKS_NAME,
    ),
    "eks-addon": NameRule(
        100, "https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateAddon.html", r"[0-9A-Za-z][A-Za-z0-9_-]*",
        allowed="ASCII letters, digits, '-' and '_'",
    ),
    "cloudwatch-log-group": NameRule(
        512, "https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_CreateLogGroup.html",
        r"[.\-_/#A-Za-z0-9]+", allowed="ASCII letters, digits and . - _ / #",
    ),
    "aws-tag-key": NameRule(
        128, _AWS_TAGS, **_AWS_TAG
    ),
    "aws-tag-value": NameRule(
        256, _AWS_TAGS, **_AWS_TAG, min_len=0
    ),
    "aws-autonamed": NameRule(
        # IAM roles, security groups, KMS aliases and the rest that Pulumi auto-names: the tightest
        # of them is the IAM role (64, [\w+=,.@-]).
        64, "https://docs.aws.amazon.com/IAM/latest/APIReference/API_CreateRole.html", r"[\w+=,.@-]+",
        allowed="ASCII letters, digits and + = , . @ - _",
    ),
    "gke-cluster": NameRule(
        40, "https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters#Cluster",
        **_RFC1035_NAME,
    ),
    "gke-node-pool": NameRule(
        40, "https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters.nodePools",
        **_RFC1035_NAME,
    ),
    "gcp-resource": NameRule(
        # Networks, subnetworks, routers, NATs, Filestore instances: RFC 1035 labels.
        63, "https://cloud.google.com/compute/docs/naming-resources#resource-name-format", **_RFC1035_NAME,
    ),
    "gcp-service-account-id": NameRule(
        30, "https://cloud.google.com/iam/docs/service-accounts-create#creating", r"[a-z]([-a-z0-9]*[a-z0-9])",
        allowed="lowercase letters, digits and '-', starting with a letter", min_len=6,
    ),
    "gcp-service-account-display-name": NameRule(
        100, "https://cloud.google.com/iam/docs/reference/rest/v1/projects.serviceAccounts#ServiceAccount", min_len=0
    ),
    "gcp-label-key": NameRule(
        63, _GCP_LABELS, r"[a-z][a-z0-9_-]*", allowed="lowercase letters, digits, '_' and '-', starting with a letter"
    ),
    "gcp-label-value": NameRule(63, _GCP_LABELS, r"[a-z0-9_-]*", allowed="lowercase letters, digits, '_' and '-'",
                                min_len=0),
    "aks-cluster": NameRule(
        63, _AZURE_NAMES, r"[a-zA-Z0-9]([-_a-zA-Z0-9]*[a-zA-Z0-9])?",
        allowed="letters, digits, '-' and '_', starting and ending with a letter or digit",
    ),
    "aks-agent-pool": NameRule(
        12, "https://learn.microsoft.com/azure/aks/create-node-pools#limitations", r"[a-z][a-z0-9]*",
        allowed="lowercase letters and digits, starting with a letter",
    ),
    "aks-dns-prefix": NameRule(
        54, _AZURE_NAMES, r"[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?",
        allowed="letters, digits and '-', starting and ending with a letter or digit",
    ),
    "azure-resource-group": NameRule(
        90, _AZURE_NAMES, r"[-\w._()]*[-\w_()]", allowed="letters, digits, - _ . ( ), not ending with '.'"
    ),
    "azure-network": NameRule(
        # Virtual networks (64), subnets (80), private endpoints (64): the tightest applies.
        64, _AZURE_NAMES, r"[a-zA-Z0-9]([-\w.]*\w)?",
        allowed="letters, digits, - _ ., ending with a letter, digit or _",
    ),
    "azure-storage-account": NameRule(24, _AZURE_NAMES, r"[a-z0-9]+", allowed="lowercase letters and digits",
                                      min_len=3),
    "azure-file-share": NameRule(
        63, _AZURE_NAMES, r"[a-z0-9](?!.*--)[a-z0-9-]*[a-z0-9]", allowed="lowercase letters, digits and single '-'",
        min_len=3,
    ),
    "azure-identity": NameRule(
        128, _AZURE_NAMES, r"[a-zA-Z0-9][-\w]*",
        allowed="letters, digits, '-' and '_', starting with a letter or digit",
        min_len=3,
    ),
    "azure-tag-name": NameRule(512, _AZURE_TAGS, chars=_azure_tag_name_chars, allowed="free of < > % & \\ ? /"),
    "azure-tag-value": NameRule(256, _AZURE_TAGS, min_len=0),
    "k8s-dns-label": NameRule(63, _K8S_NAMES + "#dns-label-names", _DNS_LABEL,
                              allowed="lowercase letters, digits and '-' (RFC 1123 label)"),
    "k8s-dns-subdomain": NameRule(
        253, _K8S_NAMES + "#dns-subdomain-names", rf"{_DNS_LABEL}(\.{_DNS_LABEL})*",
        allowed="lowercase letters, digits, '-' and '.' (RFC 1123 subdomain)",
    ),
    "k8s-label-value": NameRule(
        63, "https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#syntax-and-character-set",
        r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?", allowed="letters, digits, - _ ., starting and ending alnum",
        min_len=0,
    ),
    # What EC2 accepts in a security group's description, its name, and each rule's description
    # (the provider checks none of it, so a bad character fails the create halfway through `pulumi up`:
    # "NFS from the cluster's nodes only" did, issue 20). Sources: the CreateSecurityGroup API
    # reference (GroupDescription, GroupName) and IpRange/UserIdGroupPair (rule Description).
    "ec2-security-group-description": NameRule(
        255, "https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreateSecurityGroup.html",
        **_EC2_TEXT,
    ),
    "ec2-security-group-name": NameRule(
        255, "https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreateSecurityGroup.html",
        r"(?!sg-)" + _EC2_TEXT["pattern"], allowed=_EC2_TEXT["allowed"] + ", not starting with sg-",
    ),
    "ec2-rule-description": NameRule(
        255, "https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_IpRange.html", **_EC2_TEXT, min_len=0,
    ),
    "kms-key-description": NameRule(
        8192, "https://docs.aws.amazon.com/kms/latest/APIReference/API_CreateKey.html", min_len=0,
    ),
    "iam-role-description": NameRule(
        1000, "https://docs.aws.amazon.com/IAM/latest/APIReference/API_CreateRole.html",
        r"[\t\n\r\x20-\x7e\xa1-\xff]*", allowed="printable Latin-1 text", min_len=0,
    ),
    "gcp-firewall-description": NameRule(
        2048, "https://cloud.google.com/compute/docs/reference/rest/v1/firewalls", min_len=0,
    ),
    "azure-role-assignment-description": NameRule(
        2048, "https://learn.microsoft.com/rest/api/authorization/role-assignments/create", min_len=0,
    ),
    "helm-release": NameRule(
        53, "https://helm.sh/docs/chart_template_guide/getting_started/#a-first-template",
        rf"{_DNS_LABEL}(\.{_DNS_LABEL})*", allowed="lowercase letters, digits, '-' and '.'",
    ),
}


# ---------------------------------------------------------------- names derived from the stack

# The store-owner Job (components/kube/store_owner.py job_name) on stores that do not set the
# owner themselves; the Job controller puts its name into the job-name label of its pods.
STORE_OWNER_JOB = "store-owner-{namespace}-{claim}"
# EFS enforces the owner through its access point, so AWS runs no store-owner Job.
_STORE_OWNER_CLOUDS = ("gcp", "azure", "local")
_AWS_CLUSTER = "torchfleet-{stack}"  # components/clouds/aws/__init__.py cluster_name_for

# cloud -> (kind, template, what it names). {stack}, {zone} (the longest zone of the stack).
DERIVED: dict[str, tuple[tuple[str, str, str], ...]] = {
    "aws": (
        ("eks-cluster", _AWS_CLUSTER, "the EKS cluster name"),
        ("cloudwatch-log-group", "/aws/eks/" + _AWS_CLUSTER + "/cluster", "the EKS control-plane log group"),
        ("aws-tag-key", "kubernetes.io/cluster/" + _AWS_CLUSTER, "the subnet tag key the load balancers read"),
        ("aws-tag-value", _AWS_CLUSTER + "-private-{zone}", "the subnets' Name tag"),
        ("aws-tag-value", "{stack}", "the torchfleet.io/stack tag"),
    ),
    "gcp": (
        # components/clouds/gcp/pools.py GcpNodeIdentity
        ("gcp-service-account-display-name", "Torchfleet GKE nodes ({stack})", "the nodes' service account name"),
    ),
    "azure": (("azure-tag-value", "{stack}", "the torchfleet-stack tag"),),
    "local": (),
}


def derived_names(cloud: str, stack: str, zones: tuple[str, ...] = ()) -> Iterator[tuple[str, str, str]]:
    """(kind, name, what) for every name `cloud` derives from the stack name."""
    zone = max(zones, key=len) if zones else ""
    for kind, template, what in DERIVED.get(cloud, ()):
        yield kind, template.format(stack=stack, zone=zone), what


def store_owner_job(cloud: str, namespace: str, claim: str) -> str | None:
    return STORE_OWNER_JOB.format(namespace=namespace, claim=claim) if cloud in _STORE_OWNER_CLOUDS else None


def max_namespace_length(cloud: str, claim: str) -> int:
    """The longest training namespace whose derived names all fit (63: a namespace is a DNS label)."""
    if cloud not in _STORE_OWNER_CLOUDS:
        return NAME_RULES["k8s-dns-label"].max_len
    fixed = len(STORE_OWNER_JOB.format(namespace="", claim=claim))
    return min(NAME_RULES["k8s-dns-label"].max_len, NAME_RULES["k8s-label-value"].max_len - fixed)


# ---------------------------------------------------------------- names in a synth


# Resource type -> (input key holding its cloud name, kind). A missing input means Pulumi
# auto-names the resource from its logical name.
NAME_INPUTS: dict[str, tuple[str, str]] = {
    "aws:eks/cluster:Cluster": ("name", "eks-cluster"),
    "aws:eks/nodeGroup:NodeGroup": ("nodeGroupName", "eks-nodegroup"),
    "aws:eks/addon:Addon": ("addonName", "eks-addon"),
    "aws:cloudwatch/logGroup:LogGroup": ("name", "cloudwatch-log-group"),
    "aws:iam/role:Role": ("name", "aws-autonamed"),
    "aws:iam/rolePolicy:RolePolicy": ("name", "aws-autonamed"),
    "aws:ec2/securityGroup:SecurityGroup": ("name", "ec2-security-group-name"),
    "gcp:container/cluster:Cluster": ("name", "gke-cluster"),
    "gcp:container/nodePool:NodePool": ("name", "gke-node-pool"),
    "gcp:compute/network:Network": ("name", "gcp-resource"),
    "gcp:compute/subnetwork:Subnetwork": ("name", "gcp-resource"),
    "gcp:compute/router:Router": ("name", "gcp-resource"),
    "gcp:compute/routerNat:RouterNat": ("name", "gcp-resource"),
    "gcp:filestore/instance:Instance": ("name", "gcp-resource"),
    "gcp:kms/keyRing:KeyRing": ("name", "gcp-resource"),
    "gcp:kms/cryptoKey:CryptoKey": ("name", "gcp-resource"),
    "gcp:serviceaccount/account:Account": ("accountId", "gcp-service-account-id"),
    "azure-native:resources:ResourceGroup": ("resourceGroupName", "azure-resource-group"),
    "azure-native:containerservice:ManagedCluster": ("resourceName", "aks-cluster"),
    "azure-native:containerservice:AgentPool": ("agentPoolName", "aks-agent-pool"),
    "azure-native:network:VirtualNetwork": ("virtualNetworkName", "azure-network"),
    "azure-native:network:Subnet": ("subnetName", "azure-network"),
    "azure-native:network:PrivateEndpoint": ("privateEndpointName", "azure-network"),
    "azure-native:storage:StorageAccount": ("accountName", "azure-storage-account"),
    "azure-native:storage:FileShare": ("shareName", "azure-file-share"),
    "azure-native:managedidentity:UserAssignedIdentity": ("resourceName", "azure-identity"),
    "kubernetes:helm.sh/v3:Release": ("name", "helm-release"),
}
# Kubernetes kinds whose names must be DNS labels (the rest are DNS subdomains).
_K8S_LABEL_NAMED = {"Namespace", "Service"}
_TAG_KINDS = {"aws:": ("aws-tag-key", "aws-tag-value"), "azure-native:": ("azure-tag-name", "azure-tag-value")}
_LABEL_KINDS = {"gcp:": ("gcp-label-key", "gcp-label-value")}


def names_in(resource: dict[str, Any]) -> Iterator[tuple[str, str, Any]]:
    """(kind, where, name) for every cloud or Kubernetes name in one synth resource."""
    type_, inputs = resource["type"], resource.get("inputs") or {}
    where = f"{type_} {resource['name']}"
    if type_ in NAME_INPUTS:
        key, kind = NAME_INPUTS[type_]
        if key in inputs:
            yield kind, f"{where} {key}", inputs[key]
        elif not type_.startswith("kubernetes:"):
            yield kind, f"{where} (auto-named)", resource["name"] + "-" + "x" * (AUTONAME_SUFFIX - 1)
    if type_ == "azure-native:containerservice:ManagedCluster":
        if "dnsPrefix" in inputs:
            yield "aks-dns-prefix", f"{where} dnsPrefix", inputs["dnsPrefix"]
        for i, profile in enumerate(inputs.get("agentPoolProfiles") or []):
            yield "aks-agent-pool", f"{where} agentPoolProfiles[{i}].name", profile.get("name")
    yield from _descriptions(type_, where, inputs)
    if type_ == "gcp:serviceaccount/account:Account" and "displayName" in inputs:
        yield "gcp-service-account-display-name", f"{where} displayName", inputs["displayName"]
    for prefix, (key_kind, value_kind) in _TAG_KINDS.items():
        if type_.startswith(prefix) and isinstance(inputs.get("tags"), dict):
            for k, v in inputs["tags"].items():
                yield key_kind, f"{where} tag key", k
                yield value_kind, f"{where} tag {k}", v
    for prefix, (key_kind, value_kind) in _LABEL_KINDS.items():
        for field in ("labels", "resourceLabels"):
            if type_.startswith(prefix) and isinstance(inputs.get(field), dict):
                for k, v in inputs[field].items():
                    yield key_kind, f"{where} {field} key", k
                    yield value_kind, f"{where} {field} {k}", v
    if type_.startswith("kubernetes:") and isinstance(inputs.get("metadata"), dict):
        yield from _kubernetes_names(where, inputs)


# Resource type -> (input key, kind) of free text a cloud API checks: descriptions.
DESCRIPTIONS: dict[str, tuple[str, str]] = {
    "aws:ec2/securityGroup:SecurityGroup": ("description", "ec2-security-group-description"),
    "aws:ec2/securityGroupRule:SecurityGroupRule": ("description", "ec2-rule-description"),
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": ("description", "ec2-rule-description"),
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule": ("description", "ec2-rule-description"),
    "aws:kms/key:Key": ("description", "kms-key-description"),
    "aws:iam/role:Role": ("description", "iam-role-description"),
    "gcp:compute/firewall:Firewall": ("description", "gcp-firewall-description"),
    "azure-native:authorization:RoleAssignment": ("description", "azure-role-assignment-description"),
}


def _descriptions(type_: str, where: str, inputs: dict[str, Any]) -> Iterator[tuple[str, str, Any]]:
    if type_ in DESCRIPTIONS:
        key, kind = DESCRIPTIONS[type_]
        if key in inputs:
            yield kind, f"{where} {key}", inputs[key]
    if type_ == "aws:ec2/securityGroup:SecurityGroup":
        if "namePrefix" in inputs:  # the provider appends 26 characters
            yield "ec2-security-group-name", f"{where} namePrefix", inputs["namePrefix"] + "x" * 26
        for direction in ("ingress", "egress"):
            for i, rule in enumerate(inputs.get(direction) or []):
                if isinstance(rule, dict) and "description" in rule:
                    yield "ec2-rule-description", f"{where} {direction}[{i}].description", rule["description"]


def _kubernetes_names(where: str, obj: dict[str, Any]) -> Iterator[tuple[str, str, Any]]:
    meta = obj["metadata"]
    if "name" in meta:
        kind = "k8s-dns-label" if obj.get("kind") in _K8S_LABEL_NAMED else "k8s-dns-subdomain"
        yield kind, f"{where} metadata.name", meta["name"]
        if obj.get("kind") == "Job":  # the Job controller labels its pods job-name=<name>
            yield "k8s-label-value", f"{where} metadata.name (its pods' job-name label)", meta["name"]
    if meta.get("namespace") is not None:
        yield "k8s-dns-label", f"{where} metadata.namespace", meta["namespace"]
    for k, v in (meta.get("labels") or {}).items():
        yield "k8s-label-value", f"{where} label {k}", v
    template = ((obj.get("spec") or {}).get("template") or {}).get("metadata") or {}
    for k, v in (template.get("labels") or {}).items():
        yield "k8s-label-value", f"{where} pod label {k}", v


def name_problems(resources: list[dict[str, Any]]) -> list[str]:
    """Every name in a synth's resources that breaks its cloud's rule, as 'where: name: why (source)'."""
    found = []
    for resource in resources:
        for kind, where, name in names_in(resource):
            rule = NAME_RULES[kind]
            if (why := rule.problem(name)) is not None:
                found.append(f"{where}: {name!r}: {kind} {why} ({rule.source})")
    return found
