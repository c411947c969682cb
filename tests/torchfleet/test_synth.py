"""`torchfleet synth`: the offline preview reviewers, forks and the tests rely on."""

import json
import re
import subprocess
import sys

import pytest
import yaml

from tests.harness import REPO, STACKS_DIR
from torchfleet import synth
from torchfleet.cli import main
from torchfleet.synth import manifest_filename


def test_prints_resources_and_outputs_as_json(capsys):
    assert main(["synth", "--json", "--stack-file", str(REPO / "stacks/Pulumi.aws-usw2.yaml")]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["stack"] == "aws-usw2"
    groups = [r for r in doc["resources"] if r["type"] == "aws:eks/nodeGroup:NodeGroup"]
    # one manager group per zone since e199f99 (AWS review M7)
    assert {g["inputs"]["nodeGroupNamePrefix"] for g in groups} >= {"manager-us-west-2a-", "gpu-t4-us-west-2a-"}
    first = doc["resources"][0]
    assert set(first) == {"type", "name", "parent", "inputs", "options"}
    assert first["parent"] is None
    # The plans the resource options make (issue 20): destroy keeps the store and the log group,
    # nothing blocks it, and no replacement collides on a fixed name.
    assert doc["destroy"]["blocked"] == [] and doc["replaceCollisions"] == []
    # the store, its backup and access policies (kept with it since issue 29: deleting the backup policy
    # turns the kept store's backups off) and the log group
    assert sorted(k.split("::")[0] for k in doc["destroy"]["kept"]) == [
        "aws:cloudwatch/logGroup:LogGroup", "aws:efs/backupPolicy:BackupPolicy", "aws:efs/fileSystem:FileSystem",
        "aws:efs/fileSystemPolicy:FileSystemPolicy",
    ]
    fs = next(r for r in doc["resources"] if r["type"] == "aws:efs/fileSystem:FileSystem")
    assert fs["options"] == {"retainOnDelete": True}
    node_group = groups[0]
    assert node_group["parent"] == "torchfleet:clouds:EksNodeGroups::torchfleet-aws-nodes"
    # Engine names (camelCase), as the mocks receive them.
    assert "nodeRoleArn" in node_group["inputs"] and "node_role_arn" not in node_group["inputs"]
    assert doc["outputs"]["kubeconfig"] == "[secret]"
    assert doc["outputs"]["clusterName"] == "torchfleet-aws-usw2"


def test_secret_inputs_print_as_placeholder(capsys):
    assert main(["synth", "--json", "--stack-file", str(REPO / "stacks/Pulumi.aws-usw2.yaml")]) == 0
    doc = json.loads(capsys.readouterr().out)
    [provider] = [r for r in doc["resources"] if r["type"] == "pulumi:providers:kubernetes"]
    assert provider["inputs"]["kubeconfig"] == "[secret]"
    assert "get-token" not in json.dumps(provider)


def test_config_error_exits_2_with_problems_on_stderr_and_nothing_on_stdout(tmp_path, capsys):
    bad = tmp_path / "Pulumi.bad.yaml"
    bad.write_text(
        yaml.safe_dump(
            {
                "config": {
                    "aws:region": "us-west-2",
                    "torchfleet:cloud": "aws",
                    "torchfleet:zones": ["us-west-2a"],
                    "torchfleet:gpuPools": [{"gpu": "k80", "maxNode": 2}],
                }
            }
        )
    )
    assert main(["synth", "--stack-file", str(bad)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "torchfleet:gpuPools[0].maxNode: unknown key; did you mean 'maxNodes'?" in captured.err
    assert "k80 on aws was retired" in captured.err


def test_a_size_without_encryption_at_host_exits_2_naming_the_key(tmp_path, capsys, monkeypatch):
    """Azure review 14: refused before anything is created, with the sizes that would work."""
    from components.catalog import host_encryption

    monkeypatch.setattr(host_encryption, "supported", lambda t: t != "Standard_NC8as_T4_v3")
    stack = yaml.safe_load((STACKS_DIR / "Pulumi.azure-eus.yaml").read_text())
    bad = tmp_path / "Pulumi.azure-eus.yaml"
    bad.write_text(yaml.safe_dump(stack))
    assert main(["synth", "--stack-file", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "torchfleet:gpuPools[0].machineTypes: Standard_NC8as_T4_v3 cannot encrypt at host" in err
    assert "or set torchfleet:gpuPools[0].encryptionAtHost: false" in err


def test_missing_stack_file_exits_2(tmp_path, capsys):
    assert main(["synth", "--stack-file", str(tmp_path / "nope.yaml")]) == 2
    assert "--stack-file" in capsys.readouterr().err


def test_out_writes_every_kubernetes_object_one_file_each(tmp_path, capsys):
    out = tmp_path / "manifests"
    assert main(["synth", "--json", "--stack-file", str(REPO / "stacks/Pulumi.local.yaml"), "--out", str(out)]) == 0
    doc = json.loads(capsys.readouterr().out)
    k8s_resources = [r for r in doc["resources"] if r["type"].startswith("kubernetes:") and "apiVersion" in r["inputs"]]
    files = sorted(out.glob("*.yaml"))
    assert len(files) == len(k8s_resources) > 0
    for f in files:
        obj = yaml.safe_load(f.read_text())
        assert obj["apiVersion"] and obj["kind"] and obj["metadata"]["name"]
        assert f.name == manifest_filename(obj)


def test_runs_as_a_command_without_pulumi_cli(tmp_path):
    """The entry point works from a plain shell: no Pulumi CLI, credentials or network."""
    proc = subprocess.run(
        [sys.executable, "-m", "torchfleet", "synth", "--json", "--stack-file", "stacks/Pulumi.local.yaml"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["stack"] == "local"


@pytest.mark.parametrize("name", ["deployment-elastic-job-etcd.yaml"])
def test_manifest_filename_is_kind_namespace_name(name):
    assert manifest_filename({"kind": "Deployment", "metadata": {"namespace": "elastic-job", "name": "etcd"}}) == name


def test_out_into_a_reused_folder_replaces_the_previous_synth_and_nothing_else(tmp_path, capsys):
    """Regression (issue 13): a second --out into the same folder kept the first stack's files, so
    the folder mixed two stacks. The files a synth wrote are listed in the folder's index and
    replaced by the next synth; files it did not write stay."""
    out = tmp_path / "manifests"
    out.mkdir()
    (out / "mine.yaml").write_text("kind: Mine\n")
    (tmp_path / "outside.yaml").write_text("kind: Outside\n")
    assert main(["synth", "--stack-file", str(REPO / "stacks/Pulumi.aws-usw2.yaml"), "--out", str(out)]) == 0
    aws = {p.name for p in out.glob("*.yaml")} - {"mine.yaml"}
    capsys.readouterr()
    # An edited index cannot make synth remove anything outside the folder or a file it did not write.
    index = out / synth.INDEX
    index.write_text(index.read_text() + "../outside.yaml\nmine.yaml.bak\n")
    assert main(["synth", "--json", "--stack-file", str(REPO / "stacks/Pulumi.local.yaml"), "--out", str(out)]) == 0
    local = {p.name for p in out.glob("*.yaml")} - {"mine.yaml"}
    assert local and aws - local  # aws-only objects existed, and are gone now
    doc = json.loads(capsys.readouterr().out)
    assert len(local) == len([r for r in doc["resources"] if r["type"].startswith("kubernetes:")
                              and "apiVersion" in r["inputs"]])
    assert (out / "mine.yaml").read_text() == "kind: Mine\n"
    assert (tmp_path / "outside.yaml").is_file()
    assert sorted(index.read_text().splitlines()[1:]) == sorted(local)


def test_out_names_what_it_does_not_write(tmp_path, capsys):
    assert main(["synth", "--stack-file", str(REPO / "stacks/Pulumi.aws-usw2.yaml"), "--out", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert f"--out: wrote {len(list(tmp_path.glob('*.yaml')))} Kubernetes objects to {tmp_path}" in err
    skipped = sorted(line.split()[4] for line in err.splitlines() if line.startswith("--out: not written:"))
    assert skipped == ["torchfleet-aws-autoscaling-cluster-autoscaler",
                       "torchfleet-aws-autoscaling-nvidia-device-plugin"]


def test_synth_prints_the_propagation_wait_without_its_pickled_provider(capsys):
    """The GKE cluster waits for its KMS grant to take effect (issue 20); the wait is a Pulumi dynamic
    resource, whose provider the engine carries as a pickled blob that synth names instead of printing."""
    assert main(["synth", "--json", "--stack-file", str(REPO / "stacks/Pulumi.gcp-usc1.yaml")]) == 0
    doc = json.loads(capsys.readouterr().out)
    [wait] = [r for r in doc["resources"] if r["type"] == "pulumi-python:dynamic:Resource"]
    assert wait["inputs"]["__provider"] == "[python dynamic provider]"
    cluster = next(r for r in doc["resources"] if r["type"] == "gcp:container/cluster:Cluster")
    assert f"{wait['type']}::{wait['name']}" in cluster["options"]["dependsOn"]


def test_prints_a_summary_by_default_and_the_json_behind_a_flag(capsys):
    """Regression (issue 22): synth printed 90 KB of JSON with no summary. The default is a screen:
    resources by provider module, the stack's pools, what `pulumi destroy` keeps, and how to get the JSON."""
    assert main(["synth", "--stack", "aws-usw2"]) == 0
    out = capsys.readouterr().out
    assert not out.lstrip().startswith("{") and len(out.splitlines()) < 40, out
    assert out.startswith("stack aws-usw2: aws in us-west-2, ")
    # 3 GPU pools + a manager group and a CPU pool group per zone
    assert re.search(r"^ +\d+  aws:eks: .*NodeGroup 7", out, re.M), out
    assert "  gpu-t4-us-west-2a  g4dn.xlarge (1 GPU/node), 0-8 nodes, spot" in out
    assert "  manager  m6i.large, " in out
    kept = next(line for line in out.splitlines() if line.startswith("  keeps (retainOnDelete"))
    assert "aws:efs/fileSystem:FileSystem::" in kept and "aws:cloudwatch/logGroup:LogGroup::" in kept
    assert out.rstrip().endswith("torchfleet synth --stack aws-usw2 --json")
    # The summary's counts are the JSON's.
    assert main(["synth", "--stack", "aws-usw2", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    deleted = doc["destroy"]["deleted"]
    assert f"  deletes {deleted} resources" in out


def test_summary_of_the_local_stack_says_it_makes_no_pools(capsys):
    assert main(["synth", "--stack", "local"]) == 0
    out = capsys.readouterr().out
    assert "pools:\n  none made: the stack uses the nodes of the cluster it is deployed to" in out
    assert "keeps none of them" in out
