"""The CLI under issue 23's probe: stack files and arguments that got exit 0 (or an exit 2 naming no
key) are exit 2 naming the key or argument, before anything is created. Each names the bug it pins."""

from __future__ import annotations

import pytest
import yaml

from tests.harness import REPO
from torchfleet.cli import main


def run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def stack_file(tmp_path, name: str, edit) -> str:
    """stacks/Pulumi.<name>.yaml with `edit(config)` applied, written as tmp_path/Pulumi.<name>.yaml."""
    document = yaml.safe_load((REPO / "stacks" / f"Pulumi.{name}.yaml").read_text())
    edit(document["config"])
    path = tmp_path / f"Pulumi.{name}.yaml"
    path.write_text(yaml.safe_dump(document))
    return str(path)


@pytest.mark.parametrize(
    ("name", "edit", "key", "says"),
    [
        (
            "gcp-usc1",
            lambda c: c["torchfleet:training"].update(namespace="kube-system"),
            "torchfleet:training.namespace",
            "'kube-system' is Kubernetes' own",
        ),
        (
            "aws-usw2",
            lambda c: c["torchfleet:training"].update(namespace="torchfleet-system"),
            "torchfleet:training.namespace",
            "'torchfleet-system' is the store-owner Job's namespace",
        ),
        (
            "azure-eus",
            lambda c: c["torchfleet:autoscaler"].update(scaleDownUnneededTime="300s"),
            "torchfleet:autoscaler.scaleDownUnneededTime",
            "AKS takes whole minutes only",
        ),
        (
            "aws-usw2",
            lambda c: c["torchfleet:autoscaler"].update(scaleDownDelayAfterAdd="99999999999h"),
            "torchfleet:autoscaler.scaleDownDelayAfterAdd",
            "'99999999999h' is longer than a Go time.Duration holds",
        ),
        (
            "gcp-usc1",
            lambda c: c["torchfleet:network"].update(
                publicAccessCidrs=[f"11.1.{i}.0/24" for i in range(101)] + [f"11.2.{i}.0/24" for i in range(199)]
            ),
            "torchfleet:network.publicAccessCidrs",
            "at most 100 CIDRs on gcp",
        ),
    ],
    ids=[
        "namespace-kube-system",
        "namespace-torchfleet-system",
        "aks-seconds",
        "go-duration-overflow",
        "300-gke-authorized-networks",
    ],
)
def test_synth_refuses_what_issue_23_got_through(tmp_path, capsys, name, edit, key, says):
    code, out, err = run(["synth", "--stack", stack_file(tmp_path, name, edit)], capsys)
    assert (code, out) == (2, "")
    assert f"  - {key}: {says}" in err


def test_a_5000_digit_max_nodes_names_the_key(tmp_path, capsys):
    # Regression (issue 23): exit 2, but naming only the file ("Exceeds the limit (4300 digits)").
    path = tmp_path / "Pulumi.huge.yaml"
    text = (REPO / "stacks" / "Pulumi.gcp-usc1.yaml").read_text()
    path.write_text(text.replace("minNodes: 1, maxNodes: 3", "minNodes: 1, maxNodes: " + "9" * 5000))
    code, out, err = run(["synth", "--stack", str(path)], capsys)
    assert (code, out) == (2, "")
    assert "  - torchfleet:managerPool.maxNodes: must be <= 1000 (" in err and "got a 5000-digit number" in err


# ---------------------------------------------------------------- submit's doubtful inputs

SUBMIT = ["submit", "x", "--stack", "aws-usw2", "--gpu", "t4", "--nodes", "1:2", "--dry-run"]
CMD = ["--", "python", "train.py"]


