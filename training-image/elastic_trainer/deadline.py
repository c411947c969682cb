"""A job's time limit: stop with a checkpoint at a wall-clock time, and exit 0 (issue 21, what a job cost).

``TORCHFLEET_STOP_AT`` (Unix seconds, UTC) is set by ``torchfleet submit --max-duration/--max-cost``
(torchfleet/jobs/limits.py) as an absolute time, so a worker restarted after a spot reclaim keeps the
same limit. Every rank votes "past the limit" in the step's one all-reduce, beside "got SIGTERM"
(trainer.py), so all ranks stop after the same step: the stop checkpoint is written as for a spot
notice, and every worker exits 0, so the job ends Succeeded with its state saved; submitting it again
under the same name (with a later limit) resumes from that checkpoint.

Why not the Job's ``activeDeadlineSeconds``: at the deadline the Job controller deletes the pods (a
SIGTERM, then SIGKILL after the grace period) and marks the Job Failed (DeadlineExceeded): the
trainer's SIGTERM checkpoint would still be written, but only if it fits the grace period, and a
planned stop would read as a failure. Here the stop is the trainer's own, with no time limit on the
checkpoint; clocks of the nodes need only agree to within a step.
"""

from __future__ import annotations

import math
import os
import time

ENV_STOP_AT = "TORCHFLEET_STOP_AT"


def stop_at(environ: dict[str, str] | None = None) -> float | None:
    """The limit from the environment; None without one; ValueError naming the variable if malformed."""
    text = (environ if environ is not None else os.environ).get(ENV_STOP_AT, "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"${ENV_STOP_AT}: expected Unix seconds (e.g. {int(time.time()) + 3600}), got {text!r}")
    return value


def due(limit: float | None) -> bool:
    return limit is not None and time.time() >= limit
