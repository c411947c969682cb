"""components/limits.py: the names table, the stack-derived templates, and the walk of every name a
real synth writes, for long and odd stack names (issue 12)."""

from __future__ import annotations

import json
import subprocess
import sys
from urllib.parse import urlparse

import pytest

from components import limits
from components.clouds.aws import cluster_name_for
from components.kube import store_owner
from components.spec import DEFAULT_CLAIM, ConfigError
from tests.harness import REPO
from torchfleet.preview import runner

STACK_FILES = {
    "aws": REPO / "stacks/Pulumi.aws-usw2.yaml",
    "gcp": REPO / "stacks/Pulumi.gcp-usc1.yaml",
    "azure": REPO / "stacks/Pulumi.azure-eus.yaml",
    "local": REPO / "stacks/Pulumi.local.yaml",
}


# ---------------------------------------------------------------- the table


@pytest.mark.parametrize("kind", sorted(limits.NAME_RULES))
def test_every_rule_cites_its_source_and_says_what_it_allows(kind):
    rule = limits.NAME_RULES[kind]
    url = urlparse(rule.source)
    assert url.scheme == "https" and url.path not in ("", "/")
    assert 0 <= rule.min_len <= rule.max_len
    assert rule.allowed and (rule.pattern or rule.chars or rule.allowed == "any characters")


@pytest.mark.parametrize(
    "kind, good, bad",
    [
        ("eks-cluster", "torchfleet-" + "a" * 89, "torchfleet-" + "a" * 90),
        ("eks-cluster", "torchfleet-team_dev-2", "torchfleet-team.dev"),
        ("eks-cluster", "Torchfleet", "torchfleet-é"),
        ("eks-nodegroup", "gpu-a100-80gb-us-west-2a", "g" * 64),
        ("aws-tag-key", "kubernetes.io/cluster/" + "c" * 106, "kubernetes.io/cluster/" + "c" * 107),
        ("aws-tag-value", "équipe: dev @ home", "a<b"),
        ("gke-cluster", "g" * 40, "g" * 41),
        ("gke-cluster", "torchfleet-gke", "1torchfleet"),
        ("gcp-service-account-id", "tfleet", "tflee"),
        ("gcp-service-account-display-name", "T" * 100, "T" * 101),
        ("gcp-label-value", "gcp-usc1_x", "Gcp"),
        ("aks-agent-pool", "a10080gbz2m1", "a10080gbz2m12"),
        ("aks-agent-pool", "t4z1", "T4z1"),
        ("azure-storage-account", "tf" + "0" * 22, "tf" + "0" * 23),
        ("azure-file-share", "shared", "sh--ared"),
        ("k8s-dns-label", "n" * 63, "n" * 64),
        ("k8s-dns-label", "elastic-job", "elastic.job"),
        ("k8s-dns-subdomain", "elasticjobs.elastic.pytorch.org", "Elastic"),
        ("k8s-label-value", "", "-x"),
        ("k8s-label-value", "store-owner-" + "n" * 39 + "-shared-data", "store-owner-" + "n" * 40 + "-shared-data"),
        ("helm-release", "n" * 53, "n" * 54),
        ("pulumi-stack", "aws-usw2.team_1", "aws usw2"),
        # Regression (issue 20, AWS review B1): EC2 refused the EFS security group's description.
        ("ec2-security-group-description", "NFS from the cluster nodes only", "NFS from the cluster's nodes only"),
        ("ec2-security-group-description", "a-zA-Z0-9 ._-:/()#,@[]+=&;{}!$*", "é"),
        ("ec2-security-group-description", "d" * 255, "d" * 256),
        ("ec2-security-group-name", "torchfleet-nfs", "sg-torchfleet"),
        ("ec2-rule-description", "NFS from EKS nodes", 'NFS "only"'),
        ("iam-role-description", "Torchfleet nodes", "\u2603"),
    ],
)
def test_rule_boundaries(kind, good, bad):
    rule = limits.NAME_RULES[kind]
    assert rule.problem(good) is None
    assert rule.problem(bad) is not None


def test_security_group_descriptions_and_rule_descriptions_are_walked():
    """Every description EC2 checks is in the walk, including each rule's (issue 20)."""
    sg = {
        "type": "aws:ec2/securityGroup:SecurityGroup",
        "name": "nfs",
        "inputs": {"description": "it's", "ingress": [{"description": "ok"}, {"description": "x'"}]},
    }
    problems = limits.name_problems([sg])
    assert [p.split(": ")[0] for p in problems] == [
        "aws:ec2/securityGroup:SecurityGroup nfs description",
        "aws:ec2/securityGroup:SecurityGroup nfs ingress[1].description",
    ]
    assert "CreateSecurityGroup" in problems[0]


def test_problem_says_the_length_and_the_limit():
    assert limits.NAME_RULES["gke-cluster"].problem("g" * 41) == "41 characters, over the limit of 40"
    assert limits.NAME_RULES["eks-cluster"].problem("a.b") == (
        "not ASCII letters, digits, '-' and '_', starting with a letter or digit"
    )


# ---------------------------------------------------------------- the templates mirror the code


def test_aws_templates_mirror_the_cluster_name():
    [(_, name, _)] = [d for d in limits.derived_names("aws", "dev") if d[0] == "eks-cluster"]
    assert name == cluster_name_for("dev")


