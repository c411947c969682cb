"""A pull-request preview from a runner outside network.publicAccessCidrs, on the real engine and provider
(issue 29; components/clouds/offline_preview.py).

The stack is tests/controlplane/programs/offline_preview_stack.py: a cloud stack's provider (the cluster's
kubeconfig contents and `clusterIdentifier`), one ConfigMap and one Helm release of a local chart (as the
AWS autoscaler and device plugin and Azure's device plugin are). Its kubeconfig names a port on 127.0.0.1
that first relays to the real API server (`up` there), then drops every connection attempt, as the cloud's
endpoint does to a machine outside its allowed ranges (tests/loopback.py). The same kubeconfig, the same
provider inputs in the state: only what answers changes.

- Without the switch, a preview that changes the ConfigMap has not finished after a minute (on
  2026-11-28 the same preview of the local stack still ran after 7 minutes): pulumi-kubernetes v4.25.0's
  Configure (provider/pkg/provider/provider.go 872-884) waits on each dropped dial. It is killed.
- With TORCHFLEET_PREVIEW_WITHOUT_CLUSTER=true the provider gets a refusing loopback kubeconfig, marks the
  cluster unreachable at once and diffs client-side: the preview finishes, shows the ConfigMap's and the
  release's change, and plans the provider as an update (clusterIdentifier unchanged: DiffConfig 408-421),
  no replacement.
- `up` with the switch is refused before any resource: the state and the object are unchanged.
- The control: the same stack without a clusterIdentifier, previewed with the switch, replaces the
  provider, the ConfigMap and the release (DiffConfig's active-cluster heuristic), so the identifier is what keeps
  the switch harmless.

Timing: only what holds at any load is asserted (a preview that hangs has not finished after 60 s; the
switched preview finishes within its generous limit); the seconds are printed.
"""

from __future__ import annotations

import json
import time
from urllib.parse import urlsplit

import pytest
import yaml

from components.clouds.offline_preview import SWITCH
from tests.controlplane.pulumi_engine import PROGRAM_VARIABLE, REPO, Engine, EngineError
from tests.controlplane.test_pulumi_local import cluster  # noqa: F401 (fixture)
from tests.controlplane.test_pulumi_unreachable import EnvEngine
from tests.loopback import Forwarder, dropping

pytestmark = pytest.mark.pulumi_engine  # waits for the engine's build (tests/conftest.py)

PROGRAM = REPO / "tests" / "controlplane" / "programs" / "offline_preview_stack.py"
NAMESPACE, ANNOTATION = "default", "torchfleet.io/value"
HANG_S = 60


@pytest.fixture(scope="module")
def relay(cluster):  # noqa: F811 (the fixture imported above)
    url = urlsplit(cluster.server)
    forwarder = Forwarder((url.hostname, url.port))
    yield forwarder
    forwarder.close()


IDENTIFIED, UNIDENTIFIED = "offline", "offline-noid"


def deploy(cp, relay: Forwarder, workdir, stack: str) -> EnvEngine:
    """STACK deployed through the relay; its kubeconfig's server is the relay's port. UNIDENTIFIED is the
    control: the same stack without a clusterIdentifier."""
    config = yaml.safe_load(cp.kubeconfig.read_text())
    for entry in config["clusters"]:
        entry["cluster"]["server"] = f"https://127.0.0.1:{relay.port}"
    settings = {
        "torchfleet:cloud": "local",  # required of every stack by Pulumi.yaml; this program does not read it
        "offline:kubeconfig": yaml.safe_dump(config),
        "offline:value": "one",
    }
    if stack == IDENTIFIED:
        settings["offline:clusterIdentifier"] = "arn:aws:eks:us-west-2:111122223333:cluster/offline-preview"
    base = Engine.create(workdir, cp.kubeconfig, {"config": settings}, stack=stack)
    engine = EnvEngine(base.workdir, base.kubeconfig, base.stack, ((PROGRAM_VARIABLE, str(PROGRAM)),))
    engine.pulumi("up", "--yes", "--skip-preview")
    assert configmap_value(cp, stack) == "one"
    return engine


@pytest.fixture(scope="module")
def engines(cluster, relay, tmp_path_factory):  # noqa: F811
    return {stack: deploy(cluster, relay, tmp_path_factory.mktemp("pulumi-offline"), stack)
            for stack in (IDENTIFIED, UNIDENTIFIED)}


@pytest.fixture(scope="module")
def dropping_engines(engines, relay):
    """The relay's port now drops every connection attempt; each stack's ConfigMap value changed to two."""
    relay.close()
    with dropping(relay.port):
        for engine in engines.values():
            engine.cli("config", "set", "offline:value", "two", "--stack", engine.stack)
        yield engines


@pytest.fixture
def dropped(dropping_engines):
    return dropping_engines[IDENTIFIED]


