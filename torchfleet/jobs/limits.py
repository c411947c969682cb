"""`submit --max-duration 6h` and `--max-cost 50`: a time limit the trainer stops at, cleanly (issue 21).

Both become one absolute time, ``TORCHFLEET_STOP_AT`` in the pods' environment: at the first step after
it every rank stops, the stop checkpoint is committed and the workers exit 0
(training-image/elastic_trainer/deadline.py says why this and not the Job's activeDeadlineSeconds).
``--max-cost USD`` is turned into a duration at the job's hourly ceiling (cost.py: its most nodes on the
priciest machine it can land on, in the stack's region at spot prices when every pool it can land on is
spot, else on demand, from components/catalog/spot_prices.yaml where it has a dated row, else the
on-demand list price: issue 32), so the job stops before it could have cost more at those prices,
whatever smaller world it ran with; with both flags the earlier limit wins.
The limit counts from the submit, queueing included: it bounds the bill, not the training time.
"""

from __future__ import annotations

import argparse
import re
import time
from dataclasses import replace
from datetime import UTC, datetime

from torchfleet import cost
from torchfleet.jobs.errors import Problems, UsageError
from torchfleet.jobs.spec import JobRequest
from torchfleet.jobs.target import Target

ENV_STOP_AT = "TORCHFLEET_STOP_AT"  # elastic_trainer.deadline.ENV_STOP_AT
MAX_DURATION_S = 30 * 86400
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)([smhd]))+")
_PART = re.compile(r"(\d+(?:\.\d+)?)([smhd])")


def add_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-duration", default=None, metavar="DURATION",
                   help="stop the job with a checkpoint this long after the submit, e.g. 90m, 6h, 1d12h; it ends "
                        "Succeeded and resumes when submitted again")
    p.add_argument("--max-cost", type=str, default=None, metavar="USD",
                   help="stop the job with a checkpoint before it could cost more than this, at its most nodes on "
                        "the priciest machine, at the stack region's spot price when all its pools are spot, "
                        "else on demand (a GPU job on aws, gcp or azure; the price and its date are printed)")


def parse_duration(text: str) -> float:
    """``90m``, ``6h``, ``1d12h`` as seconds; a UsageError naming --max-duration otherwise."""
    compact = text.strip().lower().replace(" ", "")
    if not _DURATION.fullmatch(compact):
        raise UsageError(f"--max-duration: expected a number with a unit (s, m, h, d), e.g. 90m, 6h or 1d12h; got "
                         f"{text!r}")
    seconds = sum(float(n) * _UNITS[unit] for n, unit in _PART.findall(compact))
    if not 60 <= seconds <= MAX_DURATION_S:
        raise UsageError(f"--max-duration: from 1m to {MAX_DURATION_S // 86400}d, got {text!r}")
    return seconds


def parse_cost(text: str) -> float:
    try:
        usd = float(text)
    except ValueError:
        usd = float("nan")
    if not (usd > 0 and usd < 1e7):
        raise UsageError(f"--max-cost: a number of US dollars above 0, e.g. 50 or 12.5; got {text!r}")
    return usd


def check_flags(args: argparse.Namespace, problems: Problems) -> None:
    """--max-duration and --max-cost's own values, noted in ``problems`` with the job's other flags (issue 32:
    `--nodes 8:2 --gpu t44 --max-cost -5` took three runs, one error each)."""
    if getattr(args, "max_duration", None) is not None:
        problems.check(parse_duration, args.max_duration)
    if getattr(args, "max_cost", None) is not None:
        problems.check(parse_cost, args.max_cost)


def limit_s(args: argparse.Namespace, target: Target, req: JobRequest) -> tuple[float, str] | None:
    """(seconds from the submit, how they were chosen) for the job's flags; None without either flag."""
    found: list[tuple[float, str]] = []
    if getattr(args, "max_duration", None) is not None:
        found.append((parse_duration(args.max_duration), f"--max-duration {args.max_duration}"))
    if getattr(args, "max_cost", None) is not None:
        usd = parse_cost(args.max_cost)
        line = cost.job_line(target, req)  # the stack's region, spot where all its pools are (issue 32)
        if line is None or line.usd is None:
            why = ("a CPU job is not priced: the catalog prices GPU machines per job, not the CPU pool's"
                   if req.gpu is None else
                   line.why_unpriced if line is not None else f"the {target.cloud} catalog has no list prices")
            raise UsageError(f"--max-cost: job {req.name} has no hourly price to count against ({why}); limit it "
                             "with --max-duration instead")
        hours = usd / line.total
        basis = f" ({line.regional})" if line.regional else f" (on-demand list price, {cost.PRICES_NAME})"
        found.append((hours * 3600, f"--max-cost {usd:g} USD at most {line.total:.2f} USD/hour{basis}"))
    return min(found) if found else None


def apply(req: JobRequest, args: argparse.Namespace, target: Target) -> JobRequest:
    """The request with ``TORCHFLEET_STOP_AT`` in its environment when a limit was asked for.

    The submit's time is taken once (``args``): a dry run and the submit that follows show the same limit.
    """
    limit = limit_s(args, target, req)
    if limit is None:
        return req
    seconds, how = limit
    started = getattr(args, "limits_started", None) or time.time()
    args.limits_started = started
    stop_at = int(started + seconds)
    note = (f"time limit: stops with a checkpoint at {datetime.fromtimestamp(stop_at, UTC):%Y-%m-%d %H:%M} UTC, "
            f"{_human(seconds)} after the submit ({how})")
    env = (*((k, v) for k, v in req.env if k != ENV_STOP_AT), (ENV_STOP_AT, str(stop_at)))
    return replace(req, env=env, notes=(*req.notes, note))


def _human(seconds: float) -> str:
    minutes = int(seconds // 60)
    days, hours, minutes = minutes // 1440, minutes // 60 % 24, minutes % 60
    return "".join(f"{n}{u}" for n, u in ((days, "d"), (hours, "h"), (minutes, "m")) if n) or "0m"
