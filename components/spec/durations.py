"""The autoscaler's durations (`autoscaler.scaleDownUnneededTime`, `scaleDownDelayAfterAdd`), as each
cloud's API takes them.

- AWS: the program passes them to the cluster autoscaler's flags (components/clouds/aws/autoscaling.py),
  which Go's time.ParseDuration reads. A time.Duration is an int64 of nanoseconds, so at most
  9223372036854775807 ns (2562047h47m16.854775807s: https://pkg.go.dev/time#Duration); past that
  ParseDuration fails ("invalid duration") and the autoscaler does not start (issue 23:
  `99999999999h` was accepted). We take whole s, m or h.
- Azure: AKS's autoScalerProfile takes minutes only: "Values must be an integer followed by an 'm'.
  No unit of time other than minutes (m) is supported" (scale-down-unneeded-time and
  scale-down-delay-after-add, in the AKS API's ManagedClusterPropertiesAutoScalerProfile as
  pulumi-azure-native's containerservice types and
  https://learn.microsoft.com/dotnet/api/azure.resourcemanager.containerservice.models.managedclusterautoscalerprofile
  document it, read 2026-11-25). `300s` and `1h` were accepted and failed at deploy time (issue 23);
  they are refused naming the minutes to write instead, not converted, so the stack file says what
  AKS gets.
"""

from __future__ import annotations

import re
from typing import Any

from components import cloud_limits

_GO_FORM = re.compile(r"^(\d+)(s|m|h)$")
_SECONDS = {"s": 1, "m": 60, "h": 3600}
# The largest whole count of each unit that a Go time.Duration holds (int64 nanoseconds).
_GO_MAX_NS = 2**63 - 1
GO_MAX = {unit: _GO_MAX_NS // (seconds * 10**9) for unit, seconds in _SECONDS.items()}
_GO_MAX_TEXT = f"{GO_MAX['h']}h, {GO_MAX['m']}m or {GO_MAX['s']}s"


def duration_problem(value: Any, cloud: str) -> str | None:
    """Why ``value`` is not a duration this cloud's autoscaler takes, or None."""
    minutes_only = cloud == "azure"
    example = "5m or 10m (AKS takes minutes only)" if minutes_only else "5m, 300s or 1h"
    match = _GO_FORM.match(value) if isinstance(value, str) else None
    if match is None:
        return f"expected a duration like {example}, got {cloud_limits.short_repr(value)}"
    digits, unit = match.groups()
    if len(digits) > 20 or int(digits) > GO_MAX[unit]:
        return (
            f"{cloud_limits.short_repr(value)} is longer than a Go time.Duration holds (at most {_GO_MAX_TEXT}, "
            "about 292 years; the cluster autoscaler parses it as one); give minutes, like 10m"
        )
    if minutes_only and unit != "m":
        seconds = int(digits) * _SECONDS[unit]
        minutes = -(-seconds // 60)  # rounded up: a node is kept a little longer, never removed sooner
        exact = "" if seconds % 60 == 0 else f" ({value} rounded up to whole minutes)"
        return f"AKS takes whole minutes only ('an integer followed by an m'), got {value!r}; write {minutes}m{exact}"
    return None
