"""A checkpoint's ``meta.json`` is read bounded, never blocking, and type-checked before anything trusts it (issue 23).

Regressions: valid JSON of the wrong shape (``{"files": {"state.pt": 5}}``, ``null`` entries, a NUL
in a file name, deep nesting) raised AttributeError, ValueError or RecursionError out of
``load_latest()``, so the older good checkpoints were never tried and the worker crash-looped; a
``meta.json`` that is a FIFO blocked the reader forever and one linked to ``/dev/zero`` read until
memory ran out. Every such checkpoint is now skipped like a corrupt one, and the one before it loads.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
import torch
from elastic_trainer.store.checkpoint import CheckpointStore
from elastic_trainer.store.checkpoint_verify import CorruptCheckpointError

BOUND_S = 30  # a read that is bounded ends in milliseconds; this only turns a hang into a failure


def state(step: int) -> dict:
    return {"model": {"w": torch.full((16, 16), float(step))}, "step": step}


@pytest.fixture
def store(tmp_path) -> CheckpointStore:
    store = CheckpointStore(tmp_path / "ckpt", keep=5)
    store.generations.claim({})
    store.save(state(10), step=10, generation=1)
    return store


def bounded(action):
    """Run ``action`` in a thread; fail the test (instead of hanging it) if it does not end in BOUND_S."""
    result: dict = {}

    def run() -> None:
        try:
            result["value"] = action()
        except BaseException as exc:  # handed to the test below
            result["error"] = exc

    thread = threading.Thread(target=run, daemon=True)  # a hung read must not hold up the test process
    thread.start()
    thread.join(BOUND_S)
    assert not thread.is_alive(), f"still running after {BOUND_S} s: a checkpoint read hangs"
    if "error" in result:
        raise result["error"]
    return result["value"]


def newest_with_meta(store: CheckpointStore, edit) -> Path:
    """A second, good checkpoint whose meta.json then gets ``edit(meta)`` (which returns the text to write)."""
    saved = store.save(state(20), step=20, generation=1)
    meta = json.loads((saved.path / "meta.json").read_text())
    (saved.path / "meta.json").write_text(edit(meta))
    return saved.path


def entry(meta: dict, **changes) -> dict:
    return {**meta["files"]["state.pt"], **changes}


WRONG_SHAPES = {
    "a file's entry is a number": lambda m: {**m, "files": {"state.pt": 5}},
    "a file's entry is null": lambda m: {**m, "files": {"state.pt": None}},
    "files is null": lambda m: {**m, "files": None, "size": None, "sha256": None},
    "files is a list": lambda m: {**m, "files": ["state.pt"]},
    "size is a string": lambda m: {**m, "files": {"state.pt": entry(m, size=str(m["files"]["state.pt"]["size"]))}},
    "size is a bool": lambda m: {**m, "files": {"state.pt": entry(m, size=True)}},
    "sha256 is a number": lambda m: {**m, "files": {"state.pt": entry(m, sha256=7)}},
    "a NUL in a file name": lambda m: {**m, "files": {**m["files"], "extra\x00.pt": entry(m)}},
    "an empty file name": lambda m: {**m, "files": {**m["files"], "": entry(m)}},
    "a name outside the directory": lambda m: {
        **m,
        "files": {**m["files"], "../ckpt-g000001-s0000000010/state.pt": entry(m)},
    },
    "an absolute name": lambda m: {**m, "files": {**m["files"], "/etc/hostname": entry(m)}},
    "state.pt not listed": lambda m: {**m, "files": {"meta.json": entry(m)}},
    "no generation": lambda m: {k: v for k, v in m.items() if k != "generation"},
    "a step that is not the name's": lambda m: {**m, "step": 99},
    "a step that is a string": lambda m: {**m, "step": "20"},
    "an unknown checkpoint format": lambda m: {**m, "checkpoint_format": "zarr"},
    "deep nesting": lambda m: {**m, "world_size": "NEST"},
    "the top level is a list": lambda m: [m],
    "the top level is null": lambda m: None,
}


@pytest.mark.parametrize("shape", list(WRONG_SHAPES))
def test_a_wrong_shaped_meta_is_skipped_and_the_previous_checkpoint_loads(store, shape, caplog):
    def edit(meta):
        text = json.dumps(WRONG_SHAPES[shape](meta))
        return text.replace('"NEST"', "[" * 100_000 + "]" * 100_000)  # RecursionError in json.loads

    path = newest_with_meta(store, edit)
    skipped = []
    found = bounded(lambda: CheckpointStore(store.root).load_latest(on_skip=lambda c, why: skipped.append(why)))
    assert found is not None, "the good checkpoint before it must load"
    loaded, meta, chosen = found
    assert chosen.step == 10 and meta["step"] == 10 and loaded["step"] == 10
    assert len(skipped) == 1 and skipped[0].startswith(path.name)
    with pytest.raises(CorruptCheckpointError):
        CheckpointStore(store.root).verify(chosen.__class__(1, 20, path))


def test_a_file_the_meta_does_not_list_is_never_loaded_unverified(store):
    # Before: a meta.json listing only some other file (right size and sha256) let state.pt be
    # loaded without any check: whatever torch.load can read would have been resumed from.
    saved = store.save(state(20), step=20, generation=1)
    meta = json.loads((saved.path / "meta.json").read_text())
    (saved.path / "notes.txt").write_bytes(b"")
    meta["files"] = {"notes.txt": {"size": 0, "sha256": hashlib.sha256(b"").hexdigest()}}
    (saved.path / "meta.json").write_text(json.dumps(meta))
    torch.save(state(666), saved.path / "state.pt")  # loadable, never verified
    _, meta, chosen = CheckpointStore(store.root).load_latest()
    assert chosen.step == 10


def test_a_fifo_meta_is_skipped_without_blocking(store):
    path = newest_with_meta(store, json.dumps)
    (path / "meta.json").unlink()
    os.mkfifo(path / "meta.json")  # nobody ever writes it: open() for reading blocks forever
    _, meta, _ = bounded(lambda: CheckpointStore(store.root).load_latest())
    assert meta["step"] == 10


def test_a_fifo_state_file_is_skipped_without_blocking(store):
    saved = store.save(state(20), step=20, generation=1)
    (saved.path / "state.pt").unlink()
    os.mkfifo(saved.path / "state.pt")
    fresh = CheckpointStore(store.root)
    _, meta, _ = bounded(lambda: fresh.load_latest())
    assert meta["step"] == 10
    # another rank, told the checkpoint is verified, checks the file's kind before torch.load opens it
    with pytest.raises(CorruptCheckpointError, match="not a regular file"):
        bounded(lambda: fresh.load(saved, verified=True))


def test_an_oversized_meta_is_refused_unread(store):
    path = newest_with_meta(store, lambda meta: json.dumps(meta) + " " * (8 << 20))  # valid JSON, 8 MiB
    with pytest.raises(CorruptCheckpointError, match="larger than"):
        CheckpointStore(store.root).verify(chosen_at(path))
    assert CheckpointStore(store.root).load_latest()[1]["step"] == 10


def chosen_at(path: Path):
    from elastic_trainer.store.checkpoint import Checkpoint

    generation, step = (int(part[1:]) for part in path.name.split("-")[1:])
    return Checkpoint(generation, step, path)


# /dev/zero read until memory runs out: run in a child under a memory limit, so that a reader
# that is not bounded fails this test (MemoryError, or killed) instead of exhausting the machine
DEV_ZERO = textwrap.dedent(
    """
    import resource, sys
    from pathlib import Path
    from elastic_trainer.store.checkpoint_verify import CorruptCheckpointError, read_meta
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
    try:
        read_meta(Path(sys.argv[1]))
    except CorruptCheckpointError as exc:
        print("refused:", exc)
    """
)


@pytest.mark.parametrize("target", ["/dev/zero", "/dev/urandom"])
def test_a_meta_linked_to_an_endless_device_is_refused_unread(store, target):
    path = newest_with_meta(store, json.dumps)
    (path / "meta.json").unlink()
    (path / "meta.json").symlink_to(target)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "training-image")}
    run = subprocess.run(
        [sys.executable, "-c", DEV_ZERO, str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=BOUND_S,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "refused:" in run.stdout and "not a regular file" in run.stdout
    assert bounded(lambda: CheckpointStore(store.root).load_latest())[1]["step"] == 10
