"""Fixtures of the real control-plane tier: one control plane per test session, shared by its tests.

Never skipped: a missing binary fails with the command that builds it (`.ci/setup` runs it), so CI
cannot pass by not running this tier.
"""

from __future__ import annotations

import pytest

from tests.controlplane.cluster import ControlPlane
from tests.controlplane.layer import TrainingLayer


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory):
    with ControlPlane.start(tmp_path_factory.mktemp("controlplane")) as cp:
        yield cp


@pytest.fixture(scope="session")
def training_layer(control_plane, tmp_path_factory) -> TrainingLayer:
    """The local stack's training layer, as `torchfleet synth` renders it, applied with kubectl;
    GPU nodes shaped like the aws-usw2 stack's pools and one manager node per zone."""
    return TrainingLayer.apply(control_plane, tmp_path_factory.mktemp("layer"))
