"""A store the worker cannot write still lets it resume, read-only, and says why (issue 23).

Regression: a store root or ``generations`` that is a file, a symbolic link loop, read-only or not
writable for the training uid raised a raw OSError (FileExistsError, EROFS, EACCES) out of the
generation claim, so a restarted worker could not resume although its checkpoint read fine. Now the
claim is deferred (as on a full store, test_store_full.py): the worker resumes and trains, and each
save fails as a CheckpointWriteError naming the cause, until the store is fixed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from elastic_trainer.store.checkpoint import CheckpointStore
from elastic_trainer.store.checkpoint_write import CheckpointWriteError


def state(step: int) -> dict:
    return {"model": {"w": torch.full((8, 8), float(step))}, "step": step}


def good_store(root: Path) -> None:
    store = CheckpointStore(root, keep=3)
    store.save(state(10), step=10, generation=store.generations.claim({}))


def generations_is_a_file(root: Path) -> None:
    shutil.rmtree(root / "generations")
    (root / "generations").write_text("not a directory")


def generations_is_a_link_loop(root: Path) -> None:
    shutil.rmtree(root / "generations")
    (root / "generations").symlink_to("generations")


@pytest.mark.parametrize("damage", [generations_is_a_file, generations_is_a_link_loop])
def test_a_broken_generations_entry_still_resumes_and_each_save_says_why(tmp_path, damage, caplog):
    root = tmp_path / "ckpt"
    good_store(root)
    damage(root)
    restarted = CheckpointStore(root, keep=3)
    generation = restarted.generations.claim({"world_size": 1})  # before the fix: FileExistsError, exit 1
    assert generation == 2 and restarted.generations.unclaimed == 2
    assert "generations" in caplog.text and "read-only" in caplog.text
    assert restarted.load_latest()[1]["step"] == 10
    with pytest.raises(CheckpointWriteError, match="generations"):
        restarted.save(state(20), step=20, generation=generation)
    assert [c.step for c in restarted.committed()] == [10]
    assert not [p for p in root.iterdir() if p.name.startswith(".")]  # no temporary left behind


@pytest.mark.parametrize("kind", ["file", "link loop"])
def test_a_store_root_that_is_no_directory_starts_afresh_and_each_save_says_why(tmp_path, kind):
    root = tmp_path / "ckpt"
    if kind == "file":
        root.write_text("not a directory")
    else:
        root.symlink_to("ckpt")
    store = CheckpointStore(root, keep=3)
    generation = store.generations.claim({})
    assert generation == 1
    assert store.load_latest() is None
    with pytest.raises(CheckpointWriteError, match="ckpt"):
        store.save(state(20), step=20, generation=generation)


# Run in a user namespace: a process in it has no capability over files whose owner the namespace
# does not map, so file modes apply to it as to the training uid (the tests may run as root); with
# root mapped it may mount, and a read-only bind mount refuses every write whatever the capabilities.
SCENARIO = textwrap.dedent(
    """
    import json, sys, torch
    from pathlib import Path
    from elastic_trainer.store.checkpoint import CheckpointStore
    from elastic_trainer.store.checkpoint_write import CheckpointWriteError
    root = Path(sys.argv[1])
    result = {}
    store = CheckpointStore(root, keep=3)
    try:
        result["claimed"] = store.generations.claim({})
    except OSError as exc:
        result["claim_error"] = repr(exc)
        store.generations.unclaimed = result["claimed"] = 2
    found = store.load_latest()
    result["resumed"] = None if found is None else found[1]["step"]
    try:
        store.save({"model": {"w": torch.zeros(4)}, "step": 20}, step=20, generation=result["claimed"])
        result["saved"] = True
    except CheckpointWriteError as exc:
        result["save_error"] = str(exc)
    print(json.dumps(result))
    """
)


def run_scenario(tmp_path: Path, root: Path, prefix: str, namespace: tuple[str, ...]) -> dict:
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("no unshare(1)")
    script = tmp_path / "scenario.py"
    script.write_text(SCENARIO)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "training-image")}
    run = subprocess.run(
        [unshare, *namespace, "sh", "-c", f'{prefix} exec "$0" "$1" "$2"', sys.executable, str(script), str(root)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    if run.returncode != 0 and "Operation not permitted" in run.stderr and "mount" in run.stderr:
        pytest.skip(f"this kernel does not let us mount in a user namespace: {run.stderr.strip()[-300:]}")
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_a_read_only_store_resumes_and_each_save_says_why(tmp_path):
    root = tmp_path / "ckpt"
    good_store(root)
    result = run_scenario(
        tmp_path,
        root,
        f"mount --bind {root} {root} && mount -o remount,bind,ro {root} {root} &&",
        ("--user", "--map-root-user", "--mount"),
    )
    assert "claim_error" not in result, result
    assert result["claimed"] == 2 and result["resumed"] == 10
    assert "Read-only file system" in result["save_error"]


def test_a_store_the_training_uid_cannot_write_resumes_and_each_save_says_why(tmp_path):
    root = tmp_path / "ckpt"
    good_store(root)
    for path in (root, root / "generations"):
        path.chmod(0o555)
    try:
        # no uid mapped: no capability over these files, so their owner's bits (r-x) apply to it
        result = run_scenario(tmp_path, root, "", ("--user",))
    finally:
        for path in (root, root / "generations"):
            path.chmod(0o755)
    assert "claim_error" not in result, result
    assert result["claimed"] == 2 and result["resumed"] == 10
    assert "Permission denied" in result["save_error"]
    assert [c.step for c in CheckpointStore(root).committed()] == [10]
