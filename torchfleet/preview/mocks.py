"""Pulumi mocks that answer the way the providers do, so nothing silently registers nothing.

Each cloud keeps its computed outputs and invoke answers in its own table (mock_<cloud>.py);
this module merges them. A resource's state is its inputs plus a `name` (as auto-naming
would give), an id, and the computed outputs its table adds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pulumi
import yaml

from torchfleet.preview import mock_aws, mock_azure, mock_gcp

ResourceFn = Callable[[pulumi.runtime.MockResourceArgs], dict[str, Any]]
CallFn = Callable[[pulumi.runtime.MockCallArgs], dict[str, Any]]


def _yaml_decode(args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
    """kubernetes:yaml:decode as the provider answers it: every object of the YAML text.

    A mock answering {} here makes ConfigFile/ConfigGroup register no children at all.
    """
    return {"result": [doc for doc in yaml.safe_load_all(args.args["text"]) if doc]}


# This stack's outputs as its last `pulumi up` left them, for the engine's builtin readStackOutputs (what a
# StackReference reads; azure/live.py reads its own stack's). Empty: a stack never deployed.
STACK_OUTPUTS: dict[str, Any] = {}


def _read_stack_outputs(args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
    return {"name": args.args["name"], "outputs": dict(STACK_OUTPUTS), "secretOutputNames": []}


RESOURCES: dict[str, ResourceFn] = {**mock_aws.RESOURCES, **mock_gcp.RESOURCES, **mock_azure.RESOURCES}
CALLS: dict[str, CallFn] = {
    "kubernetes:yaml:decode": _yaml_decode,
    "pulumi:pulumi:readStackOutputs": _read_stack_outputs,
    **mock_aws.CALLS,
    **mock_gcp.CALLS,
    **mock_azure.CALLS,
}


class UnmockedCall(LookupError):
    pass


class TorchfleetMocks(pulumi.runtime.Mocks):
    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        state = {"name": args.name, **args.inputs}
        computed = RESOURCES.get(args.typ)
        if computed:
            state.update(computed(args))
        return f"{args.name}-id", state

    def call(self, args: pulumi.runtime.MockCallArgs):
        answer = CALLS.get(args.token)
        if answer is None:
            # Fail loudly: an invoke answered with {} would hide a broken program.
            raise UnmockedCall(f"no mock for invoke {args.token}; add it to torchfleet/preview/mock_*.py")
        return answer(args)
