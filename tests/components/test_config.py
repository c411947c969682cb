"""components/config.py: the one reader of Pulumi config, under pulumi.runtime.set_all_config.

Config reaches the program as the engine passes it (every value a string; lists and objects as
JSON text), so these tests feed it that way, through runner.stack_config where a stack file exists.
"""

from __future__ import annotations

import json
import runpy

import pulumi
import pytest
import yaml
from pulumi.runtime import config as runtime_config

from components import config as platform_config
from components.spec import ConfigError
from tests.harness import REPO, STACKS, STACKS_DIR, synth_config
from torchfleet.preview import runner
from torchfleet.preview.mocks import TorchfleetMocks
from torchfleet.preview.monitor import RecordingMonitor

AWS = {
    "torchfleet:cloud": "aws",
    "aws:region": "us-west-2",
    # EKS needs two zones and a reachable API (issue 29): the smallest valid AWS stack
    "torchfleet:zones": ["us-west-2a", "us-west-2b"],
    "torchfleet:network": {"publicAccessCidrs": ["203.0.113.0/24"]},
    "torchfleet:gpuPools": [{"gpu": "t4", "maxNodes": 2}],
}


def engine(config: dict) -> dict[str, str]:
    """Config values as the engine passes them: strings, structured values as JSON text."""
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}


@pytest.fixture(autouse=True)
def clean_config(monkeypatch):
    # raw_config() also reads the process-wide PULUMI_CONFIG; keep the developer's out of it.
    monkeypatch.delenv("PULUMI_CONFIG", raising=False)
    yield
    runtime_config.set_all_config({}, [])


@pytest.fixture
def monitor():
    recording = RecordingMonitor(TorchfleetMocks())
    pulumi.runtime.set_mocks(TorchfleetMocks(), project="torchfleet", stack="cfg-test", preview=False,
                             monitor=recording)
    return recording


@pytest.mark.parametrize("stack", STACKS)
def test_raw_config_decodes_structured_values(stack):
    _name, config, secrets = runner.stack_config(STACKS_DIR / f"Pulumi.{stack}.yaml")
    runtime_config.set_all_config(config, secrets)
    in_yaml = yaml.safe_load((STACKS_DIR / f"Pulumi.{stack}.yaml").read_text())["config"]
    # What the stack file says, plus the project default from Pulumi.yaml.
    assert platform_config.raw_config() == {"torchfleet:kubernetesVersion": "1.35", **in_yaml}


def test_scalars_stay_strings_and_bad_json_stays_text():
    runtime_config.set_all_config(engine({**AWS, "torchfleet:kubernetesVersion": "1.33", "torchfleet:zones": "[us-"}))
    raw = platform_config.raw_config()
    assert raw["torchfleet:kubernetesVersion"] == "1.33"
    assert raw["torchfleet:zones"] == "[us-"  # left for parse() to report at its key, below


def test_bad_json_is_reported_at_its_key(monitor):
    runtime_config.set_all_config(engine({**AWS, "torchfleet:zones": "[us-west-2a"}))
    with pytest.raises(ConfigError) as caught:
        platform_config.load()
    assert caught.value.problems == [
        "torchfleet:zones: expected a list of strings, got '[us-west-2a'",
        "torchfleet:zones: list at least one zone of the region, e.g. [us-west-2a]",
    ]


def test_raw_config_reads_the_spec_keys_and_every_cloud_namespace_but_no_other():
    # Cloud namespaces are read so that another cloud's key (gcp:project on an AWS stack) is
    # reported (issue 12); kubernetes:context is the provider's own business.
    extra = {"aws:profile": "dev", "gcp:project": "my-ml-project", "kubernetes:context": "kind-kind"}
    runtime_config.set_all_config(engine({**AWS, **extra}))
    assert set(platform_config.raw_config()) == {*AWS, "aws:profile", "gcp:project"}


