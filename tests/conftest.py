"""Every test: `torchfleet check` never asks a what-is-my-IP service beyond loopback (torchfleet/reach.py).

The team's rule: no test dials an address outside 127.0.0.0/8. The reach tests point
TORCHFLEET_MY_IP_URL at a server of their own on 127.0.0.1; every other test (and every command a test
runs as a subprocess, which inherits the variable) has the lookup off. Likewise no test asks a real Azure
CLI who is logged in (torchfleet/azure_admins.py): test_check_azure_admins gives its own `az`.
"""

from __future__ import annotations

import contextlib

import pytest

URL_ENV = "TORCHFLEET_MY_IP_URL"  # torchfleet.reach.URL_ENV (test_check_reach holds them equal)
AZURE_CALLER_ENV = "TORCHFLEET_AZURE_CALLER"  # torchfleet.azure_admins.CALLER_ENV
AWS_CALLER_ENV = "TORCHFLEET_AWS_CALLER"  # torchfleet.aws_admins.CALLER_ENV


@pytest.fixture(autouse=True)
def _no_ip_lookup(monkeypatch):
    monkeypatch.setenv(URL_ENV, "off")
    monkeypatch.setenv(AZURE_CALLER_ENV, "off")
    monkeypatch.setenv(AWS_CALLER_ENV, "off")  # test_check_aws_admins sets its own


# Files whose tests share this machine's containerd state, network namespaces or image caches (the
# training image, the node's images): one xdist worker runs them one after another. RealNode.stop()
# removes the CNI network namespaces that appeared while its node ran, and two builds of one cached
# image would write the same files (issue 31, item 5: parallel only where it is safe).
ONE_AT_A_TIME = (
    "tests/containers/",
    "tests/controlplane/test_real_node.py",
    "tests/controlplane/test_real_network_policy.py",
    "tests/controlplane/test_real_node_loss.py",
    "tests/controlplane/test_real_training.py",
)


@pytest.hookimpl(optionalhook=True)  # a hook of xdist's: `pytest -p no:xdist` runs without it
def pytest_xdist_make_scheduler(config, log):
    """Under `pytest -n N --dist loadfile` (.ci/run): each file's tests on one worker, so a module's
    fixtures (a control plane's training layer, a real node) start once, and the files in ONE_AT_A_TIME
    all on one worker, one after another. xdist's own way to join files, `--dist loadgroup` with
    `xdist_group` marks, does nothing under pytest 9 (xdist 3.8.0 appends the group to `item._nodeid`,
    which pytest 9's `nodeid` no longer reads: seen 2026-11-29, a real-node file on each worker at
    once), so the scheduler is xdist's loadscope one with this file-to-scope rule (the hook:
    https://pytest-xdist.readthedocs.io/en/stable/how-to.html, pytest_xdist_make_scheduler)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ByFile(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return "one-at-a-time" if path.startswith(ONE_AT_A_TIME) else path

    return ByFile(config, log)


# The control-plane tier's binaries (tests/controlplane/build.py). On a fresh machine they take some 30 min
# of compiling, which .ci/run no longer waits for: it builds them in the background while the suite
# starts (issue 31, item 5). So the tests that need them run last, those of the Pulumi engine (built
# last: its two binaries are half the compiling) after the others, and each waits for what it needs
# before its timeout starts (pytest-timeout's `timeout` covers a test's fixtures; a wait for a compile
# is not the test's time).
TIER = "tests/controlplane/"
ENGINE = ("pulumi", "pulumi-resource-kubernetes")  # the `pulumi_engine` mark's


def _tier_tools(item) -> tuple[str, ...]:
    from tests.controlplane import build

    path = item.nodeid.split("::", 1)[0]
    if path.startswith(TIER):  # a control plane, a real node, the operators; the engine where marked
        engine = item.get_closest_marker("pulumi_engine") is not None
        return tuple(name for name in build.BY_NAME if engine or name not in ENGINE)
    if path == "tests/k8s/test_etcd_bootstrap.py":
        return ("etcd", "etcdctl")
    if "each_etcd" in getattr(item, "fixturenames", ()):
        return ("etcd",)  # tests/training_image/conftest.py: the tier's etcd 3.5 beside Debian's 3.4
    return ()


def pytest_collection_modifyitems(config, items):
    """The tier's tests after every other, the engine's last (a stable sort: each file's own order kept),
    so that the rest of the suite runs while the background build compiles."""
    items.sort(key=lambda item: (item.nodeid.startswith(TIER), item.get_closest_marker("pulumi_engine") is not None))


@pytest.hookimpl(wrapper=True, tryfirst=True)  # outside pytest-timeout's own wrapper of this hook
def pytest_runtest_protocol(item, nextitem):
    tools = _tier_tools(item)
    if tools:
        from tests.controlplane import build

        # A tool that cannot be built: the test's own call to build.ensure raises the error again, as its failure.
        with contextlib.suppress(build.BuildError):
            build.ensure(*tools)
    return (yield)
