"""Reading a resource's inputs the same way whatever the engine sends: missing, unknown, numbers as floats."""

from __future__ import annotations

from typing import Any

from components.policy.model import UNKNOWN, Resource


def _get(obj: Any, *path: str | int) -> Any:
    """obj[path...] or None when any step is missing; UNKNOWN when a step is not known yet."""
    for step in path:
        if obj is UNKNOWN:
            return UNKNOWN
        if isinstance(step, int):
            obj = obj[step] if isinstance(obj, list) and len(obj) > step else None
        else:
            obj = obj.get(step) if isinstance(obj, dict) else None
        if obj is None:
            return None
    return obj


def _number(value: Any) -> Any:
    """A count as int: the engine sends every number as a float (protobuf Struct), 8 arrives as 8.0."""
    if value is UNKNOWN or value is None:
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        return None
    return int(value)


def _truthy(value: Any) -> bool:
    # pulumi-aws types some booleans as strings ("true"), e.g. launch template network interfaces.
    return value is True or (isinstance(value, str) and value.lower() == "true")


def _urn_key(urn: str) -> str:
    """'<type>::<name>' of a URN (urn:pulumi:stack::project::parent$type::name)."""
    parts = urn.split("::")
    return f"{parts[2].split('$')[-1]}::{'::'.join(parts[3:])}" if len(parts) >= 4 else urn


def _key(r: Resource) -> str:
    return f"{r['type']}::{r['name']}"


def _deps(r: Resource, prop: str) -> list[str]:
    """Keys of the resources an input property was computed from (engine propertyDependencies)."""
    urns = ((r.get("options") or {}).get("propertyDependencies") or {}).get(prop) or []
    return [_urn_key(u) for u in urns]


def _list(value: Any) -> Any:
    """A list input as a list ([] when absent), or UNKNOWN when it or any item is not known yet."""
    if value is UNKNOWN or (isinstance(value, list) and UNKNOWN in value):
        return UNKNOWN
    return list(value) if isinstance(value, list) else []


def _items(value: Any) -> list:
    """The known items of a list input, for rules that look at each item on its own."""
    return [v for v in value if v is not UNKNOWN] if isinstance(value, list) else []


def _count_only(value: Any) -> Any:
    """A list whose length is what matters: known even when its items are not (ids in preview)."""
    return list(value) if isinstance(value, list) else (UNKNOWN if value is UNKNOWN else None)
