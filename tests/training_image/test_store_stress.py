"""Writers, a pruner and restarting readers on one store at once, as real processes (issue 23).

Two writers of the same generation (what a split job was seen to do), a third process pruning, and a
reader that resumes again and again, each with its own ``CheckpointStore``, all with ``keep=1``.
Bounded: counted loops that also stop at a deadline, so a loaded machine does less, never longer.
What must hold at any load, whatever the interleaving (each seed draws other pauses):

- once a commit has succeeded, a reader finds a checkpoint, unless writers committed at least
  LIST_ROUNDS times during its one call (it lists again after each commit that outran it: a bound,
  so it never spins for ever);
- whatever a reader loads is whole: its tensor is the step its name says;
- at the end every committed checkpoint verifies, and the newest one loads.

Before issue 23's fixes, a clean-up deleting a temporary file by file let a writer commit an empty
checkpoint that the prune then counted (2 of 7 runs), and readers found none 5 times in ~110,000.
"""

from __future__ import annotations

import multiprocessing
import random
import time

import pytest
import torch
from elastic_trainer.store.checkpoint import LIST_ROUNDS, CheckpointStore
from elastic_trainer.store.checkpoint_write import CheckpointWriteError

SAVES = 150  # per writer
RESUMES = 400
DEADLINE_S = 6.0  # per actor; each stops at whichever comes first


def state(step: int) -> dict:
    return {"model": {"w": torch.full((32,), float(step))}, "step": step}


def writer(root, parity, seed, commits, results) -> None:
    rng = random.Random(seed * 10 + parity)
    store = CheckpointStore(root, keep=1)
    done = failed = 0
    stop = time.monotonic() + DEADLINE_S
    for i in range(SAVES):
        if time.monotonic() > stop:
            break
        try:
            store.save(state(2 * i + parity), step=2 * i + parity, generation=1)
        except CheckpointWriteError:  # the other writer's prune took this one's temporary: fine, said so
            failed += 1
        else:
            with commits.get_lock():
                commits.value += 1
            done += 1
        time.sleep(rng.random() * 0.004)
    results.put(("writer", parity, done, failed))


def pruner(root, seed, results) -> None:
    rng = random.Random(seed)
    store = CheckpointStore(root, keep=1)
    stop = time.monotonic() + DEADLINE_S
    runs = 0
    while time.monotonic() < stop and runs < SAVES:
        store.prune(1)
        runs += 1
        time.sleep(rng.random() * 0.004)
    results.put(("pruner", runs))


def reader(root, seed, commits, results) -> None:
    rng = random.Random(seed + 1000)
    loads, outran, bad = 0, 0, []
    stop = time.monotonic() + DEADLINE_S
    for _ in range(RESUMES):
        if time.monotonic() > stop:
            break
        before = commits.value
        found = CheckpointStore(root, keep=1).load_latest()  # a restarted worker: nothing cached
        during = commits.value - before
        if found is None:
            if before > 0 and during < LIST_ROUNDS:
                bad.append(f"no checkpoint found after {before} commits ({during} during the call)")
            elif before > 0:
                outran += 1
        else:
            loaded, meta, chosen = found
            loads += 1
            if not (loaded["step"] == meta["step"] == chosen.step and torch.all(loaded["model"]["w"] == chosen.step)):
                bad.append(f"{chosen.path.name} loaded as step {loaded['step']}")
        time.sleep(rng.random() * 0.002)
    results.put(("reader", loads, outran, bad))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_writers_pruner_and_readers_never_leave_the_store_without_a_good_checkpoint(tmp_path, seed):
    root = tmp_path / "ckpt"
    CheckpointStore(root).generations.claim({})
    context = multiprocessing.get_context("fork")  # torch is imported already: no second import per actor
    commits = context.Value("i", 0)
    results = context.Queue()
    actors = [
        context.Process(target=writer, args=(root, 0, seed, commits, results)),
        context.Process(target=writer, args=(root, 1, seed, commits, results)),
        context.Process(target=pruner, args=(root, seed, results)),
        context.Process(target=reader, args=(root, seed, commits, results)),
    ]
    for actor in actors:
        actor.start()
    reports = [results.get(timeout=DEADLINE_S + 60) for _ in actors]
    for actor in actors:
        actor.join(30)
        assert actor.exitcode == 0
    by_kind = {report[0]: report for report in reports if report[0] != "writer"}
    written = sum(report[2] for report in reports if report[0] == "writer")
    _, loads, outran, bad = by_kind["reader"]
    assert bad == []
    assert written > 0 and loads > 0
    store = CheckpointStore(root, keep=1)
    committed = store.committed()
    assert committed, "the last good checkpoint was lost"
    for checkpoint in committed:
        store.verify(checkpoint)  # nothing empty or partial was left under a committed name
    loaded, _, chosen = store.load_latest()
    assert chosen == committed[0] and loaded["step"] == chosen.step
    print(f"seed {seed}: {written} commits, {loads} resumes, {outran} outrun by {LIST_ROUNDS}+ commits")
