"""A job's progress from its trainer's events: step, speed, ETA, world size over time, restarts, lost steps.

The training image's rank 0 prints progress events on stdout as ``@@tf {json}`` lines
(training-image/elastic_trainer/events.py): ``start`` (a fresh run), ``resumed`` (a worker group
restarted from a checkpoint, at the checkpoint's step), ``step``, ``ckpt`` (a committed checkpoint),
``done``. Every event carries ``wall`` (seconds since the epoch). `summarize` is a pure function of
those events, so `torchfleet status`, `--watch` and the demo's closing view show the same figures.

Lost steps: steps a worker group had trained past its last checkpoint when it was stopped, which the
next group trains again after resuming (highest step seen before the resume, minus the resume step).

In-place jobs (elastic_trainer/inplace/group.py) emit ``start``/``resumed`` once per replica group, with its
``group``: the groups that join the job's first quorum together each announce it, and a group started
after the last step reads the final checkpoint (``resumed`` at that step, then ``done``). Neither is a
restart (issue 23: `Restarts: 1` for an in-place run in which nothing restarted). A survivor's peers
heal from it (``healed``), which is no restart either.

Restarts and joins (issue 32: `Restarts: 4` after one kill). In restart mode every change of the
members restarts the workers, a node joining as much as one lost. A restart is what a user means by
one: a new worker group after a node was lost, a worker failed or the job was stopped (fewer or as many
nodes as before). A join is a new group with more nodes than the one before, or one that follows a
group held for more nodes (``hold``, HOLD_FOR_WORLD: released only when a node comes); it loses no
steps and is counted apart.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

EVENT_PREFIX = "@@tf "  # elastic_trainer.events.PREFIX
# Steps/s over the newest step events of the current worker group: recent enough to follow a
# world-size change, long enough to smooth one slow step.
RATE_WINDOW = 20
_STARTS = ("start", "resumed")
_GROUP = "group"  # in-place events name their replica group; the restart mode's never do


@dataclass(frozen=True)
class WorldChange:
    step: int
    world: int
    wall: float


@dataclass(frozen=True)
class Checkpoint:
    step: int
    generation: int | None
    wall: float | None


@dataclass(frozen=True)
class Summary:
    step: int | None  # the newest step trained (after a resume: where the group is now)
    total_steps: int | None
    steps_per_s: float | None
    eta_s: float | None
    world: int | None
    world_history: tuple[WorldChange, ...]
    restarts: int  # worker groups started after the first for a lost node, a failure or a stop
    lost_steps: int  # steps trained again after resuming from an older checkpoint
    last_checkpoint: Checkpoint | None
    loss: float | None
    done: bool
    failed_checkpoints: int
    last_wall: float | None  # the newest event's time
    scalars_failed: str | None = None  # why rank 0 stopped writing TensorBoard scalars (events.Scalars)
    nonfinite_steps: tuple[int, ...] = ()  # steps whose NaN or infinite loss skipped their update
    nonfinite_exits: int = 0  # workers ended by more than --max-nonfinite-steps such steps in a row
    joins: int = 0  # worker groups started after the first to take in more nodes (not failures)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def events_from_lines(lines: Iterable[str]) -> list[dict[str, Any]]:
    """The progress events in log lines (anything else is skipped: torchrun's and the user's output)."""
    found = []
    for line in lines:
        start = line.find(EVENT_PREFIX)
        if start < 0:
            continue
        try:
            event = json.loads(line[start + len(EVENT_PREFIX):])
        except ValueError:
            continue
        if isinstance(event, dict) and isinstance(event.get("ev"), str):
            found.append(event)
    return found


def merge(*logs: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Events of several pods' logs in time order, each once (a pod's current and previous logs can
    repeat a line; rank 0 of a new group may run in another pod)."""
    seen: set[str] = set()
    out = []
    for event in (e for log in logs for e in log):
        key = json.dumps(event, sort_keys=True, default=str)
        if key not in seen:
            seen.add(key)
            out.append(event)
    return sorted(out, key=lambda e: _number(e.get("wall")) or 0.0)


