"""Aws: under construction in this session (see the Aws issue); spec.parse accepts the cloud."""

from __future__ import annotations

import pulumi

from components.spec import PlatformSpec


class AwsCluster(pulumi.ComponentResource):
    def __init__(self, name: str, spec: PlatformSpec, opts: pulumi.ResourceOptions | None = None):
        raise NotImplementedError("the aws cloud is being built; see its issue")
