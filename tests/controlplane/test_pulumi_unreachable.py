"""What the real engine and Kubernetes provider do when the cluster's API cannot be reached (issue 29).

A hosted CI runner previewing a stack whose API admits only listed addresses, a laptop outside
network.publicAccessCidrs running `destroy`, a cluster deleted out of band: the provider is handed a
kubeconfig whose server is a closed port on 127.0.0.1 (connection refused). The stack is the local one,
deployed first through the same engine (tests/controlplane/pulumi_engine.py) against a real API server,
so the state holds real objects. pulumi-kubernetes v4.25.0 provider/pkg/provider/provider.go:

- Configure marks the cluster unreachable instead of failing (the discovery call fails); Check skips the
  server-side validation, Diff compares the state with the inputs client-side, and Create/Update answer
  a preview without the cluster: `pulumi preview` degrades to a client-side diff and succeeds;
- Delete (and Read) of an unreachable cluster fail, unless deleteUnreachable (or
  PULUMI_K8S_DELETE_UNREACHABLE when the provider's inputs do not set it) is true: then each object is
  dropped from the state and left where it is (still on the API server here: a real cluster keeps it,
  with its volumes and load balancers, until the cluster itself is deleted);
- a refresh with deleteUnreachable drops every object of a cluster that still exists from the state: why
  no stack keeps it on its providers (components/clouds/unreachable.py).

Written on 2026-11-28 from that source while pulumi-resource-kubernetes was still being built on this
machine (build.py); first run pending: `.venv/bin/python -m pytest tests/controlplane/test_pulumi_unreachable.py`.
"""

from __future__ import annotations

import dataclasses
import socket
import time

import pytest
import yaml

from tests.controlplane.pulumi_engine import Engine, EngineError
from tests.controlplane.test_pulumi_local import (  # noqa: F401 (fixtures)
    cluster,
    dynamic,
    engine,
    live,
    provision_etcd_volumes,
    stack_resources,
)


@dataclasses.dataclass(frozen=True)
class EnvEngine(Engine):
    """The engine with variables of the test's own in the CLI's (and so the provider's) environment."""

    extra: tuple[tuple[str, str], ...] = ()

    def env(self) -> dict[str, str]:
        return {**super().env(), **dict(self.extra)}


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def deployed(cluster, engine):  # noqa: F811 (the fixtures imported above)
    provision_etcd_volumes(cluster)
    engine.pulumi("up", "--yes", "--skip-preview")
    resources = stack_resources(engine)
    assert len(resources) >= 10
    return resources


@pytest.fixture(scope="module")
def unreachable(engine, tmp_path_factory):  # noqa: F811
    """The same stack and state, with a kubeconfig whose server is a closed port on 127.0.0.1."""
    config = yaml.safe_load(engine.kubeconfig.read_text())
    for entry in config["clusters"]:
        entry["cluster"]["server"] = f"https://127.0.0.1:{closed_port()}"
    path = tmp_path_factory.mktemp("unreachable") / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return dataclasses.replace(engine, kubeconfig=path)


