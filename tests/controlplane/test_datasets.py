"""Datasets against the real control plane: each cloud's dataset PV/PVC, as the program renders them,
admitted and bound by the real API server and PV controller; a `--dataset` job admitted under
`restricted` Pod Security, scheduled onto the fake GPU nodes and started with the claim mounted read-only.

No CSI driver runs here (kwok starts containers without mounting anything): what the drivers do
with the volumes is each cloud's, checked against its documentation in the synth tests
(tests/components/clouds/*datasets*).
"""

from __future__ import annotations

import yaml

from components.kube.datasets import LABEL_DATASET
from components.spec import LABEL_JOB
from tests.controlplane.layer import get, kubectl, wait_for
from tests.harness import synth_config
from torchfleet.cli import main

IMAGE = "registry.example.com/team/train:1.0"
# One dataset per cloud, each under its own name so the three PV/PVC pairs live side by side.
CLOUDS = {
    # Two zones and a reachable API are required on AWS (issue 29).
    "aws": ({"aws:region": "us-west-2", "torchfleet:zones": ["us-west-2a", "us-west-2b"],
             "torchfleet:network": {"publicAccessCidrs": ["203.0.113.0/24"]}},
            {"name": "s3-images", "bucket": "corp-imagenet", "prefix": "train/"}),
    "gcp": ({"gcp:region": "us-central1", "gcp:project": "my-ml-project", "torchfleet:zones": ["us-central1-a"]},
            {"name": "gcs-images", "bucket": "corp-imagenet"}),
    "azure": ({"azure-native:location": "eastus", "torchfleet:zones": ["1"],
               # Required on Azure (issue 29).
               "torchfleet:network": {"publicAccessCidrs": ["203.0.113.0/24"]},
               "torchfleet:admins": ["User:00000000-0000-0000-0000-0000000000b0"]},
              {"name": "blob-images", "bucket": "corpdata/imagenet", "resourceGroup": "data-rg"}),
}
# The stack a researcher submits with: the layer's GPU nodes are shaped like aws-usw2's pools.
STACK = """
config:
  aws:region: us-west-2
  torchfleet:cloud: aws
  torchfleet:zones: [us-west-2a, us-west-2b]
  torchfleet:network: {publicAccessCidrs: [203.0.113.0/24]}
  torchfleet:gpuPools: [{gpu: t4, maxNodes: 8, machineTypes: [g4dn.xlarge]}]
  torchfleet:datasets: [{name: s3-images, bucket: corp-imagenet, prefix: train/}]
"""


def dataset_objects(cloud: str) -> list[dict]:
    provider, dataset = CLOUDS[cloud]
    result = synth_config(f"{cloud}-data", {"torchfleet:cloud": cloud, **provider,
                                            "torchfleet:gpuPools": [{"gpu": "t4", "maxNodes": 2}],
                                            "torchfleet:datasets": [dataset]})
    return [o for o in result.kubernetes_objects()
            if LABEL_DATASET in o["metadata"].get("labels", {}) or o["metadata"]["name"] == "training-to-datasets"]


def test_each_clouds_dataset_volume_is_admitted_and_binds_read_only(training_layer):
    cp, ns = training_layer.cp, training_layer.namespace
    for cloud, (_, dataset) in CLOUDS.items():
        objects = dataset_objects(cloud)
        assert {o["kind"] for o in objects} >= {"PersistentVolume", "PersistentVolumeClaim"}, cloud
        kubectl(cp, "apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(objects))
        claim = f"dataset-{dataset['name']}"
        bound = wait_for(f"{claim} bound", lambda claim=claim: (
            (c := get(cp, "pvc", claim, "-n", ns))["status"].get("phase") == "Bound" and c))
        assert bound["spec"]["volumeName"] == f"{ns}-dataset-{dataset['name']}"
        assert bound["status"]["accessModes"] == ["ReadOnlyMany"]
        pv = get(cp, "pv", f"{ns}-dataset-{dataset['name']}")
        assert pv["spec"]["csi"]["readOnly"] is True  # as stored by the API server
        if cloud == "gcp":  # the in-pod sidecar's egress, as the API server stores it
            policy = get(cp, "networkpolicy", "training-to-datasets", "-n", ns)
            assert policy["spec"]["egress"][0]["ports"] == [{"port": 443, "protocol": "TCP"}]


def test_a_dataset_job_is_admitted_and_runs_with_the_claim_read_only(training_layer, capsys, tmp_path):
    cp, ns = training_layer.cp, training_layer.namespace
    kubectl(cp, "apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(dataset_objects("aws")))
    (tmp_path / "Pulumi.tier-data.yaml").write_text(STACK)
    capsys.readouterr()
    code = main(["submit", "tier-dataset", "--stack", "tier-data", "--stacks-dir", str(tmp_path),
                 "--kubeconfig", str(cp.kubeconfig), "--gpu", "t4", "--nodes", "2", "--image", IMAGE,
                 "--dataset", "s3-images", "--", "python", "train.py"])
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
    try:
        pods = wait_for("2 running pods of tier-dataset", lambda: (
            (p := [x for x in get(cp, "pods", "-n", ns, "-l", f"{LABEL_JOB}=tier-dataset")["items"]
                   if x["status"].get("phase") == "Running"]) and len(p) >= 2 and p))
        for pod in pods:
            assert {"name": "dataset-s3-images",
                    "persistentVolumeClaim": {"claimName": "dataset-s3-images", "readOnly": True}} \
                in pod["spec"]["volumes"]
            mounts = pod["spec"]["containers"][0]["volumeMounts"]
            assert {"name": "dataset-s3-images", "mountPath": "/data/s3-images", "readOnly": True} in mounts
    finally:
        main(["delete", "tier-dataset", "--kubeconfig", str(cp.kubeconfig), "--namespace", ns])