def configmap_value(cp, stack: str = IDENTIFIED) -> str:
    """The value on the API server, in the program's ConfigMap and in the Helm release's (which must agree)."""
    from kubernetes import client

    core = client.CoreV1Api(cp.api())
    values = {core.read_namespaced_config_map(name, NAMESPACE).metadata.annotations[ANNOTATION]
              for name in (f"offline-preview-{stack}", f"offline-{stack}-chart")}
    assert len(values) == 1, values
    return values.pop()


def switched(engine: EnvEngine, value: str = "true") -> EnvEngine:
    return EnvEngine(engine.workdir, engine.kubeconfig, engine.stack, (*engine.extra, (SWITCH, value)))


def steps(output: str) -> dict[str, list[dict]]:
    """`pulumi preview --json`'s steps by resource type and name (the log holds stdout and stderr); a
    replacement has several (create-replacement, replace, delete-replaced)."""
    document, _ = json.JSONDecoder().raw_decode(output[output.index("{"):])
    named: dict[str, list[dict]] = {}
    for step in document["steps"]:
        _, _, types, name = step["urn"].split("::", 3)  # urn:pulumi:STACK::PROJECT::[PARENT$]TYPE::NAME
        named.setdefault(f"{types.rsplit('$', 1)[-1]}::{name}", []).append(step)
    return named


def ops(named: dict[str, list[dict]]) -> dict[str, list[str]]:
    return {name: [s["op"] for s in found] for name, found in named.items()}


CONFIGMAP, PROVIDER = "kubernetes:core/v1:ConfigMap::settings", "pulumi:providers:kubernetes::cluster-k8s"
RELEASE = "kubernetes:helm.sh/v3:Release::chart"


@pytest.mark.timeout(1800)
def test_without_the_switch_the_preview_through_a_dropping_endpoint_does_not_finish(dropped):
    started = time.monotonic()
    with pytest.raises(EngineError, match=f"ran past {HANG_S} s"):
        dropped.pulumi("preview", "--diff", timeout=HANG_S)
    print(f"[preview-offline] no switch, dropping endpoint: killed after {time.monotonic() - started:.0f} s")


@pytest.mark.timeout(1800)
def test_with_the_switch_the_preview_finishes_and_shows_the_change(dropped, cluster):  # noqa: F811
    started = time.monotonic()
    preview = switched(dropped).pulumi("preview", "--json", timeout=600)
    seconds = time.monotonic() - started
    print(f"[preview-offline] switch set, dropping endpoint: preview in {seconds:.1f} s")
    by_name = steps(preview.stdout)
    plan = ops(by_name)
    print(f"[preview-offline] {plan}")
    assert plan == {"pulumi:pulumi:Stack::torchfleet-offline": ["same"], PROVIDER: ["update"], CONFIGMAP: ["update"],
                    RELEASE: ["update"]}
    (provider,), (configmap,), (release,) = by_name[PROVIDER], by_name[CONFIGMAP], by_name[RELEASE]
    assert release["newState"]["inputs"]["values"] == {"value": "two"}
    assert provider["diffReasons"] == ["kubeconfig"]  # the clusterIdentifier did not change
    assert configmap["newState"]["inputs"]["metadata"]["annotations"] == {ANNOTATION: "two"}
    assert configmap["oldState"]["inputs"]["metadata"]["annotations"] == {ANNOTATION: "one"}
    assert configmap_value(cluster) == "one"  # a preview


@pytest.mark.timeout(1800)
def test_up_with_the_switch_is_refused_before_any_resource(dropped, cluster):  # noqa: F811
    def resources() -> list[dict]:  # decrypted: each export encrypts the secrets anew
        exported = dropped.cli("stack", "export", "--show-secrets", "--stack", dropped.stack).stdout
        return json.loads(exported)["deployment"]["resources"]

    before = resources()
    with pytest.raises(EngineError) as error:
        switched(dropped).pulumi("up", "--yes", "--skip-preview", timeout=600)
    assert f"{SWITCH}=true is set for a run that is not a preview" in str(error.value)
    assert resources() == before
    assert configmap_value(cluster) == "one"


@pytest.mark.timeout(1800)
def test_a_value_other_than_true_or_false_is_refused(dropped):
    with pytest.raises(EngineError) as error:
        switched(dropped, "yes").pulumi("preview", timeout=600)
    assert f"{SWITCH}='yes': set it to true" in str(error.value)


@pytest.mark.timeout(1800)
def test_without_a_cluster_identifier_the_same_preview_replaces_every_object(dropping_engines):
    """The control: the provider's heuristic (DiffConfig: the kubeconfig's active cluster changed) would replace
    the provider and so every object it manages; what keeps the switched preview an update is the identifier."""
    preview = switched(dropping_engines[UNIDENTIFIED]).pulumi("preview", "--json", timeout=600)
    plan = ops(steps(preview.stdout))
    print(f"[preview-offline] without clusterIdentifier: {plan}")
    assert all("replace" in plan[name] for name in (PROVIDER, CONFIGMAP, RELEASE)), plan
