"""`torchfleet submit/sweep` from the command line: every usage error exits 2 naming its flag,
before any cluster or Pulumi call; --dry-run prints the exact documents and touches nothing."""

from pathlib import Path
from unittest import mock

import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import latest_version

from torchfleet.cli import main
from torchfleet.jobs import manifests, pod_template, schema
from torchfleet.jobs.image_ref import DEFAULT_IMAGE

TEST_STACKS = str(Path(__file__).parent / "data" / "stacks")
BASE = ["--gpu", "t4", "--nodes", "2:8", "--image", "registry.example.com/team/train:1.4.2"]
CMD = ["--", "python", "train.py", "--lr", "0.1"]


@pytest.fixture(autouse=True)
def no_cluster_no_pulumi():
    """Nothing in this file may reach a cluster or Pulumi: any attempt fails the test."""
    with mock.patch("torchfleet.jobs.kubeconfig.connect", side_effect=AssertionError("connected")) as connect, \
         mock.patch("torchfleet.jobs.target.read_stack_outputs", side_effect=AssertionError("pulumi")):
        yield connect


def run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


# (id, argv, flag/words the message must contain)
USAGE_ERRORS = [
    ("gpu-not-in-stack", ["submit", "j", "--stack", "aws-usw2", "--gpu", "l4", "--image", "r/t:1", *CMD],
     "--gpu: stack aws-usw2 has no 'l4' pool; its GPU pools have: a10g, t4"),
    ("gpu-unknown", ["submit", "j", "--gpu", "z99", "--image", "r/t:1", *CMD], "--gpu: unknown GPU 'z99'"),
    ("gpu-retired", ["submit", "j", "--gpu", "k80", "--image", "r/t:1", *CMD], "use t4 instead"),
    ("gpu-not-on-cloud", ["submit", "j", "--gpu", "a10g", "--cloud", "gcp", "--image", "r/t:1", *CMD],
     "--gpu: a10g is not offered on gcp"),
    ("gpu-missing", ["submit", "j", "--image", "r/t:1", *CMD], "--gpu: required"),
    ("cpu-only-stack", ["submit", "j", "--stack", "local", "--gpu", "t4", "--image", "r/t:1", *CMD],
     "no GPU pools"),
    ("nodes-malformed", ["submit", "j", *BASE, "--nodes", "2-8", *CMD], "--nodes: expected MIN:MAX"),
    ("nodes-letters", ["submit", "j", *BASE, "--nodes", "a:b", *CMD], "--nodes: expected MIN:MAX"),
    ("nodes-min-over-max", ["submit", "j", *BASE, "--nodes", "8:2", *CMD], "--nodes: the minimum (8)"),
    ("nodes-zero", ["submit", "j", *BASE, "--nodes", "0:2", *CMD], "--nodes: the minimum must be at least 1"),
    ("nodes-over-pool", ["submit", "j", "--stack", "aws-usw2", *BASE, "--nodes", "1:9", *CMD],
     "--nodes: at most 8 t4 nodes"),
    ("zone-not-in-stack", ["submit", "j", "--stack", "aws-usw2", *BASE, "--zone", "us-west-2c", *CMD],
     "--zone: stack aws-usw2 has no t4 pool in 'us-west-2c'"),
    ("gpus-per-node-too-many", ["submit", "j", "--stack", "aws-usw2", *BASE, "--gpus-per-node", "2", *CMD],
     "--gpus-per-node: g4dn.xlarge has 1"),
    ("gpus-per-node-zero", ["submit", "j", *BASE, "--gpus-per-node", "0", *CMD], "--gpus-per-node: must be"),
    ("guardrail", ["submit", "j", "--stack", "kubeflow-4gpu", "--stacks-dir", TEST_STACKS, "--gpu", "t4",
                   "--nodes", "1:4", "--gpus-per-node", "4", "--image", "r/t:1", *CMD], "guardrail of 12 GPUs"),
    ("image-no-tag", ["submit", "j", "--gpu", "t4", "--image", "team/train", *CMD], "--image: 'team/train'"),
    ("image-latest", ["submit", "j", "--gpu", "t4", "--image", "team/train:latest", *CMD], "not latest"),
    ("name-uppercase", ["submit", "ResNet", *BASE, *CMD], "NAME: 'ResNet' is not a valid job name"),
    ("name-digit-first", ["submit", "1job", *BASE, *CMD], "NAME: '1job'"),
    ("name-too-long", ["submit", "a" * 60, *BASE, *CMD], "is too long"),
    ("env-malformed", ["submit", "j", *BASE, "--env", "NOVALUE", *CMD], "--env: expected NAME=VALUE"),
    ("env-reserved", ["submit", "j", *BASE, "--env", "TORCHFLEET_JOB=x", *CMD], "--env TORCHFLEET_JOB: set by"),
    ("command-missing", ["submit", "j", *BASE], "the training command is missing"),
    ("command-python-option", ["submit", "j", *BASE, "--", "python", "-u", "train.py"], "interpreter options"),
    ("stack-unknown", ["submit", "j", "--stack", "nope", *BASE, *CMD], "--stack: no stack 'nope'"),
    ("namespace-bad", ["submit", "j", *BASE, "--namespace", "Bad_NS", *CMD], "--namespace: must be a DNS label"),
    ("sweep-no-param", ["sweep", "s", *BASE, *CMD], "--param: a sweep needs at least one"),
    ("sweep-bad-param", ["sweep", "s", *BASE, "--param", "lr", *CMD], "--param: expected KEY=V1,V2"),
    ("sweep-empty-value", ["sweep", "s", *BASE, "--param", "lr=0.1,", *CMD], "--param: expected KEY=V1,V2"),
    ("sweep-dup-key", ["sweep", "s", *BASE, "--param", "lr=1", "--param", "lr=2", *CMD], "--param lr: given twice"),
    ("sweep-too-many", ["sweep", "s", *BASE, "--param", "a=" + ",".join(map(str, range(20))),
                        "--param", "b=" + ",".join(map(str, range(20))), *CMD],
     "--param: 400 combinations, at most 256 jobs per sweep"),
    # Regression: `--cloud local --gpu t4` said "local offers:  " (an empty list).
    ("local-cloud-gpu", ["submit", "j", "--cloud", "local", "--gpu", "t4", "--image", "r/t:1", *CMD],
     "--gpu: the local stack is CPU-only (it has no GPU machines); submit a CPU job with --cpu"),
    ("local-stack-gpu-suggests-cpu", ["submit", "j", "--stack", "local", "--gpu", "t4", "--image", "r/t:1", *CMD],
     "submit a CPU job with --cpu"),
    ("local-stack-no-kind", ["submit", "j", "--stack", "local", "--image", "r/t:1", *CMD],
     "--gpu or --cpu: required; stack local is CPU-only, so submit with --cpu"),
    ("cpu-and-gpu", ["submit", "j", *BASE, "--cpu", *CMD], "--cpu: a CPU job asks for no GPU; drop --gpu t4"),
    ("cpu-and-gpus-per-node", ["submit", "j", "--cpu", "--gpus-per-node", "2", "--image", "r/t:1", *CMD],
     "--cpu: a CPU job asks for no GPU; drop --gpus-per-node"),
    ("cpus-without-cpu", ["submit", "j", *BASE, "--cpus", "2", *CMD], "--cpus: only with --cpu"),
    ("memory-without-cpu", ["submit", "j", "--memory", "4Gi", "--image", "r/t:1", *CMD], "--memory: only with --cpu"),
    ("cpus-zero", ["submit", "j", "--cpu", "--cpus", "0", "--image", "r/t:1", *CMD], "--cpus: expected cores"),
    ("cpus-words", ["submit", "j", "--cpu", "--cpus", "two", "--image", "r/t:1", *CMD], "--cpus: expected cores"),
    ("memory-no-unit", ["submit", "j", "--cpu", "--memory", "4096", "--image", "r/t:1", *CMD],
     "--memory: expected memory per pod in Mi or Gi"),
    ("memory-tiny", ["submit", "j", "--cpu", "--memory", "16Mi", "--image", "r/t:1", *CMD], "at least 256Mi"),
    ("egress-not-cidr", ["submit", "j", *BASE, "--allow-egress", "s3.amazonaws.com", *CMD],
     "--allow-egress: expected a CIDR"),
    ("egress-host-bits", ["submit", "j", *BASE, "--allow-egress", "10.1.2.3/8", *CMD],
     "--allow-egress: '10.1.2.3/8' is not a network CIDR"),
    ("egress-bad-prefix", ["submit", "j", *BASE, "--allow-egress", "10.0.0.0/33", *CMD], "--allow-egress: "),
    ("sweep-egress-bad", ["sweep", "s", *BASE, "--param", "lr=1", "--allow-egress", "nope", *CMD],
     "--allow-egress: "),
    ("run-as-root", ["submit", "j", *BASE, "--run-as-user", "0", *CMD],
     "--run-as-user: expected a uid from 1 to 2147483647"),
    ("run-as-negative", ["submit", "j", *BASE, "--run-as-user", "-5", *CMD], "--run-as-user: expected a uid"),
    ("sweep-run-as-root", ["sweep", "s", *BASE, "--param", "lr=1", "--run-as-user", "0", *CMD], "--run-as-user"),
    # Issue 12: each of these was accepted (exit 0) and wrong.
    ("run-as-huge-uid", ["submit", "j", *BASE, "--run-as-user", "99999999999999999999", *CMD],
     "--run-as-user: expected a uid from 1 to 2147483647"),
    ("mount-dotdot", ["submit", "j", *BASE, "--mount", "/mnt/../etc", *CMD],
     "--mount: '/mnt/../etc' (that is /etc) is /etc"),
    ("mount-double-slash", ["submit", "j", *BASE, "--mount", "//proc", *CMD], "--mount: '//proc' (that is /proc)"),
    ("mount-dev-shm", ["submit", "j", *BASE, "--mount", "/dev/shm", *CMD], "--mount: /dev/shm sits inside /dev"),
    ("mount-root", ["submit", "j", *BASE, "--mount", "/", *CMD], "--mount: / would cover /bin"),
    ("mount-var", ["submit", "j", *BASE, "--mount", "/var", *CMD], "--mount: /var would cover /var/lib"),
    ("mount-usr-local", ["submit", "j", *BASE, "--mount", "/usr/local/data", *CMD],
     "--mount: /usr/local/data sits inside /usr"),
    ("mount-workspace", ["submit", "j", *BASE, "--mount", "/workspace", *CMD], "--mount: /workspace is /workspace"),
    ("mount-relative", ["submit", "j", *BASE, "--mount", "mnt/shared", *CMD], "--mount: expected an absolute path"),
    ("mount-space", ["submit", "j", *BASE, "--mount", "/mnt/my data", *CMD], "--mount: '/mnt/my data' has characters"),
    ("image-newline", ["submit", "j", *BASE, "--image", "r/t:1\nx", *CMD], "whitespace or control characters"),
    ("image-tab", ["submit", "j", *BASE, "--image", "r/t:1\t", *CMD], "whitespace or control characters"),
    ("image-only-tag", ["submit", "j", *BASE, "--image", ":1.0", *CMD], "--image: ':1.0' is not an image reference"),
    ("image-bad-digest", ["submit", "j", *BASE, "--image", "r/t@sha256:zzz", *CMD], "is not an image reference"),
    ("image-short-digest", ["submit", "j", *BASE, "--image", "r/t@sha256:" + "a" * 63, *CMD],
     "a sha256 digest is 64 lowercase hex digits, got 63"),
    ("image-uppercase", ["submit", "j", *BASE, "--image", "Team/Train:1.0", *CMD], "repository names are lowercase"),
    ("image-long-tag", ["submit", "j", *BASE, "--image", "r/t:" + "1" * 129, *CMD], "is not an image reference"),
    ("zone-space", ["submit", "j", *BASE, "--zone", "a b", *CMD], "--zone: 'a b' cannot be a Kubernetes label value"),
    ("zone-uppercase", ["submit", "j", *BASE, "--zone", "US-WEST-2A", *CMD], "--zone: expected a zone"),
    # A zone no node has leaves every pod Pending: checked against the stack, else the region catalog.
    ("zone-unknown-aws", ["submit", "j", *BASE, "--zone", "us-west-2z", *CMD],
     "--zone: 'us-west-2z' is not a zone of aws (components/catalog/regions.yaml); did you mean 'us-west-2"),
    ("zone-unknown-gcp", ["submit", "j", "--cloud", "gcp", *BASE, "--zone", "us-central1-z", *CMD],
     "--zone: 'us-central1-z' is not a zone of gcp"),
    ("zone-unknown-azure-location", ["submit", "j", "--cloud", "azure", *BASE, "--zone", "mars-1", *CMD],
     "--zone: 'mars-1' is not a zone of azure"),
    ("zone-cpu-not-in-stack", ["submit", "j", "--stack", "aws-usw2", "--cpu", "--image", "r/t:1", "--zone",
                               "us-west-2d", *CMD], "--zone: stack aws-usw2 has no zone 'us-west-2d'; its zones: "),
    ("zone-local", ["submit", "j", "--stack", "local", "--cpu", "--image", "r/t:1", "--zone", "a", *CMD],
     "--zone: the local stack's nodes (kind, minikube) carry no zone label"),
    ("command-empty", ["submit", "j", *BASE, "--", ""], "the program after -- is empty"),
    ("command-empty-script", ["submit", "j", *BASE, "--", "python", ""], "the script after python is empty"),
    ("command-only-dashes", ["submit", "j", *BASE, "--"], "the training command is missing"),
    ("egress-imds", ["submit", "j", *BASE, "--allow-egress", "169.254.169.254/32", *CMD],
     "--allow-egress: '169.254.169.254/32' is AWS, GCP and Azure instance metadata"),
    ("egress-wireserver", ["submit", "j", *BASE, "--allow-egress", "168.63.129.16/32", *CMD], "Azure's WireServer"),
    ("egress-aws-imds-v6", ["submit", "j", *BASE, "--allow-egress", "fd00:ec2::254/128", *CMD], "over IPv6"),
    ("nodes-huge", ["submit", "j", *BASE, "--nodes", "1:99999999999999999999", *CMD], "--nodes: at most 64 nodes"),
    ("sweep-image-bad", ["sweep", "s", *BASE, "--param", "lr=1", "--image", "R/T:1", *CMD], "--image: "),
]


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "submit"])
@pytest.mark.parametrize(("argv", "expected"), [c[1:] for c in USAGE_ERRORS], ids=[c[0] for c in USAGE_ERRORS])
def test_usage_error_exits_2_before_touching_anything(argv, expected, dry_run, capsys, no_cluster_no_pulumi):
    argv = list(argv)
    if dry_run:
        argv.insert(2, "--dry-run")
    code, out, err = run(argv, capsys)
    assert code == 2, err
    assert expected in err
    assert out == ""
    no_cluster_no_pulumi.assert_not_called()