@pytest.mark.parametrize(
    ("cidr", "says"),
    [
        ("::ffff:169.254.169.254/128", "is the IPv4-mapped form of 169.254.169.254/32, AWS, GCP and Azure instance"),
        ("::ffff:a9fe:a9fe/128", "is the IPv4-mapped form of 169.254.169.254/32"),
        ("::ffff:169.254.169.252/128", "is the IPv4-mapped form of 169.254.169.252/32, the GKE metadata server"),
        ("::ffff:168.63.129.16/128", "is the IPv4-mapped form of 168.63.129.16/32, Azure's WireServer"),
        ("::ffff:10.0.0.0/104", "is the IPv4-mapped IPv6 form of 10.0.0.0/8; write 10.0.0.0/8"),
        ("::ffff:0:0/96", "is the IPv4-mapped IPv6 form of 0.0.0.0/0; write 0.0.0.0/0"),
    ],
)
def test_ipv4_mapped_egress_is_refused_naming_the_ipv4_form(cidr, says, capsys):
    # Doubt of issue 23, decided: Kubernetes' stricter IP validation (KEP-4858) rejects IPv4-mapped
    # IPv6 in NetworkPolicy CIDRs, and ::ffff:169.254.169.254 was accepted though it names IMDS.
    code, out, err = run([*SUBMIT, "--image", "r/t:1", "--allow-egress", cidr, *CMD], capsys)
    assert (code, out) == (2, "")
    assert f"--allow-egress: {cidr!r} {says}" in err


def test_plain_ipv6_egress_is_still_accepted(capsys):
    code, out, _ = run([*SUBMIT, "--image", "r/t:1", "--allow-egress", "2600:1f00::/24", *CMD], capsys)
    assert code == 0 and "2600:1f00::/24" in out


def test_an_image_whose_first_part_has_capitals_is_refused(capsys):
    # Doubt of issue 23, decided: UPPER/case:tag fits the reference grammar, but the runtime takes
    # 'UPPER' for a registry host (distribution/reference normalize.go splitDockerDomain), so the
    # pull would go to https://UPPER/ and fail long after submit said yes.
    code, out, err = run([*SUBMIT, "--image", "UPPER/case:tag", *CMD], capsys)
    assert (code, out) == (2, "")
    assert "--image: 'UPPER/case:tag' is not an image reference: 'UPPER' has capitals" in err
    assert "Docker Hub names are lowercase (upper/case)" in err


@pytest.mark.parametrize(
    "image", ["Registry.Example.com/team/t:1", "LOCALHOST:5000/t:1", "localhost/t:1", "upper/case:Tag"]
)
def test_a_registry_host_with_a_dot_or_port_may_have_capitals(image, capsys):
    code, _, err = run([*SUBMIT, "--image", image, *CMD], capsys)
    assert code == 0, err


@pytest.mark.parametrize("namespace", ["kube-system", "default", "torchfleet-system", "kube-public"])
def test_submit_into_a_namespace_the_cluster_or_platform_owns_is_refused(namespace, capsys):
    # Doubt of issue 23, decided: `submit -n kube-system` was accepted; the namespace is not the
    # training namespace, so the job escaped its restricted Pod Security and default-deny policies.
    code, out, err = run([*SUBMIT, "--image", "r/t:1", "-n", namespace, *CMD], capsys)
    assert (code, out) == (2, "")
    assert f"--namespace: {namespace!r} is " in err and "jobs run in the stack's training namespace" in err


def test_a_reserved_namespace_from_the_environment_names_the_variable(capsys, monkeypatch):
    monkeypatch.setenv("TORCHFLEET_NAMESPACE", "kube-system")
    code, out, err = run([*SUBMIT, "--image", "r/t:1", *CMD], capsys)
    assert (code, out) == (2, "")
    assert "TORCHFLEET_NAMESPACE: 'kube-system' is Kubernetes' own" in err


@pytest.mark.parametrize("command", ["synth", "check"])
def test_a_yml_stack_file_is_refused_naming_the_yaml_name(tmp_path, capsys, command):
    # Doubt of issue 23, decided: the Pulumi CLI names stack files after the project file
    # (Pulumi.<stack> + Pulumi.yaml's extension), so `pulumi up` never reads a .yml one.
    path = tmp_path / "Pulumi.mine.yml"
    path.write_text((REPO / "stacks" / "Pulumi.aws-usw2.yaml").read_text())
    code, out, err = run([command, "--stack", str(path)], capsys)
    assert (code, out) == (2, "")
    assert f"{path} ends in .yml, which the Pulumi CLI never reads" in err and "rename it to Pulumi.mine.yaml" in err


