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
  torchfleet:zones: [us-east-1a]
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
  torchfleet:zones: [us-east-1a]
  torchfleet:gpuPools: [{gpu: t4, maxNodes: 4}]
""",
}


@pytest.fixture(autouse=True)
def no_cluster_no_pulumi():
    with mock.patch("torchfleet.jobs.cluster.connect", side_effect=AssertionError("connected")), \
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


def test_gke_pods_ask_for_the_fuse_sidecar(capsys, tmp_path):
    code, docs, err = submit(capsys, tmp_path, "--dataset", "imagenet", stack="gke-data")
    assert code == 0, err
    assert docs[0]["spec"]["template"]["metadata"]["annotations"]["gke-gcsfuse/volumes"] == "true"


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
