"""Where a job goes: the stack file, the stack's Pulumi outputs, or the platform defaults."""

from pathlib import Path
from unittest import mock

import pulumi.automation as auto
import pytest

from torchfleet.jobs import target as targets
from torchfleet.jobs.errors import ClusterError, UsageError

TEST_STACKS = Path(__file__).parent / "data" / "stacks"


def test_defaults_are_the_platform_defaults():
    t = targets.defaults()
    assert (t.operator, t.namespace, t.claim, t.cloud, t.pools) == ("job", "elastic-job", "shared-data",
                                                                    "aws", None)
    assert t.grace_s == 120 and t.etcd_endpoint == "etcd.elastic-job.svc:2379"


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
    text = ('config:\n  torchfleet:cloud: aws\n  aws:region: us-west-2\n  torchfleet:zones: [us-west-2a]\n'
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


def _stack(outputs=None, error=None):
    stack = mock.Mock()
    if error:
        stack.outputs.side_effect = error
    else:
        stack.outputs.return_value = {k: auto.OutputValue(v, k == "kubeconfig") for k, v in outputs.items()}
    return stack


def test_reads_outputs_secrets_included():
    stack = _stack({"kubeconfig": "apiVersion: v1", "namespace": "ns"})
    with mock.patch.object(auto, "select_stack", return_value=stack) as select:
        assert targets.read_stack_outputs("aws-usw2") == {"kubeconfig": "apiVersion: v1", "namespace": "ns"}
    select.assert_called_once_with(stack_name="aws-usw2", work_dir=str(targets.REPO))


@pytest.mark.parametrize(("error", "kind", "words"), [
    (FileNotFoundError("pulumi"), ClusterError, "needs the Pulumi CLI"),
    (auto.InvalidVersionError("minimum 3.1"), ClusterError, "too old"),
    (auto.StackNotFoundError(auto.CommandResult("", "no stack named 'x' found", 255)), UsageError,
     "Pulumi has no stack"),
    (auto.CommandError(auto.CommandResult("", "not logged in", 255)), ClusterError, "could not read the stack outputs"),
])
def test_pulumi_failures(error, kind, words):
    with mock.patch.object(auto, "select_stack", side_effect=error), pytest.raises(kind, match=words):
        targets.read_stack_outputs("x")
