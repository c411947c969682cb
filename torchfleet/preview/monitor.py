"""A mock resource monitor that records every registration: type, name, parent, inputs, options."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import rpc

SECRET = "[secret]"  # noqa: S105 (the placeholder printed instead of a secret)


@dataclass
class Recorded:
    type: str
    name: str
    parent: str | None  # "<type>::<name>" of the parent, None for the stack's children
    custom: bool
    inputs: dict[str, Any]  # secrets unwrapped: what tests assert on
    printable: dict[str, Any]  # secrets replaced by "[secret]": what synth prints
    # Resource options as the engine receives them (protect, ignoreChanges, ...).
    options: dict[str, Any] = field(default_factory=dict)
    urn: str = ""  # what other resources' dependencies name it by

    @property
    def key(self) -> str:
        return f"{self.type}::{self.name}"


def _unwrap(value: Any, mask: bool) -> Any:
    if rpc.is_rpc_secret(value):
        return SECRET if mask else _unwrap(value["value"], mask)
    if isinstance(value, dict):
        return {k: _unwrap(v, mask) for k, v in value.items()}
    if isinstance(value, list):
        return [_unwrap(v, mask) for v in value]
    return value


def _printable(type_: str, inputs: dict[str, Any]) -> dict[str, Any]:
    """A dynamic resource's provider travels as a pickled blob: printed by name, not as base64."""
    if type_.startswith("pulumi-python:dynamic:") and "__provider" in inputs:
        return {**inputs, "__provider": "[python dynamic provider]"}
    return inputs


def _parent_key(parent_urn: str) -> str | None:
    if not parent_urn:
        return None
    qualified_type, name = parent_urn.split("::")[2:4]
    type_ = qualified_type.split("$")[-1]
    return None if type_ == "pulumi:pulumi:Stack" else f"{type_}::{name}"


class RecordingMonitor(pulumi_mocks.MockMonitor):
    def __init__(self, mocks: pulumi_mocks.Mocks):
        super().__init__(mocks)
        self.recorded: list[Recorded] = []

    def RegisterResource(self, request):
        if request.type != "pulumi:pulumi:Stack":
            raw = rpc.deserialize_properties(request.object)
            timeouts = request.customTimeouts
            self.recorded.append(
                Recorded(
                    type=request.type,
                    name=request.name,
                    parent=_parent_key(request.parent),
                    custom=request.custom,
                    inputs=_unwrap(raw, mask=False),
                    printable=_printable(request.type, _unwrap(raw, mask=True)),
                    urn=self.make_urn(request.parent, request.type, request.name),
                    options={
                        "protect": request.protect,
                        "retainOnDelete": request.retainOnDelete,
                        "ignoreChanges": list(request.ignoreChanges),
                        "deleteBeforeReplace": request.deleteBeforeReplace,
                        "replaceOnChanges": list(request.replaceOnChanges),
                        "dependencies": list(request.dependencies),
                        # Which input came from which resource (components/policy/ links node groups
                        # to their subnets by it, as CrossGuard's property_dependencies do).
                        "propertyDependencies": {k: list(v.urns) for k, v in request.propertyDependencies.items()},
                        "customTimeouts": {
                            k: getattr(timeouts, k) for k in ("create", "update", "delete") if getattr(timeouts, k)
                        },
                        "provider": request.provider,
                        # The existing cloud resource a `pulumi up` adopts instead of creating one
                        # (the import resource option; storage.adopt sets it, plans.py).
                        "import": request.importId or None,
                    },
                )
            )
        return super().RegisterResource(request)
