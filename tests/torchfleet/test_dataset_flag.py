"""`torchfleet submit --dataset NAME[:PATH]`: the stack's dataset claim mounted read-only in every pod of
every operator's job, GKE's sidecar annotation, and each bad input refused with exit 2 naming the flag."""

from __future__ import annotations

from unittest import mock

import kubernetes_validate
import pytest
import yaml

from torchfleet.cli import main

IMAGE = ["--image", "registry.example.com/team/train:1.4.2"]
CMD = ["--", "python", "train.py"]
STACKS = {
    "aws-data": """
config:
  aws:region: us-east-1
  torchfleet:cloud: aws
  torchfleet:zones: [us-east-1a, us-east-1b]
  torchfleet:network: {publicAccessCidrs: [203.0.113.0/24]}
  torchfleet:gpuPools: [{gpu: t4, maxNodes: 4}]
  torchfleet:training: {operator: %s}
  torchfleet:datasets:
    - {name: imagenet, bucket: corp-imagenet, prefix: train/}
    - {name: c4, bucket: corp-c4}
""",
    "gke-data": """
config:
  gcp:region: us-central1
  gcp:project: my-ml-project
  torchfleet:cloud: gcp
  torchfleet:zones: [us-central1-a]
  torchfleet:gpuPools: [{gpu: t4, maxNodes: 4}]
  torchfleet:datasets: [{name: imagenet, bucket: corp-imagenet}]
""",
    "no-data": """
config:
  aws:region: us-east-1
  torchfleet:cloud: aws
  torchfleet:zones: [us-east-1a, us-east-1b]
  torchfleet:network: {publicAccessCidrs: [203.0.113.0/24]}
  torchfleet:gpuPools: [{gpu: t4, maxNodes: 4}]
""",
}


@pytest.fixture(autouse=True)
def no_cluster_no_pulumi():
    with mock.patch("torchfleet.jobs.kubeconfig.connect", side_effect=AssertionError("connected")), \
         mock.patch("torchfleet.jobs.target.read_stack_outputs", side_effect=AssertionError("pulumi")):
        yield


def stacks(tmp_path, operator: str = "job") -> str:
    for name, text in STACKS.items():
        (tmp_path / f"Pulumi.{name}.yaml").write_text(text % operator if "%s" in text else text)
    return str(tmp_path)


def submit(capsys, tmp_path, *flags, stack="aws-data", operator="job"):
    code = main(["submit", "j", "--stack", stack, "--stacks-dir", stacks(tmp_path, operator), "--gpu", "t4",
                 *IMAGE, "--dry-run", *flags, *CMD])
    out, err = capsys.readouterr()
    return code, [d for d in yaml.safe_load_all(out) if d], err


def pod_templates(job):
    if job["kind"] == "Job":
        return [job["spec"]["template"]]
    replicas = job["spec"].get("replicaSpecs") or job["spec"]["pytorchReplicaSpecs"]
    return [r["template"] for r in replicas.values()]


@pytest.mark.parametrize("operator", ["job", "torchelastic", "kubeflow"])
def test_the_claim_is_mounted_read_only_in_every_pod(capsys, tmp_path, operator):
    code, docs, err = submit(capsys, tmp_path, "--dataset", "imagenet", operator=operator)
    assert code == 0, err
    job = docs[0]
    for template in pod_templates(job):
        spec = template["spec"]
        assert {"name": "dataset-imagenet",
                "persistentVolumeClaim": {"claimName": "dataset-imagenet", "readOnly": True}} in spec["volumes"]
        for container in spec["containers"]:
            assert {"name": "dataset-imagenet", "mountPath": "/data/imagenet", "readOnly": True} \
                in container["volumeMounts"]
        assert "gke-gcsfuse/volumes" not in (template.get("metadata") or {}).get("annotations", {})
    if job["kind"] == "Job":  # the API server's own schema (the CRDs' are checked by the CLI itself)
        kubernetes_validate.validate(job, "1.30", strict=True)


