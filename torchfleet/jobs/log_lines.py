"""`torchfleet logs`' readable lines: the trainer's progress events as a researcher reads them.

Rank 0 prints one ``@@tf {json}`` event per step (training-image/elastic_trainer/events.py), which
is what `status` and the local harness parse, and what a person should not have to (issue 22:
`logs` showed one JSON line per step). Each event becomes one line with its time: steps with their
loss, speed and world size; starts, resumes, checkpoints, signals and exits as sentences. Lines that
are no event (the script's own output, torchrun's) pass unchanged; `logs --json` prints the raw lines.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from torchfleet.jobs import terminal_text, worker_error
from torchfleet.jobs.summary import EVENT_PREFIX, events_from_lines

# Events a reader does not need once the result is printed: the checkpoint writer's start (its
# commit, `ckpt`, follows), the in-place quorum of every step (its size is the step's world).
QUIET = frozenset({"ckpt_writing", "quorum"})


def _clock(event: Mapping[str, Any]) -> str:
    wall = event.get("wall")
    return time.strftime("%H:%M:%S", time.localtime(wall)) if isinstance(wall, int | float) else "--:--:--"


def _where(event: Mapping[str, Any]) -> str:
    group = event.get("group")
    return f" (group {group})" if isinstance(group, int) else ""


def _sentence(kind: str, e: Mapping[str, Any]) -> str:
    step = e.get("step")
    world = f", world size {e['world']}" if "world" in e else ""
    if kind == "start":
        return f"started from scratch{world}" + (f" on {e['device']}" if e.get("device") else "") + _where(e)
    if kind == "resumed":
        source = f" ({e['source']})" if e.get("source") else ""
        return f"resumed from the checkpoint of step {step}{source}{world}" + _where(e)
    if kind == "hold":
        return (f"waiting before step {step} for a world size of {e.get('until_world')} (now {e.get('world')}): "
                "the other nodes are starting")
    if kind == "healed":
        return f"healed at step {step} from a live peer (no checkpoint read)" + _where(e)
    if kind == "ckpt":
        reason = f", {e['reason']}" if e.get("reason") else ""
        return f"checkpoint of step {step} committed (generation {e.get('gen')}{reason})"
    if kind == "ckpt_failed":
        return f"checkpoint of step {step} FAILED: {e.get('error')} (training goes on; see the lines above)"
    if kind == "done":
        return f"done: trained to step {step}{world}" + _where(e)
    if kind == "signal":
        return f"signal {e.get('signum')} at step {step}: checkpointing, then stopping" + _where(e)
    if kind == "exit":
        reason = f" ({e['reason']})" if e.get("reason") else ""
        return f"worker exits with code {e.get('code')} at step {step}{reason}" + _where(e)
    if kind == "nonfinite":
        return (f"step {step}: the loss is not finite ({e.get('loss')}): its update skipped, "
                f"{e.get('in_a_row')} in a row")
    if kind == "scalars_failed":
        return f"TensorBoard scalars stopped ({e.get('error')}); training goes on"
    if kind == "schedule_rebuilt":  # an extended run (elastic_trainer/schedule.py)
        was = e.get("was_total_steps")
        return (f"the learning-rate schedule is rebuilt for --total-steps={e.get('total_steps')} at step {step} "
                f"(the checkpoint's was for {f'--total-steps={was}' if was else 'another total'}; "
                "--schedule-on-extend=keep keeps the saved one)")
    fields = " ".join(f"{k}={v}" for k, v in e.items() if k not in ("ev", "wall"))
    return f"{kind} {fields}".rstrip()


class Readable:
    """Turns one stream's lines into readable ones; keeps the previous step for the speed."""

    def __init__(self) -> None:
        self._last: tuple[float, int] | None = None  # (wall, step) of the previous step event

    def line(self, raw: str) -> str | None:
        """The line to print for ``raw``; None for an event not worth a line."""
        if EVENT_PREFIX not in raw:
            # torchrun's report of a failed worker carries the worker's own traceback behind torch's log
            # prefix on every line (issue 32): shown as the worker printed it
            return worker_error.strip_report_prefix(raw)
        found = events_from_lines([raw])
        if not found:
            return raw
        event = found[0]
        kind = event["ev"]
        if kind in QUIET:
            return None
        if kind in ("start", "resumed"):
            self._last = None  # a new worker group: its speed starts again
        # an event's fields are the job's to write: escaped before they reach the terminal (terminal_text.py)
        if kind != "step":
            return terminal_text.cell(f"{_clock(event)}  {_sentence(kind, event)}")
        return terminal_text.cell(f"{_clock(event)}  {self._step(event)}")

    def _step(self, e: Mapping[str, Any]) -> str:
        step, wall = e.get("step"), e.get("wall")
        parts = [f"step {step}"]
        loss = e.get("loss")
        parts.append(f"loss {loss:.4g}" if isinstance(loss, int | float) else "loss -")
        if isinstance(step, int) and isinstance(wall, int | float):
            if self._last is not None and wall > self._last[0] and step > self._last[1]:
                parts.append(f"{(step - self._last[1]) / (wall - self._last[0]):.2f} steps/s")
            self._last = (wall, step)
        if "world" in e:
            parts.append(f"world {e['world']}" + _where(e))
        return "   ".join(parts)