def test_store_owner_template_mirrors_the_job_name():
    for namespace in ("elastic-job", "n" * 39):
        assert limits.store_owner_job("gcp", namespace, DEFAULT_CLAIM) == store_owner.job_name(namespace, DEFAULT_CLAIM)
    assert limits.store_owner_job("aws", "elastic-job", DEFAULT_CLAIM) is None
    assert limits.max_namespace_length("gcp", DEFAULT_CLAIM) == 39
    assert limits.max_namespace_length("aws", DEFAULT_CLAIM) == 63


# ---------------------------------------------------------------- names in a resource


def test_names_in_reads_names_tags_labels_and_autonames():
    eks = {"type": "aws:eks/cluster:Cluster", "name": "torchfleet-aws-control-eks",
           "inputs": {"name": "torchfleet-dev", "tags": {"torchfleet.io/stack": "dev"}}}
    assert list(limits.names_in(eks)) == [
        ("eks-cluster", "aws:eks/cluster:Cluster torchfleet-aws-control-eks name", "torchfleet-dev"),
        ("aws-tag-key", "aws:eks/cluster:Cluster torchfleet-aws-control-eks tag key", "torchfleet.io/stack"),
        ("aws-tag-value", "aws:eks/cluster:Cluster torchfleet-aws-control-eks tag torchfleet.io/stack", "dev"),
    ]
    gke = {"type": "gcp:container/cluster:Cluster", "name": "torchfleet-gcp-cluster-gke", "inputs": {}}
    [(kind, where, name)] = list(limits.names_in(gke))
    assert (kind, where) == ("gke-cluster", "gcp:container/cluster:Cluster torchfleet-gcp-cluster-gke (auto-named)")
    assert len(name) == len("torchfleet-gcp-cluster-gke") + limits.AUTONAME_SUFFIX
    job = {"type": "kubernetes:batch/v1:Job", "name": "j",
           "inputs": {"kind": "Job", "metadata": {"name": "store-owner-" + "n" * 60, "namespace": "torchfleet-system"}}}
    kinds = [k for k, _, _ in limits.names_in(job)]
    assert kinds == ["k8s-dns-subdomain", "k8s-label-value", "k8s-dns-label"]
    assert len(limits.name_problems([job])) == 1


# ---------------------------------------------------------------- the walk over real synths

# The longest stack name each cloud accepts (the EKS name's 100, the GCP service account display
# name's 100, else Pulumi's own 100), and names with every character a Pulumi stack name may hold
# that the cloud's names allow.
LONGEST = {"aws": 89, "gcp": 77, "azure": 100, "local": 100}
ODD = {"aws": "Team_Dev-2", "gcp": "team.dev_2-X", "azure": "Team.Dev_2-x", "local": "a.b_C-9"}
# What the walk must have seen per cloud, so it cannot pass by walking nothing.
MUST_SEE = {
    "aws": {"eks-cluster", "eks-nodegroup", "aws-tag-key", "cloudwatch-log-group", "k8s-dns-label", "helm-release"},
    "gcp": {"gke-cluster", "gke-node-pool", "gcp-service-account-id", "gcp-service-account-display-name",
            "gcp-label-value"},
    "azure": {"aks-cluster", "aks-agent-pool", "aks-dns-prefix", "azure-storage-account", "azure-tag-value"},
    "local": {"k8s-dns-label", "k8s-dns-subdomain", "k8s-label-value"},
}


def synth_as(cloud: str, stack: str, namespace: str | None = None):
    _, config, secret_keys = runner.stack_config(STACK_FILES[cloud])
    if namespace:
        training = json.loads(config["torchfleet:training"])
        config["torchfleet:training"] = json.dumps({**training, "namespace": namespace})
    return runner.synth(stack, config, secret_keys)


@pytest.mark.parametrize("cloud", sorted(STACK_FILES))
def test_every_name_of_a_synth_with_the_longest_stack_name_and_namespace_fits(cloud):
    stack = ("s" * 100)[: LONGEST[cloud]]
    namespace = "n" * limits.max_namespace_length(cloud, DEFAULT_CLAIM)
    resources = synth_as(cloud, stack, namespace).to_json()["resources"]
    seen = {kind for r in resources for kind, _, _ in limits.names_in(r)}
    assert MUST_SEE[cloud] <= seen
    assert limits.name_problems(resources) == []


@pytest.mark.parametrize("cloud", sorted(STACK_FILES))
def test_every_name_of_a_synth_with_an_odd_stack_name_fits(cloud):
    assert limits.name_problems(synth_as(cloud, ODD[cloud]).to_json()["resources"]) == []


@pytest.mark.parametrize("cloud", ["aws", "gcp"])
def test_one_character_longer_is_refused_before_any_resource(cloud):
    with pytest.raises(ConfigError) as caught:
        synth_as(cloud, "s" * (LONGEST[cloud] + 1))
    assert [p.split(": ", 1)[0] for p in caught.value.problems] == ["stack"]


def test_torchfleet_synth_output_walked_name_by_name(tmp_path):
    # The command line, end to end: a long stack name (the file name) through `torchfleet synth`.
    stack_file = tmp_path / f"Pulumi.{'s' * LONGEST['aws']}.yaml"
    stack_file.write_text(STACK_FILES["aws"].read_text())
    done = subprocess.run(
        [sys.executable, "-m", "torchfleet", "synth", "--json", "--stack-file", str(stack_file)],
        cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stderr
    resources = json.loads(done.stdout)["resources"]
    assert limits.name_problems(resources) == []
    eks = next(r for r in resources if r["type"] == "aws:eks/cluster:Cluster")
    assert eks["inputs"]["name"] == "torchfleet-" + "s" * 89
