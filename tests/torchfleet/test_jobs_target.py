"""Where a job goes: the stack file, the stack's Pulumi outputs, or the platform defaults."""

from pathlib import Path

import pytest

from torchfleet.jobs import target as targets
from torchfleet.jobs.errors import ClusterError, UsageError

TEST_STACKS = Path(__file__).parent / "data" / "stacks"


def test_defaults_are_the_platform_defaults():
    t = targets.defaults()
    assert (t.operator, t.namespace, t.claim, t.cloud, t.pools) == ("job", "elastic-job", "shared-data",
                                                                    "aws", None)
    assert t.grace_s == 120 and t.etcd_endpoint == "etcd-gate.elastic-job.svc:2379"


@pytest.mark.parametrize(("cloud", "grace"), [("aws", 120), ("gcp", 15), ("azure", 30)])
def test_grace_period_is_the_clouds_spot_notice(cloud, grace):
    assert targets.defaults(cloud).grace_s == grace


def test_stack_file_gives_pools_operator_namespace():
    t = targets.from_stack("kubeflow-4gpu", TEST_STACKS)
    assert (t.stack, t.operator, t.namespace, t.max_gpus) == ("kubeflow-4gpu", "kubeflow", "research", 12)
    assert [(p.gpu, p.zone, p.machines[0].type) for p in t.pools] == [("t4", "us-east-1b", "g4dn.12xlarge")]


def test_stack_file_is_read_as_the_program_reads_it(tmp_path):
    # Regression: the CLI decoded every value as JSON, so kubernetesVersion "1.30" became 1.3.
    # It now shares components.config's decoding: the version arrives as written (EKS no longer
    # offers 1.30, and the refusal quotes it unchanged).
    text = ('config:\n  torchfleet:cloud: aws\n  aws:region: us-west-2\n  torchfleet:zones: [us-west-2a, us-west-2b]\n'
            '  torchfleet:network: {{publicAccessCidrs: [203.0.113.0/24]}}\n'
            '  torchfleet:kubernetesVersion: "{}"\n  torchfleet:gpuPools: [{{gpu: t4, maxNodes: 2}}]\n')
    (tmp_path / "Pulumi.v130.yaml").write_text(text.format("1.30"))
    with pytest.raises(UsageError, match=r"kubernetesVersion: .*got '1\.30'"):
        targets.from_stack("v130", tmp_path)
    (tmp_path / "Pulumi.v134.yaml").write_text(text.format("1.34"))
    assert targets.from_stack("v134", tmp_path).pools[0].name == "gpu-t4-us-west-2a"


def test_invalid_stack_file_is_a_usage_error(tmp_path):
    (tmp_path / "Pulumi.broken.yaml").write_text("config:\n  torchfleet:cloud: aws\n  aws:region: us-west-2\n")
    with pytest.raises(UsageError, match=r"^--stack broken: invalid stack config"):
        targets.from_stack("broken", tmp_path)


def test_unknown_stack_lists_the_known_ones():
    with pytest.raises(UsageError, match="stacks: kubeflow-4gpu"):
        targets.from_stack("nope", TEST_STACKS)


@pytest.mark.parametrize(("endpoint", "expected"), [
    ("etcd.ns.svc:2379", "etcd.ns.svc:2379"), ("http://etcd.ns.svc:2379", "etcd.ns.svc:2379"),
    ("etcd.ns.svc", "etcd.ns.svc:2379"),
])
def test_outputs_override_the_file(endpoint, expected):
    t = targets.with_outputs(targets.defaults(), {"namespace": "ns", "sharedClaim": "c", "etcdEndpoint": endpoint,
                                                  "operator": "kubeflow", "kubeconfig": "..."})
    assert (t.namespace, t.claim, t.etcd_endpoint, t.operator) == ("ns", "c", expected, "kubeflow")
    assert (t.etcd_host, t.etcd_port) == (expected.split(":")[0], 2379)


def _pulumi(tmp_path, monkeypatch, body: str) -> Path:
    """A stand-in `pulumi` first on PATH (a shell script: BODY), which logs its arguments and folder.

    The real CLI reads real outputs, secrets included, in tests/controlplane/test_stack_outputs.py."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "pulumi"
    script.write_text(f'#!/bin/sh\necho "$PWD $*" > {tmp_path}/argv\n{body}\n')
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    return tmp_path / "argv"


def test_reads_outputs_secrets_included(tmp_path, monkeypatch):
    argv = _pulumi(tmp_path, monkeypatch, """echo '{"kubeconfig": "apiVersion: v1", "namespace": "ns"}'""")
    assert targets.read_stack_outputs("aws-usw2") == {"kubeconfig": "apiVersion: v1", "namespace": "ns"}
    # in the project's folder (Pulumi.yaml), no `stack select`: the checkout's selected stack stays as it was
    assert argv.read_text().split() == [str(targets.REPO), "stack", "output", "--json", "--show-secrets",
                                        "--stack", "aws-usw2", "--non-interactive"]


@pytest.mark.parametrize(("body", "kind", "words"), [
    ("echo \"error: no stack named 'x' found\" >&2; exit 6", UsageError, "Pulumi has no stack 'x'"),
    ("echo 'error: getting user info: not logged in' >&2; exit 255", ClusterError,
     "could not read the stack outputs: error: getting user info: not logged in"),
    ("echo 'Current stack outputs (0):'", ClusterError, "printed no JSON object of outputs"),
    ("echo '[1, 2]'", ClusterError, "printed no JSON object of outputs"),
])
def test_pulumi_failures(tmp_path, monkeypatch, body, kind, words):
    _pulumi(tmp_path, monkeypatch, body)
    with pytest.raises(kind, match=words):
        targets.read_stack_outputs("x")


def test_without_the_pulumi_cli(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UsageError, match="needs the Pulumi CLI, which is not installed"):
        targets.read_stack_outputs("x")
