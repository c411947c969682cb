"""TensorBoard scalars on a store that refuses them: training goes on, the failure is said once.

Regression: an OSError from the SummaryWriter (the shared store full or unwritable), raised by
its constructor, ``add_scalar`` or ``close``, ended the worker. The writer here does to the store
what the SummaryWriter does (make the directory, open an event file, append to it), against a
real failure: a directory under a regular file, or /dev/full (every write gets ENOSPC).
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest
from elastic_trainer import events as events_module
from elastic_trainer.events import Scalars
from elastic_trainer.signals import StopRequest
from elastic_trainer.trainer import _Run

from tests.harness.trainer_run import Task, config, printed

FULL = Path("/dev/full")


class EventFileWriter:
    """The SummaryWriter's file operations, in small; ``unbuffered`` fails at the write, else at close."""

    opened: ClassVar[list[EventFileWriter]] = []  # by the latest test

    def __init__(self, log_dir: Path, file: Path | None = None, unbuffered: bool = True) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        self.handle = (file or log_dir / "events.out").open("ab", buffering=0 if unbuffered else -1)
        self.added: list[tuple[str, int]] = []
        EventFileWriter.opened.append(self)

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        self.handle.write(f"{step} {tag} {value}\n".encode())
        self.added.append((tag, step))

    def close(self) -> None:
        self.handle.close()


# where the store refuses: what Scalars was doing, the writer it opens on log_dir, and what it says
REFUSALS = {
    "opening": (lambda log_dir: EventFileWriter(log_dir),  # log_dir is under a regular file
                "opening failed: NotADirectoryError: [Errno 20] Not a directory"),
    "writing": (lambda log_dir: EventFileWriter(log_dir, FULL),
                "writing train/loss of step 1 failed: OSError: [Errno 28] No space left on device"),
    "closing": (lambda log_dir: EventFileWriter(log_dir, FULL, unbuffered=False),
                "closing failed: OSError: [Errno 28] No space left on device"),
}


@pytest.fixture
def refused(tmp_path, monkeypatch, request):
    """The TensorBoard directory of a run whose store refuses at the ``request.param`` stage."""
    if not FULL.exists():
        pytest.fail("/dev/full is missing: it stands for a full store here")
    EventFileWriter.opened = []
    monkeypatch.setattr(events_module, "_summary_writer", REFUSALS[request.param][0])
    if request.param == "opening":
        (tmp_path / "store").write_text("a file where the directory should be")
        return tmp_path / "store" / "tb"
    return tmp_path / "tb"


@pytest.mark.parametrize(("refused", "stage"), [(stage, stage) for stage in REFUSALS], indirect=["refused"])
def test_a_store_that_refuses_scalars_never_ends_the_training(group, tmp_path, capsys, caplog, refused, stage):
    run = _Run(Task(), config(tmp_path, tensorboard_dir=refused), StopRequest())
    assert run.run() == 0  # before the fix: the OSError ended the worker
    events = printed(capsys)
    assert [e["step"] for e in events if e["ev"] == "step"] == [1, 2, 3, 4, 5, 6]
    assert [e["step"] for e in events if e["ev"] == "ckpt"] == [2, 4, 6]
    assert [e["step"] for e in events if e["ev"] == "done"] == [6]
    failed = [e for e in events if e["ev"] == "scalars_failed"]
    assert [(e["dir"], e["error"]) for e in failed] == [(str(refused), run.scalars.failed)]  # once
    assert run.scalars.failed.startswith(REFUSALS[stage][1])
    assert [r.message for r in caplog.records if "TensorBoard" in r.message] == [
        f"TensorBoard scalars in {refused} stopped, {run.scalars.failed}; training goes on without them"]


@pytest.mark.parametrize(("refused", "stage", "written"), [
    ("opening", "opening", None),  # no writer
    ("writing", "writing", []),  # the first write failed: the second was not attempted
    ("closing", "closing", [("train/loss", 1), ("train/loss", 2)]),  # buffered, refused at the flush
], indirect=["refused"])
def test_scalars_stop_at_the_first_failure(capsys, refused, stage, written):
    scalars = Scalars(refused, rank=0)
    scalars.add("train/loss", 1.0, 1)
    scalars.add("train/loss", 0.5, 2)
    scalars.close()
    scalars.close()
    assert scalars.failed.startswith(REFUSALS[stage][1])
    assert [e["error"] for e in printed(capsys, "scalars_failed")] == [scalars.failed]
    assert [w.added for w in EventFileWriter.opened] == ([] if written is None else [written])


def test_ranks_other_than_0_open_no_writer(tmp_path, monkeypatch):
    monkeypatch.setattr(events_module, "_summary_writer", lambda log_dir: pytest.fail("rank 1 opened a writer"))
    Scalars(tmp_path / "tb", rank=1).add("train/loss", 1.0, 1)
