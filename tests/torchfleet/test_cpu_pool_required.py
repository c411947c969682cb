"""The CLI's pods without a GPU need the stack's CPU pool (issue 30): on a cloud stack every other pool is tainted,
the manager pool for the platform alone, so a CPU job, an in-place job's Lighthouse, TensorBoard or the reader of
`checkpoints`/`cp` on a stack without torchfleet:cpuPool is refused before anything is sent, naming the key; with
one, they select and tolerate it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from torchfleet.cli import main

REPO = Path(__file__).resolve().parents[2]
IMAGE = "registry.example.com/team/train:1.0"
CMD = ["--", "python", "train.py"]
REFUSED = ("has no CPU pool, where pods without a GPU run (never on the manager pool beside etcd); "
           "add torchfleet:cpuPool")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(params=["aws-usw2", "gcp-usc1", "azure-eus"])
def without_cpu_pool(request, tmp_path) -> str:
    """The shipped stack's file without its cpuPool, as a stack deployed before issue 30 has it."""
    document = yaml.safe_load((REPO / "stacks" / f"Pulumi.{request.param}.yaml").read_text())
    assert document["config"].pop("torchfleet:cpuPool")
    path = tmp_path / "Pulumi.nocpu.yaml"
    path.write_text(yaml.safe_dump(document))
    return str(path)


@pytest.mark.parametrize("flags", [["--cpu"], ["--gpu", "t4", "--recovery", "inplace"]], ids=["cpu", "inplace"])
def test_a_cpu_pod_on_a_stack_without_a_cpu_pool_is_refused_naming_the_key(without_cpu_pool, capsys, flags):
    code, out, err = run(capsys, "submit", "j", "--stack", without_cpu_pool, *flags, "--image", IMAGE, "--dry-run",
                         *CMD)  # fmt: skip
    assert (code, out) == (2, ""), err
    assert f"stack nocpu {REFUSED}" in err
    assert ("--cpu: " if "--cpu" in flags else "--recovery inplace (its Lighthouse): ") in err


def test_a_gpu_job_needs_no_cpu_pool(without_cpu_pool, capsys):
    code, _, err = run(capsys, "submit", "j", "--stack", without_cpu_pool, "--gpu", "t4", "--image", IMAGE,
                       "--dry-run", *CMD)  # fmt: skip
    assert code == 0, err


def test_tensorboard_on_a_stack_without_a_cpu_pool_is_refused(without_cpu_pool, capsys):
    code, out, err = run(capsys, "tensorboard", "j", "--stack", without_cpu_pool, "--image", IMAGE, "--dry-run")
    assert (code, out) == (2, "") and f"tensorboard: stack nocpu {REFUSED}" in err, err


def test_the_reader_on_a_stack_without_a_cpu_pool_is_refused_before_any_call(without_cpu_pool, capsys, tmp_path):
    """`checkpoints` needs the cluster: refused after the target is known and before the API is called (the
    kubeconfig names a server nothing listens on, and no call is made)."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.9:1"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}], "users": [{"name": "u", "user": {}}],
    }))  # fmt: skip
    code, out, err = run(capsys, "checkpoints", "j", "--stack", without_cpu_pool, "--kubeconfig", str(kubeconfig))
    assert (code, out) == (2, "") and f"the reader pod: stack nocpu {REFUSED}" in err, err


@pytest.mark.parametrize("stack", ["aws-usw2", "gcp-usc1", "azure-eus"])
def test_with_a_cpu_pool_a_cpu_job_selects_and_tolerates_it(stack, capsys):
    code, out, err = run(capsys, "submit", "j", "--stack", stack, "--cpu", "--image", IMAGE, "--dry-run", *CMD)
    assert code == 0, err
    (job,) = [d for d in yaml.safe_load_all(out) if d and d["kind"] in ("Job", "ElasticJob", "PyTorchJob")]
    spec = job["spec"]["template"]["spec"] if job["kind"] == "Job" else None
    assert spec is not None, job["kind"]
    assert spec["nodeSelector"] == {"torchfleet.io/pool": "cpu"}
    assert {"key": "torchfleet.io/pool", "operator": "Equal", "value": "cpu", "effect": "NoSchedule"} in \
        spec["tolerations"]
    assert not [t for t in spec["tolerations"] if t["key"] in ("CriticalAddonsOnly", "nvidia.com/gpu")]