@pytest.mark.parametrize("flag", ["--gpus-per-node", "--run-as-user"])
def test_argparse_type_errors_exit_2(flag, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["submit", "j", *BASE, flag, "two", *CMD])
    assert exit_.value.code == 2
    assert flag in capsys.readouterr().err


def test_every_problem_is_listed_at_once(capsys):
    code, out, err = run(["submit", "Bad_Name", "--gpu", "t4", "--image", "Team/T", "--mount", "/etc",
                          "--run-as-user", "0", "--env", "X", "--nodes", "0", "--dry-run", "--", ""], capsys)
    assert (code, out) == (2, "")
    assert "7 problems:" in err
    for flag in ("NAME:", "--image:", "--mount:", "--run-as-user:", "--env:", "--nodes:", "the training command:"):
        assert f"\n  {flag}" in err


# (id, argv, what argparse's message must say): all exit 2 before anything runs.
ARGPARSE_ERRORS = [
    # Regression (issue 12): the job name forgotten, `python` became the job name and train.py the command.
    ("name-forgotten", ["submit", *BASE, "--", "python", "train.py"], "required: NAME; the job name comes first"),
    ("sweep-name-forgotten", ["sweep", "--param", "lr=1", *BASE, "--", "python", "train.py"], "required: NAME"),
    ("command-without-dashes", ["submit", "j", *BASE, "python", "train.py"],
     "unrecognized arguments: python train.py; the training command goes after --"),
    # Regression (issue 12): with abbreviations on, --node was silently taken as --nodes.
    ("abbreviation", ["submit", "j", "--gpu", "t4", "--node", "2", "--image", "r/t:1", *CMD],
     "unrecognized arguments: --node 2; --node: did you mean --nodes?; `torchfleet submit --help` lists the options"),
    ("abbreviation-global", ["sub", "j", *BASE, *CMD], "invalid choice: 'sub'"),
    ("list-with-command", ["list", "--", "x"], "takes no command after --"),
    ("status-no-name", ["status"], "required: NAME"),
    # Found by tests/property/test_cli_args.py: argparse 3.11 turned `--context=--` into an empty list.
    ("value-double-dash", ["submit", "j", *BASE, "--context=--", *CMD], "argument --context: expected a value"),
    ("append-double-dash", ["submit", "j", *BASE, "--env=--", *CMD], "argument --env: expected a value, got '--'"),
]