@pytest.fixture(scope="module")
def filtered(engine, tmp_path_factory):  # noqa: F811
    """A kubeconfig whose server drops the connection attempt, as an API endpoint restricted to other
    addresses does (EKS's publicAccessCidrs, AKS's authorized ranges): a listening socket on 127.0.0.1
    whose accept queue is full, so the kernel drops further SYNs and the client waits for its timeout."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    fillers = []
    for _ in range(4):  # more than the queue holds (backlog 0 holds one): the rest stay in SYN_SENT
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(server.getsockname())
        fillers.append(filler)
    config = yaml.safe_load(engine.kubeconfig.read_text())
    for entry in config["clusters"]:
        entry["cluster"]["server"] = f"https://127.0.0.1:{server.getsockname()[1]}"
    path = tmp_path_factory.mktemp("filtered") / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    yield dataclasses.replace(engine, kubeconfig=path)
    for s in [*fillers, server]:
        s.close()


def with_env(base: Engine, **env: str) -> EnvEngine:
    return EnvEngine(base.workdir, base.kubeconfig, base.stack, tuple(env.items()))


@pytest.mark.timeout(1800)
def test_preview_degrades_to_a_client_side_diff(deployed, unreachable):
    """A CI preview from a runner that cannot reach the API: no error, the same (empty) diff."""
    started = time.monotonic()
    preview = unreachable.pulumi("preview", "--expect-no-changes", "--diff")
    print(f"[pulumi-unreachable] preview, connection refused: {time.monotonic() - started:.0f} s\n"
          f"{preview.stdout[-2000:]}")


@pytest.mark.timeout(1800)
def test_preview_through_a_filtered_endpoint_degrades_too(deployed, filtered):
    """A hosted runner outside the allowed ranges: its connection attempts are dropped, not refused. The
    preview still succeeds once the provider gives up on the cluster (how long that takes is printed)."""
    started = time.monotonic()
    filtered.pulumi("preview", "--expect-no-changes", "--diff")
    print(f"[pulumi-unreachable] preview through a filtered endpoint: {time.monotonic() - started:.0f} s")


@pytest.mark.timeout(1800)
def test_preview_of_a_change_shows_it_without_the_cluster(deployed, unreachable, engine):  # noqa: F811
    engine.cli("config", "set", "--path", "torchfleet:training.etcdReplicas", "3", "--stack", engine.stack)
    try:
        preview = unreachable.pulumi("preview", "--diff")
    finally:
        engine.cli("config", "set", "--path", "torchfleet:training.etcdReplicas", "1", "--stack", engine.stack)
    assert "replicas" in preview.stdout and "StatefulSet" in preview.stdout, preview.stdout[-3000:]


@pytest.mark.timeout(1800)
def test_destroy_unreachable_fails_and_keeps_the_state(deployed, unreachable, engine):  # noqa: F811
    with pytest.raises(EngineError) as error:
        unreachable.pulumi("destroy", "--yes", "--skip-preview")
    assert "PULUMI_K8S_DELETE_UNREACHABLE" in str(error.value)
    assert len(stack_resources(engine)) == len(deployed)


@pytest.mark.timeout(1800)
def test_refresh_with_delete_unreachable_forgets_a_living_cluster(deployed, unreachable, engine, cluster):  # noqa: F811
    """Why no provider keeps deleteUnreachable: one refresh from a machine that cannot reach a cluster
    that is alive drops all its objects from the state (the next `up` then tries to create them all)."""
    snapshot = engine.cli("stack", "export", "--stack", engine.stack).stdout
    try:
        with_env(unreachable, PULUMI_K8S_DELETE_UNREACHABLE="true").pulumi("refresh", "--yes", "--skip-preview")
        assert stack_resources(engine) == []
        dyn = dynamic(cluster)
        assert all(live(dyn, ref) is not None for ref in deployed), "refresh deleted objects it only forgot"
    finally:
        state = engine.workdir / "state-snapshot.json"
        state.write_text(snapshot)
        engine.cli("stack", "import", "--file", str(state), "--stack", engine.stack)
    assert len(stack_resources(engine)) == len(deployed)


@pytest.mark.timeout(1800)
def test_destroy_of_a_gone_cluster_with_delete_unreachable(deployed, unreachable, engine, cluster):  # noqa: F811
    """The escape for a cluster that is gone: PULUMI_K8S_DELETE_UNREACHABLE=true on `destroy` (the provider's
    inputs do not set it, so the variable reaches it): the state is emptied and nothing is deleted."""
    with_env(unreachable, PULUMI_K8S_DELETE_UNREACHABLE="true").pulumi("destroy", "--yes", "--skip-preview")
    assert stack_resources(engine) == []
    dyn = dynamic(cluster)
    left = [ref for ref in deployed if live(dyn, ref) is not None]
    assert left and len(left) == len(deployed), "objects were deleted, not only forgotten"
