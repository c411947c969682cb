"""Azure: under construction in this session (see the Azure issue); spec.parse accepts the cloud."""

from __future__ import annotations

import pulumi

from components.spec import PlatformSpec


class AzureCluster(pulumi.ComponentResource):
    def __init__(self, name: str, spec: PlatformSpec, opts: pulumi.ResourceOptions | None = None):
        raise NotImplementedError("the azure cloud is being built; see its issue")