def total_steps_from_args(args: Sequence[str]) -> int | None:
    """``--total-steps N`` or ``--total-steps=N`` in the training command (the trainer's flag)."""
    for i, arg in enumerate(args):
        value = arg.partition("=")[2] if arg.startswith("--total-steps=") else (
            args[i + 1] if arg == "--total-steps" and i + 1 < len(args) else None)
        if value is not None and value.isdigit() and int(value) > 0:
            return int(value)
    return None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def summarize(events: Sequence[Mapping[str, Any]], total_steps: int | None = None) -> Summary:
    """The progress the events (in time order) show; ``total_steps`` from the job's command, if known."""
    step: int | None = None
    highest = 0  # the highest step any group reached
    world: int | None = None
    history: list[WorldChange] = []
    groups = 0
    joins = 0
    group_world: int | None = None  # the current group's world size, from its start
    held = False  # the current group held for more nodes (HOLD_FOR_WORLD)
    lost = 0
    checkpoint: Checkpoint | None = None
    loss: float | None = None
    done = False
    failed = 0
    rate_points: list[tuple[float, int]] = []  # (wall, step) of the current group's step events
    last_wall: float | None = None
    scalars_failed: str | None = None
    nonfinite: set[int] = set()
    nonfinite_exits = 0
    inplace_round = False  # an in-place group announced a (re)start and no step has been trained since
    done_at: int | None = None
    for event in events:
        kind, wall = event.get("ev"), _number(event.get("wall"))
        last_wall = wall if wall is not None else last_wall
        at = _int(event.get("step"))
        if kind in _STARTS and _GROUP in event:
            late = kind == "resumed" and done_at is not None and at is not None and at >= done_at
            if inplace_round or late:  # another group of the same (re)start, or one that found the job done
                continue
            inplace_round = True
        if kind in _STARTS:
            done_at = None
            groups += 1
            rate_points = []
            done = False
            now_at_start = _int(event.get("world"))
            if groups > 1 and (held or (now_at_start is not None and group_world is not None
                                        and now_at_start > group_world)):
                joins += 1
            group_world, held = now_at_start, False
            resumed_at = at if kind == "resumed" and at is not None else 0
            if groups > 1:
                lost += max(0, highest - resumed_at)
            step = resumed_at
        if kind in ("step", "exit"):
            inplace_round = False
        if kind == "step" and at is not None:
            step = at
            highest = max(highest, at)
            if wall is not None:
                rate_points.append((wall, at))
            loss = _number(event.get("loss")) if "loss" in event else loss
        if kind == "done" and at is not None:
            step, done, done_at = at, True, at
            highest = max(highest, at)
        if kind == "ckpt" and at is not None:
            checkpoint = Checkpoint(at, _int(event.get("gen")), wall)
        if kind == "hold":
            held = True
        if kind == "ckpt_failed":
            failed += 1
        if kind == "nonfinite" and at is not None:  # every in-place group reports the same steps
            nonfinite.add(at)
        if kind == "exit" and event.get("reason") == "nonfinite" and event.get("rank", 0) == 0 \
                and event.get("group", 0) == 0:  # one per worker group, not one per rank
            nonfinite_exits += 1
        if kind == "scalars_failed":
            scalars_failed = scalars_failed or str(event.get("error") or "unknown error")
        now_world = _int(event.get("world"))
        if kind in (*_STARTS, "step", "done") and now_world is not None and now_world != world:
            world = now_world
            history.append(WorldChange(step or 0, now_world, wall or 0.0))
    rate = _rate(rate_points[-RATE_WINDOW:])
    eta = None
    if rate and total_steps and step is not None and not done:
        eta = max(0, total_steps - step) / rate
    return Summary(step=step, total_steps=total_steps, steps_per_s=rate, eta_s=eta, world=world,
                   world_history=tuple(history), restarts=max(0, groups - 1 - joins), lost_steps=lost,
                   last_checkpoint=checkpoint, loss=loss, done=done, failed_checkpoints=failed, last_wall=last_wall,
                   scalars_failed=scalars_failed, nonfinite_steps=tuple(sorted(nonfinite)),
                   nonfinite_exits=nonfinite_exits, joins=joins)


def _rate(points: Sequence[tuple[float, int]]) -> float | None:
    if len(points) < 2:
        return None
    (w0, s0), (w1, s1) = points[0], points[-1]
    return (s1 - s0) / (w1 - w0) if w1 > w0 and s1 > s0 else None


def duration(seconds: float) -> str:
    """45s, 12m30s, 3h05m."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def render(summary: Summary, now: float | None = None) -> list[tuple[str, str]]:
    """(label, value) lines for the status view; ``now`` (epoch seconds) dates the checkpoint."""
    s = summary
    if s.step is None:
        return [("Progress", "no progress events yet (the trainer prints them once training starts)")]
    of = f" of {s.total_steps} ({100 * s.step // s.total_steps}%)" if s.total_steps else ""
    step = f"{s.step}{of}" + (", done" if s.done else "") + (f"   loss {s.loss:.6g}" if s.loss is not None else "")
    speed = f"{s.steps_per_s:.2f} steps/s" if s.steps_per_s else "-"
    if s.eta_s is not None:
        speed += f"   ETA {duration(s.eta_s)}"
    elif not s.done and s.steps_per_s and not s.total_steps:
        speed += "   ETA unknown (no --total-steps in the command)"
    over_time = " -> ".join(f"{c.world} (step {c.step})" for c in s.world_history)
    world = f"{s.world} now; over time: {over_time}" if s.world is not None else "-"
    restarts = f"{s.restarts}; {s.lost_steps} steps lost (trained again after resuming from a checkpoint)"
    if s.joins:  # the workers restarted to take in a node: nothing failed (see the module's docstring)
        restarts += f"; {s.joins} {'join' if s.joins == 1 else 'joins'} (nodes added, not counted as restarts)"
    if s.last_checkpoint is None:
        ckpt = "none yet"
    else:
        c = s.last_checkpoint
        ago = f", {duration(now - c.wall)} ago" if now is not None and c.wall is not None else ""
        gen = f" (generation {c.generation})" if c.generation is not None else ""
        ckpt = f"step {c.step}{gen}{ago}"
    if s.failed_checkpoints:
        ckpt += f"; {s.failed_checkpoints} failed (see the logs)"
    lines = [("Step", step), ("Speed", speed), ("World size", world), ("Restarts", restarts),
             ("Last checkpoint", ckpt)]
    if s.nonfinite_steps or s.nonfinite_exits:
        last = f", last at step {s.nonfinite_steps[-1]}" if s.nonfinite_steps else ""
        value = f"{len(s.nonfinite_steps)} steps skipped (NaN or infinite loss){last}"
        if s.nonfinite_exits:
            times = "once" if s.nonfinite_exits == 1 else f"{s.nonfinite_exits} times"
            value += (f"; too many in a row {times} (--max-nonfinite-steps): "
                      "the workers restarted from the last checkpoint")
        lines.append(("Non-finite loss", value))
    if s.scalars_failed:  # training went on without them; the store is often full when this happens
        lines.append(("TensorBoard", f"scalars stopped ({s.scalars_failed}); training goes on without them"))
    return lines


def render_text(summary: Summary, now: float | None = None) -> str:
    return "\n".join(f"{label + ':':<17}{value}" for label, value in render(summary, now))
