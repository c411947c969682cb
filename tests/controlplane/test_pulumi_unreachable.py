"""What the real engine and Kubernetes provider do when the cluster's API cannot be reached (issue 29).

A hosted CI runner previewing a stack whose API admits only listed addresses, a laptop outside
network.publicAccessCidrs running `destroy`, a cluster deleted out of band: the provider is handed a
kubeconfig whose server is a closed port on 127.0.0.1 (connection refused). The stack is the local one,
deployed first through the same engine (tests/controlplane/pulumi_engine.py) against a real API server,
so the state holds real objects. pulumi-kubernetes v4.25.0 provider/pkg/provider/provider.go (the Go
module built here, github.com/pulumi/pulumi-kubernetes/provider/v4@v4.0.0-20260115033456-f47bc2d6f199):

- Configure marks the cluster unreachable instead of failing (getResources, the discovery call, fails:
  `unable to load schema information from the API server`, lines 872-884); Check skips the
  server-side validation, Diff compares the state with the inputs client-side, and Create/Update answer
  a preview without the cluster: `pulumi preview` degrades to a client-side diff and succeeds;
- Delete (lines 2268-2280) and Read (1766-1789) of an unreachable cluster fail, naming
  PULUMI_K8S_DELETE_UNREACHABLE, unless deleteUnreachable (or that variable when the provider's inputs do
  not set the option, Configure lines 538-552) is true: then each object is
  dropped from the state and left where it is (still on the API server here: a real cluster keeps it,
  with its volumes and load balancers, until the cluster itself is deleted);
- a refresh with deleteUnreachable drops every object of a cluster that still exists from the state: why
  no stack keeps it on its providers (components/clouds/unreachable.py).

The unreachable cluster is the same kubeconfig file (the same provider inputs) with its server moved to
a closed port, as a machine that cannot reach it sees a cloud stack's cluster; see the
`engine` fixture for why another file is not that (the first run, 2026-11-28, pointed the engine at
another file: the provider and every object were replaced in preview, and destroy deleted them all).

An endpoint that drops the connection attempts (SYNs) instead of refusing them, which is what a runner
outside EKS's publicAccessCidrs or AKS's authorized ranges meets, is in test_pulumi_preview_offline.py:
without TORCHFLEET_PREVIEW_WITHOUT_CLUSTER such a preview does not end (still running after about 7
minutes here on 2026-11-28; that test only shows it has not finished after a minute), with it the
provider gets a refusing loopback endpoint and the preview ends as the refused one here does.
"""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import time
from collections.abc import Iterator

import pytest
import yaml

from tests.controlplane.pulumi_engine import Engine, EngineError
from tests.controlplane.test_pulumi_local import (  # noqa: F401 (fixtures)
    STACK_FILE,
    cluster,
    dynamic,
    live,
    provision_etcd_volumes,
    stack_resources,
)

pytestmark = pytest.mark.pulumi_engine  # waits for the engine's build (tests/conftest.py)


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
def engine(cluster, tmp_path_factory):  # noqa: F811 (the fixture imported above)
    """The local stack's engine on a kubeconfig file of this module's own, which the tests below make
    unreachable in place. The local stack's provider takes no kubeconfig argument (clouds/local.py), so
    pulumi_kubernetes' Python Provider puts $KUBECONFIG, the file's PATH, in its inputs
    (pulumi_kubernetes/provider.py: `if kubeconfig is None: kubeconfig = _utilities.get_env('KUBECONFIG')`),
    and the state keeps that path. A test that pointed the engine at another file changed the provider's
    inputs, not the cluster's reachability: DiffConfig (provider.go) plans a replacement of the provider,
    and so of every object, when the active cluster of the kubeconfig changes, and `destroy`/`refresh`,
    which do not run the program, configure the provider from the state's inputs, the reachable file,
    and deleted every object. A cloud stack's provider gets the cluster's kubeconfig contents, the same on
    a runner that cannot reach the server: same inputs, unreachable server, which is what this simulates."""
    path = tmp_path_factory.mktemp("pulumi-unreachable") / "kubeconfig"
    path.write_text(cluster.kubeconfig.read_text())
    stack_config = yaml.safe_load(STACK_FILE.read_text())
    return Engine.create(tmp_path_factory.mktemp("pulumi-local"), path, stack_config)


