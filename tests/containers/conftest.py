"""Fixtures of the container tier: the training image's CPU variant, built once (cached outside the
clone), and a loopback-only network namespace with etcd per test.

Collected only when named (`pytest tests/containers`, or a file in it): the image's first build
takes about 4 minutes and 2.6 GB here (the venv's packages linked, zstd layers; docs/benchmarks.md,
"Real containers"), so the README's whole-suite command does not start it. Named, never skipped:
without runc, umoci, mmdebstrap, zstd, containerd, etcd or root the tests fail with what is missing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.containers import image as image_build
from tests.containers import runtime

HERE = Path(__file__).resolve().parent


def pytest_ignore_collect(collection_path, config):
    """Ignore this folder unless a command-line argument lies inside it."""
    named = [Path(str(arg).split("::")[0]).resolve() for arg in config.args]
    if not any(p == HERE or HERE in p.parents for p in named):
        return True
    return None


@pytest.fixture(scope="session")
def image() -> image_build.Image:
    try:
        runtime.require_tier()
        return image_build.build(log=lambda line: print(line))
    except (runtime.TierError, image_build.ImageError) as err:
        pytest.fail(f"the container tier cannot start: {err}")


@pytest.fixture
def pod_net(tmp_path):
    """A network namespace holding only loopback, and the rendezvous etcd on its 127.0.0.1."""
    try:
        runtime.require_tier()
    except runtime.TierError as err:
        pytest.fail(f"the container tier cannot start: {err}")
    with runtime.netns() as ns:
        (tmp_path / "etcd").mkdir()
        with runtime.etcd_in(ns, tmp_path / "etcd" / "data") as endpoint:
            yield ns, endpoint
