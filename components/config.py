"""The ONLY reader of Pulumi config: turns the stack's config into a validated PlatformSpec.

Components never read pulumi.Config; they get frozen dataclasses from here
(pulumi/examples gcp-py-network-component/config.py). Validation happens before any resource
is registered, so a bad config leaves nothing half-made.
"""

from __future__ import annotations

import json
from typing import Any

import pulumi
from pulumi.runtime import config as runtime_config

from components import placeholders
from components.clouds import unreachable
from components.clouds.traits import CLOUD_TRAITS
from components.spec import PlatformSpec, parse

# Provider keys the spec reads besides the torchfleet namespace.
_PROVIDER_KEYS = ("aws:region", "aws:profile", "aws:assumeRoles", "aws:assumeRole", "gcp:region", "gcp:project",
                  "azure-native:location")
# Every cloud provider's namespace: a key of another cloud than the stack's is reported, not ignored.
_CLOUD_NAMESPACES = {ns for traits in CLOUD_TRAITS.values() for ns in traits.config_namespaces}


def _int_or_text(text: str) -> int | str:
    # A number past any config value's (int64 has 19 digits) stays its text, so spec names its key;
    # int() of more than 4,300 digits raises ValueError, which json.loads passes on (issue 23).
    return text if len(text.lstrip("-")) > 20 else int(text)


def decode_value(value: Any) -> Any:
    """Structured values reach the program as JSON text; scalars stay strings."""
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return json.loads(value, parse_int=_int_or_text)
        except json.JSONDecodeError:
            return value
    return value


def raw_config() -> dict[str, Any]:
    """Every torchfleet:* key (so typos can be reported), the provider keys we read, and every key
    of a cloud provider's namespace (so another cloud's key is reported).

    Under `pulumi up` the Pulumi CLI has parsed the stack file (torchfleet synth and check use
    torchfleet/preview/stack_file.py instead); the values are validated by spec.parse either way.
    """
    keys = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    namespaced = [k for k in keys if k.split(":", 1)[0] in {"torchfleet", *_CLOUD_NAMESPACES}]
    wanted = list(dict.fromkeys(namespaced + list(_PROVIDER_KEYS)))
    out = {}
    for key in wanted:
        value = runtime_config.get_config(key)
        if value is not None:
            out[key] = decode_value(value)
    return out


def parse_engine_config(config: dict[str, Any], stack: str) -> PlatformSpec:
    """The spec from config as the engine passes it (torchfleet synth, check and the CLI use this)."""
    return parse({key: decode_value(value) for key, value in config.items()}, stack=stack)


def load() -> PlatformSpec:
    """Read the running stack's config; raises spec.ConfigError listing every problem."""
    # Not config, but read as the program starts, before any resource (components/clouds/unreachable.py).
    unreachable.check_environment()
    spec = parse(raw_config(), stack=pulumi.get_stack())
    # The example's placeholders (203.0.113.0/24, an all-zero admin): `up` refuses, preview warns.
    placeholders.enforce(spec)
    return spec