def test_load_checks_values_as_the_pulumi_cli_passes_them(monitor):
    # Under `pulumi up` the Pulumi CLI parses the YAML (a huge integer reaches the program as the
    # JSON number 1e+20); the spec's limits apply all the same (issue 12).
    pools = '[{"gpu": "t4", "maxNodes": 1e+20}]'
    runtime_config.set_all_config(engine({**AWS, "torchfleet:gpuPools": pools}))
    with pytest.raises(ConfigError) as caught:
        platform_config.load()
    assert caught.value.problems == ["torchfleet:gpuPools[0].maxNodes: expected a whole number, got 1e+20"]


def test_load_reports_another_clouds_key_under_pulumi_up(monitor):
    runtime_config.set_all_config(engine({**AWS, "gcp:project": "my-ml-project"}))
    with pytest.raises(ConfigError) as caught:
        platform_config.load()
    assert caught.value.problems == [
        "gcp:project: a key of gcp's provider, but torchfleet:cloud is aws: it would be ignored; remove it"
    ]


def test_raw_config_reads_the_pulumi_config_environment(monkeypatch):
    # The other way the engine hands config to a program.
    monkeypatch.setenv("PULUMI_CONFIG", json.dumps(engine(AWS)))
    runtime_config.set_all_config({})
    assert platform_config.raw_config() == AWS


def test_load_builds_the_spec_for_the_running_stack(monitor):
    runtime_config.set_all_config(engine(AWS))
    spec = platform_config.load()
    assert (spec.stack, spec.cloud, [p.name for p in spec.gpu_pools]) == (
        "cfg-test", "aws", ["gpu-t4-us-west-2a", "gpu-t4-us-west-2b"])


def test_top_level_typos_are_reported(monitor):
    config = {k: v for k, v in AWS.items() if k != "torchfleet:gpuPools"}
    typos = {"torchfleet:gpuPool": [{"gpu": "t4", "maxNodes": 2}], "torchfleet:netwrk": {}}
    runtime_config.set_all_config(engine({**config, **typos}))
    with pytest.raises(ConfigError) as caught:
        platform_config.load()
    assert caught.value.problems == [
        "torchfleet:gpuPool: unknown key; did you mean 'torchfleet:gpuPools'?",
        "torchfleet:netwrk: unknown key; did you mean 'torchfleet:network'?",
        "torchfleet:gpuPools: list at least one GPU pool, e.g. [{gpu: t4, maxNodes: 4}]",
    ]


# ---------------------------------------------------------------- nothing registered on error


@pytest.fixture
def monitors(monkeypatch):
    """Every RecordingMonitor synth() creates, so a test can see what each one recorded."""
    made: list[RecordingMonitor] = []

    class Capturing(RecordingMonitor):
        def __init__(self, mocks):
            super().__init__(mocks)
            made.append(self)

    monkeypatch.setattr(runner, "RecordingMonitor", Capturing)
    return made


def test_synth_of_a_valid_config_records_resources(monitors):
    # The control for the test below: the captured monitor does see registrations.
    synth_config("local", {"torchfleet:cloud": "local"})
    assert len(monitors) == 1
    assert "torchfleet:platform:TrainingPlatform" in [r.type for r in monitors[0].recorded]


def test_invalid_config_registers_nothing(monitors):
    with pytest.raises(ConfigError) as caught:
        synth_config("bad", {**AWS, "torchfleet:gpuPools": [{"gpu": "k80", "maxNodes": 2}]})
    assert caught.value.problems[0].startswith("torchfleet:gpuPools[0].gpu: k80 on aws was retired")
    assert len(monitors) == 1
    assert monitors[0].recorded == []


def test_program_stops_with_every_problem_and_registers_nothing(monitor):
    # __main__.py as `pulumi up` runs it: a RunError naming each problem, before any resource.
    runtime_config.set_all_config(engine({**AWS, "torchfleet:training": {"operator": "x", "etcdReplicas": 2}}))
    with pytest.raises(pulumi.RunError) as caught:
        runpy.run_path(str(REPO / "__main__.py"))
    assert "torchfleet:training.operator: must be one of job, torchelastic, kubeflow, got 'x'" in str(caught.value)
    assert "torchfleet:training.etcdReplicas: etcd needs an odd member count" in str(caught.value)
    assert monitor.recorded == []
