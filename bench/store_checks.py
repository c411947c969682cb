"""What issue 23's checks add to a checkpoint's save and resume, beside what they cost already.

    python bench/store_checks.py                    # a 64 MB state, 9 repeats, in a temporary directory
    python bench/store_checks.py --mb 512 --dir /mnt/efs/bench --repeats 5 --json

Issue 23 added, on the hot paths of the checkpoint store (training-image/elastic_trainer/):

- ``read_meta``: meta.json opened without following links or blocking, read to at most 4 MiB,
  and type-checked (checkpoint_meta.py): once per candidate at a resume, once per rank's load;
- ``check_files``: every listed file stat'ed (a regular file of its size): after each commit's
  rename (``_confirm``, with the fingerprint the verdict is kept under) and before every load;
- the verdict cache's key with ``st_ctime_ns``, and the prune's second look at the kept checkpoints
  before it deletes (both a scandir of one directory);
- removal by rename to the trash before deleting (``remove_small_dir_us`` against ``rmtree_alone_us``).

Each is timed alone (median of ``--repeats``, in microseconds), beside the whole operations it is
part of: ``save`` (torch.save, fsyncs, commit, prune with keep=2) and a restarted worker's
``load_latest`` (hashing the newest checkpoint back, then torch.load). Prints a table, or one JSON
object with ``--json``. The figures depend on the disk: run it on the store the jobs use.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "training-image"))

import torch  # after the path to the image's library
from elastic_trainer.store.checkpoint import CheckpointStore
from elastic_trainer.store.checkpoint_verify import Verdicts, check_files, read_meta
from elastic_trainer.store.checkpoint_write import remove


def timed(action, repeats: int) -> float:
    """Median seconds of ``action()`` over ``repeats`` runs."""
    runs = []
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        runs.append(time.perf_counter() - started)
    return statistics.median(runs)


def measure(root: Path, megabytes: int, repeats: int) -> dict:
    state = {"model": {"w": torch.randn(megabytes * (1 << 20) // 4)}, "step": 0}
    store = CheckpointStore(root, keep=2)
    generation = store.generations.claim({})
    step = iter(range(1, 10**6))
    save_s = timed(lambda: store.save(state, step=next(step), generation=generation), repeats)
    newest = store.committed()[0]
    meta = read_meta(newest.path)
    load_s = timed(lambda: CheckpointStore(root, keep=2).load_latest(), repeats)

    def removal(how) -> float:
        """Seconds ``how`` takes to remove a small directory (made beforehand, not timed)."""
        victim = root / "victim"
        victim.mkdir()
        (victim / "state.pt").write_bytes(b"x")
        started = time.perf_counter()
        how(victim)
        return time.perf_counter() - started

    added = {
        "read_meta_us": timed(lambda: read_meta(newest.path), repeats * 20) * 1e6,
        "check_files_us": timed(lambda: check_files(newest.path, meta), repeats * 20) * 1e6,
        "fingerprint_us": timed(lambda: Verdicts.fingerprint(newest.path), repeats * 20) * 1e6,
        "remove_small_dir_us": statistics.median(removal(remove) for _ in range(repeats * 5)) * 1e6,
        "rmtree_alone_us": statistics.median(removal(shutil.rmtree) for _ in range(repeats * 5)) * 1e6,
    }
    # per save: _confirm (fingerprint + check_files) and the prune's second look (one fingerprint per kept one)
    per_save_us = added["fingerprint_us"] * (1 + store.keep) + added["check_files_us"]
    # per resume: read_meta (also done before issue 23, then unbounded and unchecked) and check_files
    per_resume_us = added["read_meta_us"] + added["check_files_us"]
    return {
        "state_mb": megabytes,
        "repeats": repeats,
        "store": str(root),
        "save_s": round(save_s, 4),
        "load_latest_s": round(load_s, 4),
        **{key: round(value, 1) for key, value in added.items()},
        "added_per_save_us": round(per_save_us, 1),
        "added_per_save_pct": round(100 * per_save_us / 1e6 / save_s, 4),
        "checks_per_resume_us": round(per_resume_us, 1),
        "checks_per_resume_pct": round(100 * per_resume_us / 1e6 / load_s, 4),
        "load": os.getloadavg()[0],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=64, help="state size in MB (default 64)")
    parser.add_argument("--repeats", type=int, default=9, help="runs per figure, the median is reported")
    parser.add_argument("--dir", type=Path, help="a directory on the store to measure (default: a temporary one)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.mb < 1 or args.repeats < 1:
        parser.error("--mb and --repeats must be at least 1")
    with tempfile.TemporaryDirectory(dir=args.dir) as scratch:
        figures = measure(Path(scratch) / "ckpt", args.mb, args.repeats)
    if args.json:
        print(json.dumps(figures))
    else:
        for key, value in figures.items():
            print(f"{key:24} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
