"""Fixtures of the container tier: the training image's CPU variant, built once (cached outside the
clone), and a loopback-only network namespace with etcd per test.

Never skipped: without runc, umoci, mmdebstrap, etcd or root the tests fail with what is missing.
"""

from __future__ import annotations

import pytest

from tests.containers import image as image_build
from tests.containers import runtime


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