@pytest.mark.parametrize(("argv", "expected"), [c[1:] for c in ARGPARSE_ERRORS], ids=[c[0] for c in ARGPARSE_ERRORS])
def test_argparse_errors_exit_2_saying_what_is_right(argv, expected, capsys, no_cluster_no_pulumi):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    out, err = capsys.readouterr()
    assert (exit_.value.code, out) == (2, "")
    assert expected in err
    no_cluster_no_pulumi.assert_not_called()


# Regression (issue 12): status/logs/delete sent any name to the API.
LOOKUP_ERRORS = [
    ("status-bad-name", ["status", "../x"], "NAME: '../x' is not a job name"),
    ("logs-bad-name", ["logs", "A B"], "NAME: 'A B' is not a job name"),
    ("delete-bad-name", ["delete", "x" * 64], "at most 63 characters"),
    ("logs-negative-rank", ["logs", "j", "--rank", "-1"], "--rank: a node index from 0"),
    ("logs-negative-tail", ["logs", "j", "--tail", "-5"], "--tail: a number of lines, 0 or more"),
]


@pytest.mark.parametrize(("argv", "expected"), [c[1:] for c in LOOKUP_ERRORS], ids=[c[0] for c in LOOKUP_ERRORS])
def test_lookup_commands_check_their_input_before_connecting(argv, expected, capsys, no_cluster_no_pulumi):
    code, out, err = run(argv, capsys)
    assert (code, out) == (2, "")
    assert expected in err
    no_cluster_no_pulumi.assert_not_called()


