"""Fixtures of the real control-plane tier: one control plane per test session, shared by its tests.

Never skipped: a missing binary fails with the command that builds it (`.ci/setup` runs it), so CI
cannot pass by not running this tier.
"""

from __future__ import annotations

import base64

import pytest
import yaml

from tests.controlplane import operators
from tests.controlplane.cluster import ControlPlane, openssl
from tests.controlplane.layer import TrainingLayer


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory):
    with ControlPlane.start(tmp_path_factory.mktemp("controlplane")) as cp:
        yield cp


@pytest.fixture(scope="session")
def training_layer(control_plane, tmp_path_factory) -> TrainingLayer:
    """The local stack's training layer, as `torchfleet synth` renders it, applied with kubectl;
    GPU nodes shaped like the aws-usw2 stack's pools, one tainted manager node and one CPU pool node per zone."""
    return TrainingLayer.apply(control_plane, tmp_path_factory.mktemp("layer"))


@pytest.fixture(scope="module")
def training_operator(control_plane, training_layer, tmp_path_factory):
    """Kubeflow's training-operator (operators.training_operator) for one test file; it grants the etcd gate
    get on pytorchjobs, as a kubeflow stack does (k8s/kubeflow/, layer.grant_etcd_gate)."""
    with operators.training_operator(control_plane, tmp_path_factory.mktemp("kubeflow")) as operator:
        yield operator


# The Kubernetes group k8s/base/jobs/rolebinding-researchers.yaml binds to the torchfleet-researcher Role.
GROUP = "torchfleet:researchers"


@pytest.fixture(scope="session")
def researcher(training_layer, tmp_path_factory):
    """A kubeconfig for user alice in group torchfleet:researchers, and nothing else: a client certificate
    the control plane's CA signed, the group as its Organization (test_researcher*.py)."""
    return researcher_kubeconfig(training_layer.cp, tmp_path_factory.mktemp("researcher"))


def researcher_kubeconfig(cp, folder):
    """Alice's kubeconfig (CN alice, O torchfleet:researchers, signed by CP's CA), written in FOLDER."""
    pki = cp.workdir / "pki"
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "alice.key", "-out", "alice.csr",
            "-subj", f"/CN=alice/O={GROUP}", cwd=folder)  # fmt: skip
    openssl("x509", "-req", "-in", "alice.csr", "-CA", str(pki / "ca.crt"), "-CAkey", str(pki / "ca.key"),
            "-CAcreateserial", "-out", "alice.crt", "-days", "1", cwd=folder)  # fmt: skip
    data = {name: base64.b64encode((folder / name).read_bytes()).decode() for name in ("alice.crt", "alice.key")}
    config = yaml.safe_load(cp.kubeconfig.read_text())
    config["users"] = [
        {"name": "alice", "user": {"client-certificate-data": data["alice.crt"], "client-key-data": data["alice.key"]}}
    ]
    config["contexts"][0]["context"]["user"] = "alice"
    path = folder / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


@pytest.fixture(scope="module")
def real_node(control_plane, tmp_path_factory):
    """The real node (node.py): kubelet, containerd, CNI bridge, kube-proxy and CoreDNS in a network
    namespace, labelled and tainted as a GPU pool's node. Fails (never skips) with the reason when
    it cannot start. One per test module (it starts in about 5-10 s): the kwok-only tests that share
    the session's control plane never see a node whose pods really run."""
    from tests.controlplane.cluster import ControlPlaneError
    from tests.controlplane.node import NodeError, RealNode

    try:
        with RealNode.start(control_plane, tmp_path_factory.mktemp("node")) as node:
            print(f"[node] {node.name} Ready in {node.started_s:.1f} s")
            yield node
    except (NodeError, ControlPlaneError) as err:
        pytest.fail(f"the real node cannot start: {err}")
