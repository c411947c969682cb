"""Every test: `torchfleet check` never asks a what-is-my-IP service beyond loopback (torchfleet/reach.py).

The team's rule: no test dials an address outside 127.0.0.0/8. The reach tests point
TORCHFLEET_MY_IP_URL at a server of their own on 127.0.0.1; every other test (and every command a test
runs as a subprocess, which inherits the variable) has the lookup off. Likewise no test asks a real Azure
CLI who is logged in (torchfleet/azure_admins.py): test_check_azure_admins gives its own `az`.
"""

from __future__ import annotations

import contextlib
import os
import time

import pytest

URL_ENV = "TORCHFLEET_MY_IP_URL"  # torchfleet.reach.URL_ENV (test_check_reach holds them equal)
AZURE_CALLER_ENV = "TORCHFLEET_AZURE_CALLER"  # torchfleet.azure_admins.CALLER_ENV
AWS_CALLER_ENV = "TORCHFLEET_AWS_CALLER"  # torchfleet.aws_admins.CALLER_ENV


@pytest.fixture(autouse=True)
def _no_ip_lookup(monkeypatch):
    monkeypatch.setenv(URL_ENV, "off")
    monkeypatch.setenv(AZURE_CALLER_ENV, "off")
    monkeypatch.setenv(AWS_CALLER_ENV, "off")  # test_check_aws_admins sets its own


@pytest.fixture
def memoized_synth(request):
    """The mock synthesis memoized for the day-2 tests, which synthesize the same old config over and over
    (tests/harness/synth_cache.py says what the key holds). Not for a test that uses `monkeypatch`, itself or
    through a fixture: it may change the program's code, which the key cannot see, so it synthesizes afresh."""
    if "monkeypatch" in request.fixturenames:
        yield
        return
    from tests import harness
    from tests.harness import synth_cache
    from torchfleet.preview import runner

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runner, "synth", synth_cache.synth)
        patch.setattr(harness, "synth", synth_cache.synth)
        yield


@pytest.hookimpl(optionalhook=True)  # a hook of xdist's: `pytest -p no:xdist` runs without it
def pytest_xdist_make_scheduler(config, log):
    """Under `pytest -n N --dist loadfile` (.ci/run): each file's tests on one worker, so a module's
    fixtures (a control plane's training layer, a real node) start once; files handed out as their tools
    are built, and the real-node and image files one at a time (tests/scheduling.py). xdist's own way to
    join files, `--dist loadgroup` with `xdist_group` marks, does nothing under pytest 9 (xdist 3.8.0
    appends the group to `item._nodeid`, which pytest 9's `nodeid` no longer reads: seen 2026-11-29, a
    real-node file on each worker at once)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from tests import scheduling

    return scheduling.make_scheduler(config, log)


def _path(item) -> str:
    return item.nodeid.split("::", 1)[0]


_UNLISTED = pytest.StashKey[str]()


def pytest_collection_modifyitems(config, items):
    """The tier's tests after every other, the engine's last (a stable sort: each file's own order kept), so
    that without xdist too the rest of the suite runs first. And a test that needs a tool the scheduler does
    not know its file needs fails, saying so (pytest_runtest_setup): it would start before that tool is built.
    (Not a collection error: under xdist only the workers collect, and the controller would stop without it.)"""
    from tests import scheduling

    for item in items:
        needs = set(scheduling.ENGINE if item.get_closest_marker("pulumi_engine") else ())
        needs |= {"etcd"} if "each_etcd" in getattr(item, "fixturenames", ()) else set()
        missing = needs - set(scheduling.tools_for(_path(item)))
        if missing:
            item.stash[_UNLISTED] = (f"{item.nodeid} needs {', '.join(sorted(missing))}, which tests/scheduling.py's "
                                     f"tools_for does not list for {_path(item)}: list it there")
    items.sort(key=lambda item: (_path(item).startswith(scheduling.TIER),
                                 item.get_closest_marker("pulumi_engine") is not None))


def pytest_runtest_setup(item):
    if _UNLISTED in item.stash:
        pytest.fail(item.stash[_UNLISTED], pytrace=False)


# TORCHFLEET_TEST_TIMELINE=FILE: one line per test appended to FILE, "START END WORKER NODEID" (epoch
# seconds; the span includes the wait for the tier's tools and the test's fixtures), from which docs/ci.md
# reads where a run's minutes went (which worker was idle, what ran after the build). Off by default.
TIMELINE_ENV = "TORCHFLEET_TEST_TIMELINE"


@pytest.hookimpl(wrapper=True, tryfirst=True)  # outside pytest-timeout's own wrapper of this hook
def pytest_runtest_protocol(item, nextitem):
    started = time.time()
    # The tier's tools (tests/controlplane/build.py), which .ci/run builds in the background while the
    # suite runs (issue 31, item 5): waited for here, before pytest-timeout's clock starts (its `timeout`
    # covers a test's fixtures; a wait for a compile is not the test's time).
    from tests import scheduling

    tools = scheduling.tools_for(_path(item))
    if tools:
        from tests.controlplane import build

        # A tool that cannot be built: the test's own call to build.ensure raises the error again, as its failure.
        with contextlib.suppress(build.BuildError):
            build.ensure(*tools)
    try:
        return (yield)
    finally:
        timeline = os.environ.get(TIMELINE_ENV)
        if timeline:
            worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
            with open(timeline, "a") as out:  # one short append per line: the workers' lines do not interleave
                out.write(f"{started:.1f} {time.time():.1f} {worker} {item.nodeid}\n")
