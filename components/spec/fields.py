"""Reading one raw config value (a whole number, a boolean, a list, an object's keys), every problem collected."""

from __future__ import annotations

import difflib
from typing import Any

from components import cloud_limits
from components.spec.model import NS

# Past this a number counts nothing real, and would leave the program as a float (maxSize: 1e+20).
_INT_CEILING = 2**31 - 1
_CEILING_WHY = "the largest number a config value takes"
_r = cloud_limits.short_repr


class _Problems:
    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, key: str, message: str) -> None:
        self.items.append(f"{key}: {message}")


def _unknown_keys(p: _Problems, key: str, value: dict, allowed: set[str]) -> None:
    for k in value:
        if k not in allowed:
            close = difflib.get_close_matches(k, sorted(allowed), n=1)
            hint = f"did you mean '{close[0]}'?" if close else f"valid keys: {', '.join(sorted(allowed))}"
            p.add(f"{key}.{k if isinstance(k, str) else _r(k)}", f"unknown key; {hint}")


def _obj(p: _Problems, key: str, value: Any, allowed: set[str]) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        p.add(key, f"expected an object with keys {', '.join(sorted(allowed))}, got {_r(value)}")
        return {}
    _unknown_keys(p, key, value, allowed)
    return value


def _int(
    p: _Problems, key: str, value: Any, default: int | None, minimum: int = 0, maximum: int | None = None,
    why: str = "",
) -> int | None:
    """A whole number in [minimum, maximum]; `why` cites where the maximum comes from."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        # Top-level scalars arrive from Pulumi as strings.
        text = value.strip() if isinstance(value, str) else ""
        digits = text.removeprefix("-")
        if digits.isascii() and digits.isdigit() and len(digits) >= 20:
            # Past int64 and any count (issue 23: a 5,000-digit maxNodes failed naming no key); the
            # readers keep such numbers as their text (torchfleet/preview/stack_file.py, components/config.py).
            limit = _INT_CEILING if maximum is None else maximum
            bound = f">= {minimum}" if text.startswith("-") else f"<= {limit} ({why or _CEILING_WHY})"
            p.add(key, f"must be {bound}, got a {len(digits)}-digit number")
            return default
        if digits.isascii() and digits.isdigit():
            value = int(text)
        else:
            p.add(key, f"expected a whole number, got {_r(value)}")
            return default
    if value < minimum:
        p.add(key, f"must be >= {minimum}, got {_r(value)}")
        return value
    limit = _INT_CEILING if maximum is None else maximum
    if value > limit:
        p.add(key, f"must be <= {limit} ({why or _CEILING_WHY}), got {_r(value)}")
        return default
    return value


def _bool(p: _Problems, key: str, value: Any, default: bool) -> bool:
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    p.add(key, f"expected true or false, got {_r(value)}")
    return default


def _str_list(p: _Problems, key: str, value: Any) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, (str, int)) for v in value):
        p.add(key, f"expected a list of strings, got {_r(value)}")
        return None
    return [str(v) for v in value]


def _k(name: str) -> str:
    return f"{NS}:{name}"