@pytest.fixture(scope="module")
def deployed(cluster, engine):  # noqa: F811 (the fixtures imported above)
    provision_etcd_volumes(cluster)
    engine.pulumi("up", "--yes", "--skip-preview")
    resources = stack_resources(engine)
    assert len(resources) >= 10
    return resources


@contextlib.contextmanager
def server_at(engine: Engine, port: int) -> Iterator[Engine]:
    """ENGINE's kubeconfig file (same path, so the same provider inputs) with its server on PORT of
    127.0.0.1 for the block; the reachable contents are back after it."""
    reachable = engine.kubeconfig.read_text()
    config = yaml.safe_load(reachable)
    for entry in config["clusters"]:
        entry["cluster"]["server"] = f"https://127.0.0.1:{port}"
    engine.kubeconfig.write_text(yaml.safe_dump(config))
    try:
        yield engine
    finally:
        engine.kubeconfig.write_text(reachable)


@pytest.fixture
def unreachable(engine):
    """The same stack, state and provider inputs; the kubeconfig's server a closed port on 127.0.0.1."""
    with server_at(engine, closed_port()) as unreachable_engine:
        yield unreachable_engine


def with_env(base: Engine, **env: str) -> EnvEngine:
    return EnvEngine(base.workdir, base.kubeconfig, base.stack, tuple(env.items()))


@pytest.mark.timeout(1800)
def test_preview_degrades_to_a_client_side_diff(deployed, unreachable):
    """A CI preview from a runner that cannot reach the API: no error, the same (empty) diff.
    Configure marks the cluster unreachable (provider.go 872-884), Check skips the OpenAPI validation
    (1205) and Diff compares the state with the inputs."""
    started = time.monotonic()
    preview = unreachable.pulumi("preview", "--expect-no-changes", "--diff")
    print(
        f"[pulumi-unreachable] preview, connection refused: {time.monotonic() - started:.0f} s\n"
        f"{preview.stdout[-2000:]}"
    )


@pytest.mark.timeout(1800)
def test_preview_of_a_change_shows_it_without_the_cluster(deployed, unreachable, engine):
    # Update in preview answers without the cluster (provider.go 2038-2040 fail only outside preview).
    engine.cli("config", "set", "--path", "torchfleet:training.etcdReplicas", "3", "--stack", engine.stack)
    try:
        preview = unreachable.pulumi("preview", "--diff")
    finally:
        engine.cli("config", "set", "--path", "torchfleet:training.etcdReplicas", "1", "--stack", engine.stack)
    assert "replicas" in preview.stdout and "StatefulSet" in preview.stdout, preview.stdout[-3000:]


@pytest.mark.timeout(1800)
def test_destroy_unreachable_fails_and_keeps_the_state(deployed, unreachable, engine, cluster):  # noqa: F811
    # Delete of an unreachable cluster without deleteUnreachable: the error naming the variable
    # (provider.go 2268-2280); destroy stops, the state and every object stay.
    with pytest.raises(EngineError) as error:
        unreachable.pulumi("destroy", "--yes", "--skip-preview")
    assert "PULUMI_K8S_DELETE_UNREACHABLE" in str(error.value)
    assert len(stack_resources(engine)) == len(deployed)
    dyn = dynamic(cluster)
    assert all(live(dyn, ref) is not None for ref in deployed), "a failed destroy deleted objects"


@pytest.mark.timeout(1800)
def test_refresh_with_delete_unreachable_forgets_a_living_cluster(deployed, unreachable, engine, cluster):  # noqa: F811
    """Why no provider keeps deleteUnreachable: one refresh from a machine that cannot reach a cluster
    that is alive drops all its objects from the state (the next `up` then tries to create them all)."""
    # Read with deleteUnreachable (from the variable: the state's provider inputs lack the option,
    # provider.go 538-552) returns an empty response, which drops the object (1766-1775).
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
    inputs do not set it, so the variable reaches it): the state is emptied and nothing is deleted
    (provider.go 2268-2275: Delete answers without a call to the cluster)."""
    with_env(unreachable, PULUMI_K8S_DELETE_UNREACHABLE="true").pulumi("destroy", "--yes", "--skip-preview")
    assert stack_resources(engine) == []
    dyn = dynamic(cluster)
    left = [ref for ref in deployed if live(dyn, ref) is not None]
    assert left and len(left) == len(deployed), "objects were deleted, not only forgotten"