@pytest.mark.parametrize(("argv", "uid"), [
    (["submit", "j", *BASE], 10001),
    (["submit", "j", *BASE, "--run-as-user", "2000"], 2000),
    (["submit", "--run-as-user", "3000", "j", *BASE], 3000),  # before NAME too
])
def test_pods_run_as_the_training_uid_unless_overridden(argv, uid, capsys):
    code, out, err = run([*argv, "--dry-run", *CMD], capsys)
    assert code == 0, err
    job, _ = _docs(out)
    security = _pod_spec(job)["securityContext"]
    # The group stays the training group: it owns the shared store's root (mode 2775).
    # OnRootMismatch: no recursive chown of the whole shared store at every pod start.
    assert security == {"runAsNonRoot": True, "runAsUser": uid, "runAsGroup": 10001, "fsGroup": 10001,
                        "fsGroupChangePolicy": "OnRootMismatch", "seccompProfile": {"type": "RuntimeDefault"}}


def _docs(out):
    return [d for d in yaml.safe_load_all(out) if d]


def test_dry_run_without_stack_uses_platform_defaults(capsys):
    code, out, err = run(["submit", "resnet", *BASE, "--dry-run", *CMD], capsys)
    assert code == 0, err
    job, policy = _docs(out)
    # the `job` operator: Kubernetes' own Indexed Job (issue 19)
    assert job["kind"] == "Job" and job["metadata"]["namespace"] == "elastic-job"
    assert policy["kind"] == "NetworkPolicy" and policy["metadata"]["name"] == "job-resnet"
    pod = _pod_spec(job)
    assert pod["volumes"][0]["persistentVolumeClaim"]["claimName"] == "shared-data"
    rdzv_id = job["metadata"]["annotations"]["torchfleet.io/rdzv-id"]
    assert rdzv_id.startswith("resnet-")
    assert pod["containers"][0]["args"] == [
        "--nproc_per_node=1", "--local-addr=$(POD_IP)", "--rdzv_backend=etcd-v2",
        "--rdzv_endpoint=etcd-gate.elastic-job.svc:2379", "--nnodes=2:8", f"--rdzv_id={rdzv_id}",
        "train.py", "--lr", "0.1"]
    assert "no --stack: accepting any catalog GPU" in err