def test_a_path_after_the_name(capsys, tmp_path):
    code, docs, err = submit(capsys, tmp_path, "--dataset", "c4:/datasets//c4/")
    assert code == 0, err
    mounts = docs[0]["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
    assert {"name": "dataset-c4", "mountPath": "/datasets/c4", "readOnly": True} in mounts


def test_gke_pods_ask_for_the_fuse_sidecar_and_set_its_resources(capsys, tmp_path):
    code, docs, err = submit(capsys, tmp_path, "--dataset", "imagenet", stack="gke-data")
    assert code == 0, err
    annotations = docs[0]["spec"]["template"]["metadata"]["annotations"]
    # the names gcs-fuse-csi-driver's webhook reads (pkg/webhook/mutatingwebhook.go); without them its
    # defaults (250m CPU limit, 256Mi, 5Gi) apply and are counted by nothing
    assert {k: v for k, v in annotations.items() if k.startswith("gke-gcsfuse/")} == {
        "gke-gcsfuse/volumes": "true",
        "gke-gcsfuse/cpu-request": "500m",
        "gke-gcsfuse/cpu-limit": "0",
        "gke-gcsfuse/memory-request": "1024Mi",
        "gke-gcsfuse/memory-limit": "0",
        "gke-gcsfuse/ephemeral-storage-request": "1Gi",
    }


def test_gke_pods_leave_room_for_the_sidecar(capsys, tmp_path):
    """Review of issue 21: the pod asked for its whole share of the node and the injected sidecar came on top,
    so the pod stayed Pending; with --dataset its requests are less by what the sidecar's annotations request."""
    _, plain, _ = submit(capsys, tmp_path, stack="gke-data")
    code, mounted, err = submit(capsys, tmp_path, "--dataset", "imagenet", stack="gke-data")
    assert code == 0, err

    def requests(docs):
        container = docs[0]["spec"]["template"]["spec"]["containers"][0]
        return container["resources"]["requests"]

    cpu = lambda r: int(r["cpu"].removesuffix("m"))  # noqa: E731
    mem = lambda r: int(r["memory"].removesuffix("Mi"))  # noqa: E731
    assert cpu(requests(mounted)) + 500 <= cpu(requests(plain))
    assert mem(requests(mounted)) + 1024 <= mem(requests(plain))


@pytest.mark.parametrize(("stack", "flags", "labelled"), [
    ("gke-data", ["--dataset", "imagenet"], True),
    ("aws-data", ["--dataset", "imagenet"], True),
    ("gke-data", [], False),
    ("aws-data", [], False),
])
def test_only_pods_that_mount_a_dataset_carry_the_label_the_egress_policy_selects(
        capsys, tmp_path, stack, flags, labelled):
    """Review of issue 21: training-to-datasets selected every training pod; now it requires this label
    (tests/components/clouds/test_gcp_datasets.py), which only --dataset sets."""
    code, docs, err = submit(capsys, tmp_path, *flags, stack=stack)
    assert code == 0, err
    labels = docs[0]["spec"]["template"]["metadata"]["labels"]
    assert labels.get("torchfleet.io/datasets") == ("true" if labelled else None)
    assert labels["torchfleet.io/role"] == "training"  # the policy's other selector still matches


@pytest.mark.parametrize(
    ("flags", "stack", "words"),
    [
        (["--dataset", "imagenett"], "aws-data", "--dataset: stack aws-data has no dataset 'imagenett'; did you mean "
                                                 "'imagenet'? its datasets: imagenet, c4"),
        (["--dataset", "imagenet"], "no-data", "its datasets: none (add torchfleet:datasets"),
        (["--dataset", "imagenet:"], "aws-data", "names no path after ':'"),
        (["--dataset", ":/data"], "aws-data", "expected NAME or NAME:PATH"),
        (["--dataset", "imagenet:data"], "aws-data", "--dataset imagenet: expected an absolute path"),
        (["--dataset", "imagenet:/etc/data"], "aws-data", "sits inside /etc"),
        (["--dataset", "imagenet:/mnt/shared/in"], "aws-data", "overlaps the shared store at /mnt/shared"),
        (["--dataset", "imagenet:/mnt", "--mount", "/mnt/shared"], "aws-data", "overlaps the shared store"),
    ],
)
def test_bad_input_is_refused_with_exit_2(capsys, tmp_path, flags, stack, words):
    code, docs, err = submit(capsys, tmp_path, *flags, stack=stack)
    assert code == 2
    assert words in err
    assert docs == []


def test_without_a_stack_there_is_nothing_to_check_against(capsys):
    code = main(["submit", "j", "--gpu", "t4", *IMAGE, "--dry-run", "--dataset", "imagenet", *CMD])
    _, err = capsys.readouterr()
    assert code == 2 and "--dataset: datasets are declared per stack" in err


def test_a_job_file_names_the_dataset_and_the_flag_wins(capsys, tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("name: j\ngpu: t4\nimage: registry.example.com/team/train:1.4.2\ndataset: imagenet\n"
                   "command: [python, train.py]\n")
    base = ["submit", "-f", str(job), "--stack", "aws-data", "--stacks-dir", stacks(tmp_path), "--dry-run"]
    assert main(base) == 0
    docs = [d for d in yaml.safe_load_all(capsys.readouterr().out) if d]
    claim = docs[0]["spec"]["template"]["spec"]["volumes"][-1]["persistentVolumeClaim"]["claimName"]
    assert claim == "dataset-imagenet"
    assert main([*base, "--dataset", "c4"]) == 0
    docs = [d for d in yaml.safe_load_all(capsys.readouterr().out) if d]
    assert docs[0]["spec"]["template"]["spec"]["volumes"][-1]["persistentVolumeClaim"]["claimName"] == "dataset-c4"
    assert main([*base, "-o", "job"]) == 0
    assert "dataset: imagenet" in capsys.readouterr().out


def test_a_dataset_job_and_its_volume_pass_checkov(capsys, tmp_path):
    """The same checkov run as every job's pods (test_jobs_checkov.py, same skips), on a --dataset job
    and the read-only PV/PVC the training layer makes for it (components/kube/datasets.py)."""
    from components.clouds.aws.datasets import csi_source, mount_options
    from components.kube import datasets as kube_datasets
    from components.spec import DatasetSpec
    from tests.torchfleet.checkov import checkov_results
    from tests.torchfleet.test_jobs_checkov import SKIPS

    code, docs, err = submit(capsys, tmp_path, "--dataset", "imagenet")
    assert code == 0, err
    d = DatasetSpec("imagenet", "corp-imagenet", "train/")
    volume = kube_datasets.persistent_volume("elastic-job", d.name, csi_source(d, "elastic-job", "us-east-1"),
                                             mount_options(d, "us-east-1"))
    out = tmp_path / "scan"
    out.mkdir()
    (out / "job.yaml").write_text(yaml.safe_dump_all(
        [*docs, volume, kube_datasets.persistent_volume_claim("elastic-job", d.name)], sort_keys=False))
    results = checkov_results(out, SKIPS)
    failed = [f"{c['check_id']} {c['check_name']} ({c['resource']})"
              for r in results for c in r.get("failed_checks", [])]
    assert failed == []
    assert any(c["resource"] == "Job.elastic-job.j" for r in results for c in r.get("passed_checks", []))
