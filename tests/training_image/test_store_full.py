"""A full store (ENOSPC) costs at most the checkpoints it could not write (issue 11).

Regression: a failed save left its temporary directory behind, so every later save failed too,
and the restarted worker died in ``Generations.claim`` before training. Simulated here by a
disk with a byte budget (every file the store opens shares it), and for real on a 1 MiB tmpfs
mounted in a user namespace (skipped where the kernel does not allow that).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from elastic_trainer.store import fence as fence_module
from elastic_trainer.store.checkpoint import CheckpointStore
from elastic_trainer.store.checkpoint_write import CheckpointWriteError
from elastic_trainer.store.fence import Generations, StaleGenerationError

ENOSPC = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def state(step: int, floats: int = 64) -> dict:
    return {"model": {"w": torch.full((floats,), float(step))}, "step": step}


class FullDisk:
    """Every file opened through Path.open shares ``free`` bytes; then writes fail with ENOSPC."""

    def __init__(self, monkeypatch, free: int) -> None:
        self.free = free
        real_open = Path.open
        disk = self

        class Handle:
            def __init__(self, handle) -> None:
                self._handle = handle

            def write(self, data) -> int:
                size = memoryview(data).nbytes
                if size > disk.free:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                disk.free -= size
                return self._handle.write(data)

            def __getattr__(self, name):
                return getattr(self._handle, name)

            def __enter__(self):
                return self

            def __exit__(self, *exc) -> None:
                self._handle.close()

        def opening(path, mode="r", *args, **kwargs):
            handle = real_open(path, mode, *args, **kwargs)
            return Handle(handle) if "w" in mode or "x" in mode else handle

        monkeypatch.setattr(Path, "open", opening)


def temporaries(store: CheckpointStore) -> list[str]:
    return [p.name for p in store.root.iterdir() if p.name.startswith(".tmp")]


@pytest.fixture
def store(tmp_path) -> CheckpointStore:
    store = CheckpointStore(tmp_path / "ckpt", keep=3)
    assert store.generations.claim({}) == 1
    store.save(state(10), step=10, generation=1)
    return store


@pytest.mark.parametrize("where", ["state", "meta", "fsync", "mkdir"])
def test_a_failed_save_cleans_up_and_the_next_one_succeeds(store, monkeypatch, where):
    if where == "state":
        FullDisk(monkeypatch, free=100)
    elif where == "meta":
        FullDisk(monkeypatch, free=len(_serialized(state(20))) + 10)  # state.pt fits, meta.json does not
    elif where == "fsync":
        monkeypatch.setattr(os, "fsync", _raise_enospc)  # NFS reports a full server at fsync or close
    else:
        monkeypatch.setattr(Path, "mkdir", _raise_enospc)
    with pytest.raises(CheckpointWriteError, match="No space left on device") as raised:
        store.save(state(20), step=20, generation=1)
    assert isinstance(raised.value.__cause__, OSError) and raised.value.__cause__.errno == errno.ENOSPC
    assert temporaries(store) == []
    assert [c.step for c in store.committed()] == [10]
    monkeypatch.undo()  # space freed
    store.save(state(30), step=30, generation=1)
    assert [c.step for c in store.committed()] == [30, 10]
    assert store.load_latest()[1]["step"] == 30


def _serialized(obj) -> bytes:
    import io

    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def _raise_enospc(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_claim_on_a_full_store_is_deferred_to_the_first_commit(store, monkeypatch, caplog):
    real_open = os.open

    def full(path, flags, *args):
        if flags & os.O_CREAT:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_open(path, flags, *args)

    monkeypatch.setattr(fence_module.os, "open", full)
    restarted = CheckpointStore(store.root, keep=3)
    generation = restarted.generations.claim({"world_size": 1})  # before the fix: OSError, exit 1
    assert generation == 2 and restarted.generations.unclaimed == 2
    assert "training as generation 2" in caplog.text
    assert not (store.root / "generations" / "gen-000002.json").exists()
    with pytest.raises(CheckpointWriteError):  # still full: the claim, and so the commit, fails
        restarted.save(state(20), step=20, generation=generation)
    monkeypatch.undo()
    restarted.save(state(30), step=30, generation=generation)  # claims 2, then commits
    assert json.loads((store.root / "generations" / "gen-000002.json").read_text())["world_size"] == 1
    assert restarted.generations.unclaimed is None
    assert [(c.generation, c.step) for c in restarted.committed()] == [(2, 30), (1, 10)]


def test_a_deferred_claim_taken_by_another_group_is_fenced(store, monkeypatch):
    real_open = os.open
    monkeypatch.setattr(fence_module.os, "open", lambda path, flags, *a: _raise_enospc() if flags & os.O_CREAT
                        else real_open(path, flags, *a))
    late = CheckpointStore(store.root)
    assert late.generations.claim({}) == 2
    monkeypatch.undo()
    assert Generations(store.root).claim({}) == 2  # another group formed and could write its claim
    with pytest.raises(StaleGenerationError, match="another group claimed it"):
        late.save(state(20), step=20, generation=2)
    assert temporaries(store) == [] and [c.step for c in store.committed()] == [10]


def test_a_claim_whose_details_cannot_be_written_still_fences(store, monkeypatch, caplog):
    monkeypatch.setattr(fence_module.os, "fsync", _raise_enospc)
    assert Generations(store.root).claim({}) == 2
    assert "store is full" in caplog.text
    monkeypatch.undo()
    assert (store.root / "generations" / "gen-000002.json").exists()
    with pytest.raises(StaleGenerationError):
        store.save(state(20), step=20, generation=1)


PROBE = "mount -t tmpfs -o size=1m tmpfs {dir}"
SCENARIO = textwrap.dedent(
    """
    import json, sys, torch
    from pathlib import Path
    from elastic_trainer.store.checkpoint import CheckpointStore
    from elastic_trainer.store.checkpoint_write import CheckpointWriteError
    root = Path(sys.argv[1])
    small = lambda step: {"model": {"w": torch.full((1000,), float(step))}, "step": step}
    result = {}
    store = CheckpointStore(root, keep=3)
    gen = store.generations.claim({})
    store.save(small(10), step=10, generation=gen)
    try:
        store.save({"model": {"w": torch.zeros(400_000)}, "step": 20}, step=20, generation=gen)  # 1.6 MB
    except CheckpointWriteError as exc:
        result["big"] = str(exc)
    result["left_after_big"] = sorted(p.name for p in root.iterdir())
    store.save(small(30), step=30, generation=gen)
    with open(root / "filler", "wb", buffering=0) as filler:  # now fill the disk to the last byte
        try:
            while True:
                filler.write(b"x" * 512)
        except OSError:
            pass
    restarted = CheckpointStore(root, keep=3)
    result["claimed"] = restarted.generations.claim({"world_size": 1})
    try:
        restarted.save(small(40), step=40, generation=result["claimed"])
    except CheckpointWriteError as exc:
        result["full"] = str(exc)
    (root / "filler").unlink()
    restarted.save(small(50), step=50, generation=result["claimed"])
    result["committed"] = [c.path.name for c in restarted.committed()]
    result["left"] = sorted(p.name for p in root.iterdir())
    result["resumed"] = CheckpointStore(root).load_latest()[1]["step"]
    print(json.dumps(result))
    """
)


def test_a_real_full_filesystem(tmp_path):
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("no unshare(1): cannot mount a small tmpfs without root")
    namespace = [unshare, "--user", "--map-root-user", "--mount", "sh", "-c"]
    mount = tmp_path / "full"
    mount.mkdir()
    probe = subprocess.run([*namespace, PROBE.format(dir=mount)], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"this kernel does not let us mount a tmpfs in a user namespace: {probe.stderr.strip()}")
    script = tmp_path / "scenario.py"
    script.write_text(SCENARIO)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "training-image")}
    run = subprocess.run(
        [*namespace, f'{PROBE.format(dir=mount)} && exec "$0" "$1" "$2"', sys.executable, str(script), str(mount)],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert "No space left on device" in result["big"]
    assert result["left_after_big"] == ["ckpt-g000001-s0000000010", "generations"]  # no temporary left
    assert result["claimed"] == 2  # the restart got a generation and went on to train
    assert "No space left on device" in result["full"]
    assert result["committed"] == ["ckpt-g000002-s0000000050", "ckpt-g000001-s0000000030",
                                   "ckpt-g000001-s0000000010"]
    assert result["left"] == [*sorted(result["committed"]), "generations"]
    assert result["resumed"] == 50