def test_dry_run_with_stack_reads_the_stack_file_only(capsys):
    code, out, err = run(["submit", "resnet", "--stack", "kubeflow-4gpu", "--stacks-dir", TEST_STACKS,
                          "--gpu", "t4", "--nodes", "1:3", "--gpus-per-node", "4", "--image", "r/t:1",
                          "--dry-run", *CMD], capsys)
    assert code == 0, err
    job, _ = _docs(out)
    assert job["kind"] == "PyTorchJob" and job["metadata"]["namespace"] == "research"
    assert job["spec"]["elasticPolicy"]["rdzvHost"] == "etcd-gate.research.svc"  # 1ca85a9: the gate fronts etcd
    assert job["metadata"]["annotations"]["torchfleet.io/machine"] == "g4dn.12xlarge"
    assert "note:" not in err  # the stack names the pool: nothing assumed


def test_options_after_name_and_before_it_combine(capsys):
    code, out, err = run(["submit", "--env", "A=1", "resnet", "--gpu", "t4", "--image", "r/t:1", "--env", "B=2",
                          "--operator", "kubeflow", "--zone", "us-west-2b", "--dry-run", *CMD], capsys)
    assert code == 0, err
    job, _ = _docs(out)
    container = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["A"] == "1" and env["B"] == "2"
    assert job["metadata"]["annotations"]["torchfleet.io/zone"] == "us-west-2b"


