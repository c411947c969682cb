"""The training layer on the test control plane, and the kubectl the tests drive it with.

The layer is what `torchfleet synth` renders for the local stack (the objects the Pulumi program
registers, through the same mocks as CI's preview), applied with the pinned kubectl in the order a
cluster needs: namespaces and CRDs first, then the rest once the CRDs are established. The real
Pulumi engine's `pulumi up --stack local` is tested on its own (test_pulumi_local.py).
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from components.kube import static
from components.spec import DEFAULT_NAMESPACE
from tests.controlplane import nodes
from tests.controlplane.cluster import ControlPlane, binary
from tests.k8s.rendered import render

GPU_STACK = "aws-usw2"  # the fake GPU nodes are shaped like this stack's pools
FIRST = ("Namespace", "CustomResourceDefinition")


def kubectl(cp: ControlPlane, *args: str, input: str | None = None, check: bool = True) -> str:
    done = subprocess.run(
        [binary("kubectl"), f"--kubeconfig={cp.kubeconfig}", *args],
        input=input,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if check and done.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} exited {done.returncode}:\n{done.stderr}")
    return done.stdout if check else done.stdout + done.stderr


def get(cp: ControlPlane, *args: str) -> dict[str, Any]:
    return yaml.safe_load(kubectl(cp, "get", "-o", "yaml", *args))


def wait_for(what: str, predicate, timeout_s: float = 120, every_s: float = 0.5):
    """Poll PREDICATE until it returns something truthy; fail naming WHAT after TIMEOUT_S.

    The deadline bounds a wait on a loaded machine; it is never the assertion itself."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(every_s)
    raise AssertionError(f"{what}: not after {timeout_s} s (last seen: {last!r})")


def volumes_for(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A PersistentVolume for each claim the StatefulSets will make, as a kind cluster's local-path
    provisioner would make them: the tier runs no volume provisioner (no kubelet mounts anything)."""
    out = []
    for obj in objects:
        if obj["kind"] != "StatefulSet":
            continue
        for template in obj["spec"].get("volumeClaimTemplates", []):
            for index in range(obj["spec"].get("replicas", 1)):
                claim = f"{template['metadata']['name']}-{obj['metadata']['name']}-{index}"
                out.append({
                    "apiVersion": "v1",
                    "kind": "PersistentVolume",
                    "metadata": {"name": f"{obj['metadata']['namespace']}-{claim}"},
                    "spec": {
                        "capacity": {"storage": template["spec"]["resources"]["requests"]["storage"]},
                        "accessModes": template["spec"]["accessModes"],
                        "hostPath": {"path": f"/var/lib/tier/{claim}"},
                        "claimRef": {"namespace": obj["metadata"]["namespace"], "name": claim},
                        "storageClassName": template["spec"].get("storageClassName", ""),
                    },
                })  # fmt: skip
    return out


# What a stack that installs each job kind grants its etcd gate (static.TORCHELASTIC_ONLY, k8s/kubeflow/), by
# the CRD that serves the kind.
GATE_GRANTS = {
    "elasticjobs.elastic.pytorch.org": ("etcd-gate/role-elasticjobs.yaml", "etcd-gate/rolebinding-elasticjobs.yaml"),
    "pytorchjobs.kubeflow.org": (
        "../kubeflow/role-etcd-gate-pytorchjobs.yaml",
        "../kubeflow/rolebinding-etcd-gate-pytorchjobs.yaml",
    ),
}
GATE_ACCOUNT = "etcd-gate"  # k8s/base/etcd-gate/serviceaccount.yaml


def grant_etcd_gate(cp: ControlPlane) -> None:
    """Grant every etcd gate on CP get on each job kind CP serves, as the stack that installs the kind does.

    With a kind served and not readable the gate cannot tell whose a job's name is and refuses every pod
    (training-image/elastic_trainer/etcd_gate/resolvers.py Pods._get_object). The session's control plane
    keeps a CRD once any test file installed it, so each file that installs one, and the training layer
    applied after one, call this (the clean-clone run of 2026-11-29: the gate resolved nothing in the files
    that ran after test_operators on the same worker)."""
    served = set(kubectl(cp, "get", "crd", "-o", "jsonpath={.items[*].metadata.name}").split())
    namespaces = kubectl(cp, "get", "serviceaccounts", "-A", f"--field-selector=metadata.name={GATE_ACCOUNT}",
                         "-o", "jsonpath={.items[*].metadata.namespace}").split()  # fmt: skip
    grants = []
    for crd, files in GATE_GRANTS.items():
        for namespace in namespaces if crd in served else ():
            for relative in files:
                obj = static.load(relative)
                obj["metadata"]["namespace"] = namespace
                for subject in obj.get("subjects", []):  # the Role's binding names the gate's own namespace
                    subject["namespace"] = namespace
                grants.append(obj)
    if grants:
        kubectl(cp, "apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(grants))


@dataclass
class TrainingLayer:
    cp: ControlPlane
    namespace: str
    gpu_nodes: list[dict[str, Any]]

    @classmethod
    def apply(cls, cp: ControlPlane, workdir: Path) -> TrainingLayer:
        objects = [
            obj for path in render("local", workdir / "rendered") for obj in yaml.safe_load_all(path.read_text()) if obj
        ]
        first = [o for o in objects if o["kind"] in FIRST]
        rest = [o for o in objects if o["kind"] not in FIRST]
        kubectl(cp, "apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(first))
        crds = [f"crd/{o['metadata']['name']}" for o in first if o["kind"] == "CustomResourceDefinition"]
        if crds:  # the `job` operator installs none
            kubectl(cp, "wait", "--for=condition=Established", "--timeout=120s", *crds)
        kubectl(cp, "apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(volumes_for(rest) + rest))

        spec = nodes.stack_spec(GPU_STACK)
        gpu = nodes.gpu_nodes(spec)
        zones = sorted({pool.zone for pool in spec.gpu_pools})
        fleet = gpu + nodes.manager_nodes(zones) + nodes.cpu_nodes(zones)
        kubectl(cp, "apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(fleet))
        kubectl(cp, "wait", "--for=condition=Ready", "--timeout=120s", "node", "--all")
        grant_etcd_gate(cp)  # kinds another test file installed before this layer
        return cls(cp, DEFAULT_NAMESPACE, gpu)
