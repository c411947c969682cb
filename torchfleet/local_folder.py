"""A local run's folder: what `torchfleet run --local` writes, and what `status --local` and `logs --local` read.

The folder holds ``run.json`` (the command, the mode, each node with its process id and when it was
started or killed, and the run's end), one ``<node>.log`` per node (everything the node printed,
the trainer's ``@@tf`` progress events among it: training-image/elastic_trainer/local/localrun.py) and
``checkpoints/``. So a second shell can follow a run the way `status` and `logs` follow a cluster job,
from the same events and with the same view (torchfleet/jobs/summary.py).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from torchfleet.jobs import progress, summary, worker_error
from torchfleet.jobs.errors import UsageError
from torchfleet.jobs.log_lines import Readable

RECORD = "run.json"
FOLLOW_POLL_S = 0.5


class Record:
    """``run.json``, rewritten whole (write then rename) at each change, so a reader never sees half of it."""

    def __init__(self, folder: Path, **fields: Any) -> None:
        self.path = folder / RECORD
        self.data: dict[str, Any] = {**fields, "pid": os.getpid(), "started": time.time(), "ended": None,
                                     "exit": None, "nodes": []}
        self.save()

    def node_started(self, node: Any, slot: int) -> None:
        self.data["nodes"].append({"name": node.name, "pid": node.pid, "slot": slot, "started": time.time(),
                                   "killed": None})
        self.save()

    def node_killed(self, name: str) -> None:
        for entry in self.data["nodes"]:
            if entry["name"] == name:
                entry["killed"] = time.time()
        self.save()

    def node_exited(self, name: str, code: int | None) -> None:
        for entry in self.data["nodes"]:
            if entry["name"] == name:
                entry["exit"] = code
        self.save()

    def ended(self, code: int) -> None:
        self.data.update(ended=time.time(), exit=code)
        self.save()

    def save(self) -> None:
        partial = self.path.with_suffix(".json.partial")
        partial.write_text(json.dumps(self.data, indent=2) + "\n")
        partial.replace(self.path)


def check_folder(folder: Path) -> dict[str, Any]:
    """The folder's record; a clear exit 2 when the folder is not a local run's."""
    if not folder.is_dir():
        raise UsageError(f"--local: {folder} is not a folder; give the folder `torchfleet run --local` printed "
                         "(its --workdir)")
    path = folder / RECORD
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise UsageError(f"--local: {folder} has no {RECORD}: not the folder of a `torchfleet run --local`") from None
    except (OSError, ValueError) as error:
        raise UsageError(f"--local: cannot read {path} ({error})") from None
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
        raise UsageError(f"--local: {path} is not a run record written by `torchfleet run --local`")
    return data


def node_logs(folder: Path, record: dict[str, Any]) -> list[Path]:
    """The nodes' logs in the order they started."""
    return [folder / f"{entry['name']}.log" for entry in record["nodes"] if isinstance(entry, dict)
            and isinstance(entry.get("name"), str) and (folder / f"{entry['name']}.log").is_file()]


def _alive(pid: Any) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process took the id: not ours
        return False
    return True


def _clock(wall: Any) -> str:
    return time.strftime("%H:%M:%S", time.localtime(wall)) if isinstance(wall, int | float) else "?"


def _state(record: dict[str, Any]) -> str:
    if record.get("ended") is not None:
        return f"finished at {_clock(record['ended'])}, exit code {record.get('exit')}"
    if _alive(record.get("pid")):
        return f"running (torchfleet run, pid {record['pid']})"
    return "stopped without finishing (the torchfleet run process is gone)"


def _nodes(record: dict[str, Any]) -> str:
    parts = []
    running = record.get("ended") is None and _alive(record.get("pid"))
    for entry in record["nodes"]:
        if entry.get("killed") is not None:
            parts.append(f"{entry['name']} killed at {_clock(entry['killed'])}")
        elif running and _alive(entry.get("pid")):
            parts.append(f"{entry['name']} running")
        elif entry.get("exit") is not None:
            parts.append(f"{entry['name']} exited with code {entry['exit']}")
        else:
            parts.append(f"{entry['name']} stopped")
    return "; ".join(parts) or "none started yet"