def test_sweep_dry_run_one_job_per_combination(capsys):
    code, out, err = run(["sweep", "grid", *BASE, "--param", "lr=0.1,0.01", "--param", "batch=64,128",
                          "--param-style", "hydra", "--dry-run", "--", "python", "train.py"], capsys)
    assert code == 0, err
    jobs = [d for d in _docs(out) if d["kind"] == "Job"]
    assert [j["metadata"]["name"] for j in jobs] == ["grid-0", "grid-1", "grid-2", "grid-3"]
    args = [_pod_spec(j)["containers"][0]["args"] for j in jobs]
    assert [a[-2:] for a in args] == [["lr=0.1", "batch=64"], ["lr=0.1", "batch=128"],
                                      ["lr=0.01", "batch=64"], ["lr=0.01", "batch=128"]]
    outputs = set()
    for j in jobs:
        env = {e["name"]: e.get("value") for e in _pod_spec(j)["containers"][0]["env"]}
        outputs.add(env["TORCHFLEET_OUTPUT_DIR"])
        assert j["metadata"]["labels"]["torchfleet.io/sweep"] == "grid"
    # one rendezvous per member (issue 19): members never meet in etcd
    assert len({j["metadata"]["annotations"]["torchfleet.io/rdzv-id"] for j in jobs}) == 4
    assert outputs == {f"/mnt/shared/grid-{i}/output" for i in range(4)}
    assert "grid-3: lr=0.01 batch=128" in err


@pytest.mark.parametrize(("command", "args"), [
    (["python", "train.py", "--lr", "0.1"], ["train.py", "--lr", "0.1"]),
    (["python3", "-m", "team.train", "--x"], ["--module", "team.train", "--x"]),
    (["train.py"], ["train.py"]),
    (["bash", "run.sh"], ["--no-python", "bash", "run.sh"]),
])
def test_command_becomes_torchrun_script_args(command, args, capsys):
    code, out, _ = run(["submit", "j", *BASE, "--dry-run", "--", *command], capsys)
    assert code == 0
    job, _ = _docs(out)
    got = _pod_spec(job)["containers"][0]["args"]
    script_at = next(i for i, a in enumerate(got) if a.startswith("--rdzv_id=")) + 1  # the launcher's options first
    assert got[script_at:] == args


# ---------------------------------------------------------------- CPU jobs, egress


def _pod_spec(job):
    return manifests.worker_spec(job)["template"]["spec"]


@pytest.mark.parametrize("operator", ["job", "torchelastic", "kubeflow"])
def test_cpu_job_on_the_local_stack_asks_for_no_gpu(operator, capsys):
    code, out, err = run(["submit", "tiny", "--stack", "local", "--cpu", "--cpus", "1.5", "--memory", "3Gi",
                          "--operator", operator, "--image", DEFAULT_IMAGE, "--dry-run", *CMD], capsys)
    assert code == 0, err
    job, _ = _docs(out)
    assert manifests.is_indexed_job(job) or schema.problems(job) == []
    pod = _pod_spec(job)
    (container,) = pod["containers"]
    assert "nodeSelector" not in pod
    assert [t["key"] for t in pod["tolerations"]] == list(pod_template.NODE_LOSS_TAINTS)  # no GPU or spot taint
    assert "affinity" not in pod  # kind nodes carry no zone label: a zone affinity would leave pods Pending
    assert container["resources"] == {"requests": {"cpu": "1500m", "memory": "3072Mi"},
                                      "limits": {"memory": "3072Mi"}}
    assert "nvidia.com/gpu" not in out and "torchfleet.io/gpu" not in out
    assert container["args"][:2] == ["--nproc_per_node=1", "--local-addr=$(POD_IP)"]
    assert container["imagePullPolicy"] == "IfNotPresent"  # `kind load docker-image`, never pulled
    assert job["metadata"]["annotations"]["torchfleet.io/machine"] == "cpu"
    if operator == "kubeflow":
        assert job["spec"]["nprocPerNode"] == "1"


