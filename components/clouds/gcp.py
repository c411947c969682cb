"""Gcp: under construction in this session (see the Gcp issue); spec.parse accepts the cloud."""

from __future__ import annotations

import pulumi

from components.spec import PlatformSpec


class GcpCluster(pulumi.ComponentResource):
    def __init__(self, name: str, spec: PlatformSpec, opts: pulumi.ResourceOptions | None = None):
        raise NotImplementedError("the gcp cloud is being built; see its issue")