def status_text(folder: Path) -> str:
    record = check_folder(folder)
    events = [summary.events_from_lines(path.read_text(errors="replace").splitlines())
              for path in node_logs(folder, record)]
    command = [str(c) for c in record.get("command") or []]
    merged = summary.merge(*events)
    found = summary.summarize(merged, summary.total_steps_from_args(command))
    checkpoint = progress.from_store(folder / "checkpoints")
    stored = ("none committed" if checkpoint is None else
              f"step {checkpoint.step} (generation {checkpoint.generation}) in {folder / 'checkpoints'}")
    lines = [("Run", f"{record.get('name')}: {record.get('recovery')} recovery, {record.get('nodes_wanted')} nodes"),
             ("Command", " ".join(command)),
             ("State", _state(record)),
             ("Nodes", _nodes(record)),
             *summary.render(found, now=time.time()),
             *_worker_errors(folder, record, _trained_since_start(merged)),
             ("On disk", stored)]
    return "\n".join(f"{label + ':':<17}{value}" for label, value in lines)


def _trained_since_start(events: list[dict[str, Any]]) -> bool:
    """Whether the newest attempt trained a step. Each attempt starts with ``start`` (or ``resumed``), at
    step 0 when nothing was saved: the summary's step is then 0, not None, and hid a Task error raised in
    the first step (issue 32, a second fresh walk: no Worker error line after 101 attempts)."""
    trained = False
    for event in events:
        if event.get("ev") in ("start", "resumed"):
            trained = False
        elif event.get("ev") in ("step", "done"):
            trained = True
    return trained


def _worker_errors(folder: Path, record: dict[str, Any], trained: bool) -> list[tuple[str, str]]:
    """While the newest attempt has trained no step, each node's last worker exception (issue 32: "no
    progress events yet" was all a run whose Task raised showed); after a step, a worker's error is a
    peer's loss or a kill."""
    if trained:
        return []
    errors = []
    for path in node_logs(folder, record):
        said = worker_error.summary(path.read_text(errors="replace"))
        if said:
            errors.append(("Worker error", f"{path.stem}: {said}; the traceback: torchfleet logs --local {folder}"))
    return errors


def log_lines(folder: Path, node: str | None, *, readable: bool, follow: bool) -> Iterator[str]:
    """Each node's log in turn (prefixed ``[node]`` when there are several), or one node's; with
    ``follow``, then what they add until the run ends."""
    record = check_folder(folder)
    paths = node_logs(folder, record)
    if node is not None:
        paths = [p for p in paths if p.stem == node]
        if not paths:
            names = ", ".join(p.stem for p in node_logs(folder, record)) or "none yet"
            raise UsageError(f"--node: run {record.get('name')} has no node {node!r}; its nodes: {names}")
    formatters: dict[Path, Readable] = {}
    offsets: dict[Path, int] = {}
    while True:
        for path in paths:
            for raw in _new_lines(path, offsets):
                text = formatters.setdefault(path, Readable()).line(raw) if readable else raw
                if text is not None:
                    yield f"[{path.stem}] {text}" if node is None and len(paths) > 1 else text
        if not follow:
            return
        record = check_folder(folder)
        if record.get("ended") is not None or not _alive(record.get("pid")):
            for path in paths:  # what was written before the end
                for raw in _new_lines(path, offsets):
                    text = formatters.setdefault(path, Readable()).line(raw) if readable else raw
                    if text is not None:
                        yield f"[{path.stem}] {text}" if node is None and len(paths) > 1 else text
            return
        if node is None:
            paths = node_logs(folder, record)  # a replacement node started meanwhile
        time.sleep(FOLLOW_POLL_S)


def _new_lines(path: Path, offsets: dict[Path, int]) -> list[str]:
    """The complete lines written to ``path`` since the last call."""
    try:
        with path.open("rb") as handle:
            handle.seek(offsets.get(path, 0))
            data = handle.read()
    except OSError:
        return []
    end = data.rfind(b"\n") + 1
    offsets[path] = offsets.get(path, 0) + end
    return data[:end].decode(errors="replace").splitlines()