def test_cpu_job_defaults_its_size(capsys):
    code, out, err = run(["submit", "tiny", "--cpu", "--image", "r/t:1", "--dry-run", *CMD], capsys)
    assert code == 0, err
    job, _ = _docs(out)
    resources = _pod_spec(job)["containers"][0]["resources"]
    assert resources["requests"] == {"cpu": "1000m", "memory": "2048Mi"}
    assert "the CPU pool (torchfleet:cpuPool" in err  # a cloud target: say where CPU pods land


def test_allow_egress_adds_a_policy_for_the_job_only(capsys):
    code, out, err = run(["submit", "dl", *BASE, "--allow-egress", "52.216.0.0/15", "--dry-run",
                          "--allow-egress", "0.0.0.0/0", "--allow-egress", "52.216.0.0/15", *CMD], capsys)
    assert code == 0, err
    _, own, egress = _docs(out)
    assert own["metadata"]["name"] == "job-dl"
    assert egress["kind"] == "NetworkPolicy" and egress["metadata"]["name"] == "job-dl-egress"
    assert egress["spec"]["podSelector"] == {"matchLabels": {"torchfleet.io/job": "dl"}}
    assert egress["spec"]["policyTypes"] == ["Egress"] and "ingress" not in egress["spec"]
    # in flag order, once each; the cloud metadata endpoint stays closed even to 0.0.0.0/0
    assert egress["spec"]["egress"] == [{"to": [
        {"ipBlock": {"cidr": "52.216.0.0/15"}},
        {"ipBlock": {"cidr": "0.0.0.0/0", "except": ["169.254.169.254/32", "169.254.169.252/32", "168.63.129.16/32",
                                                    "169.254.170.23/32"]}},
    ]}]
    assert "&id" not in out and "*id" not in out  # plain YAML, no anchors


def test_no_egress_policy_unless_asked(capsys):
    code, out, _ = run(["submit", "dl", *BASE, "--dry-run", *CMD], capsys)
    assert code == 0
    assert [d["metadata"]["name"] for d in _docs(out)] == ["dl", "job-dl"]


def test_sweep_members_each_get_their_egress_policy(capsys):
    code, out, err = run(["sweep", "g", *BASE, "--param", "lr=1,2", "--allow-egress", "10.0.0.0/8",
                          "--dry-run", *CMD], capsys)
    assert code == 0, err
    names = [d["metadata"]["name"] for d in _docs(out)]
    assert names == ["g-0", "job-g-0", "job-g-0-egress", "g-1", "job-g-1", "job-g-1-egress"]


# ---------------------------------------------------------------- README


LOCAL_GUIDE = Path(__file__).resolve().parents[2] / "docs" / "deploy-local.md"


def _readme_commands(section: str) -> list[list[str]]:
    import shlex

    text = LOCAL_GUIDE.read_text()
    start = text.index(f"## {section}")
    end = text.find("\n## ", start + 1)
    body = text[start:end].replace("\\\n", " ")
    return [shlex.split(line, comments=True) for line in body.splitlines()
            if line.lstrip().startswith("torchfleet submit")]


def test_readme_local_quickstart_submit_is_a_valid_cpu_job(capsys):
    """docs/deploy-local.md's `torchfleet submit ... --stack local --cpu`, run as a dry run."""
    (argv,) = _readme_commands("Local quickstart (kind)")
    assert argv[:2] == ["torchfleet", "submit"] and "--cpu" in argv and argv[argv.index("--stack") + 1] == "local"
    code, out, err = run([*argv[1:argv.index("--")], "--dry-run", *argv[argv.index("--"):]], capsys)
    assert code == 0, err
    job, _ = _docs(out)
    assert job["kind"] == "Job"  # the local stack's operator is `job`: Kubernetes' own Job schema applies
    kubernetes_validate.validate(job, latest_version(), strict=True)
    assert "nvidia.com/gpu" not in out