@pytest.mark.parametrize(
    ("stack", "machine", "shape"),
    [
        ("aws-usw2", "m6i.large", "2 vCPUs and 8 GiB"),
        ("gcp-usc1", "e2-standard-4", "4 vCPUs and 16 GiB"),
        ("azure-eus", "Standard_D4s_v5", "4 vCPUs and 16 GiB"),
    ],
)
def test_a_cpu_pod_larger_than_the_cpu_pool_machine_is_refused(stack, machine, shape, capsys):
    # Doubt of issue 23, decided: --cpu --cpus 100000 --memory 100000Gi was accepted; the pod would
    # stay Pending for good (no node of the CPU pool, where CPU pods run since issue 30, can hold it).
    argv = ["submit", "x", "--stack", stack, "--cpu", "--nodes", "1:2", "--dry-run", "--image", "r/t:1"]
    code, out, err = run([*argv, "--cpus", "100000", "--memory", "100000Gi", *CMD], capsys)
    assert (code, out) == (2, "")
    whose = f"a CPU job's pods run on the CPU pool, whose {machine} has {shape}"
    assert f"--cpus: 100000 cores per pod, but {whose}" in err and f"--memory: 102400000Mi per pod, but {whose}" in err
    vcpus = int(shape.split()[0])
    code, _, err = run([*argv, "--cpus", str(vcpus), "--memory", "2Gi", *CMD], capsys)
    assert code == 0, err  # the bound is the machine's capacity: anything up to it is left to the scheduler


def test_the_local_stack_has_no_cpu_bound(capsys):
    argv = ["submit", "x", "--stack", "local", "--cpu", "--nodes", "1:2", "--dry-run", "--image", "r/t:1"]
    code, _, err = run([*argv, "--cpus", "64", *CMD], capsys)
    assert code == 0, err


HUGE = "9" * 5000


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (
            ["--gpu", "t4", "--nodes", f"1:{HUGE}"],
            "--nodes: at most 64 nodes (the most one job's rendezvous state holds within the etcd gate's "
            "limit), got a 5000-digit number",
        ),
        (["--cpu", "--nodes", "1:2", "--cpus", HUGE], "--cpus: a 5000-digit number of cores per pod"),
        (["--cpu", "--nodes", "1:2", "--cpus", f"{HUGE}.5"], "--cpus: a 5000-digit number of cores per pod"),
        (["--cpu", "--nodes", "1:2", "--cpus", f"{HUGE}m"], "--cpus: a 5000-digit number of cores per pod"),
        (["--cpu", "--nodes", "1:2", "--memory", f"{HUGE}Gi"], "--memory: a 5000-digit number of Gi per pod"),
    ],
    ids=["nodes", "cpus", "cpus-fraction", "cpus-millis", "memory"],
)
def test_a_flag_of_thousands_of_digits_is_exit_2_naming_it(flags, says, capsys):
    # Regression (issue 23's 5,000-digit class): int() past 4,300 digits raised ValueError (and a long
    # --cpus became float inf, OverflowError): "unexpected error", exit 1.
    code, out, err = run(["submit", "x", "--stack", "local", "--image", "r/t:1", "--dry-run", *flags, *CMD], capsys)
    assert (code, out) == (2, "")
    assert says in err and "unexpected error" not in err


def test_a_job_file_number_of_thousands_of_digits_names_its_key(tmp_path, capsys):
    # The stack-file loader keeps such a number as text (so spec names the key); job files share it.
    job = tmp_path / "job.yaml"
    job.write_text(f"name: j\nstack: local\ncpu: true\nnodes: {HUGE}\nimage: r/t:1\ncommand: [python, t.py]\n")
    code, out, err = run(["submit", "-f", str(job), "--dry-run"], capsys)
    assert (code, out) == (2, "")
    assert f"{job}: nodes: at most 64 nodes" in err
