"""The training loop's checkpoints: when to copy the state, how it is written, what a failure means.

Owned here, for the restart-mode loop (trainer.py): the checkpoint store of this worker group,
the host snapshot a checkpoint blocks training for (staging.py), the one background write in
flight (async_writer.py, issue 11), and how each write's outcome turns into an exit code (a
failed periodic save is reported and training goes on; a failed stop or final save exits
EXIT_CHECKPOINT_FAILED; a fenced writer exits EXIT_FENCED). The loop decides *when* (every
``checkpoint_every`` steps, a stop, the last step); this module does the rest.

A worker on its way out (a stop's save, or leaving on an error) is ``leaving``: the prune after
its commit, which it waits for, hashes no older checkpoint (checkpoint.py's docstring).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist

from elastic_trainer import EXIT_CHECKPOINT_FAILED, EXIT_FENCED, EXIT_MEMBERSHIP_CHANGE
from elastic_trainer.comm import all_gather_objects
from elastic_trainer.events import emit, log
from elastic_trainer.rng import rng_state
from elastic_trainer.signals import StopRequest
from elastic_trainer.store.async_writer import AsyncWriter, WriteOutcome
from elastic_trainer.store.checkpoint import Checkpoint, CheckpointStore
from elastic_trainer.store.checkpoint_write import CheckpointWriteError
from elastic_trainer.store.fence import StaleGenerationError
from elastic_trainer.store.staging import HostSnapshot

if TYPE_CHECKING:
    from elastic_trainer.train_config import TrainConfig

# How long a worker leaving on an error waits for its checkpoint write in flight to commit (the
# survivors resume from it): a single-format write needs no peer; a sharded one waits on peers
# that may be gone, and must not hold up the restart for long.
SETTLE_WRITE_S = {"single": 60.0, "sharded": 10.0}


class LoopCheckpoints:
    """One worker's checkpoints in the restart-mode loop; rank 0 commits them.

    ``stall``: the fault injection of the kill-while-writing test, (step, seconds) to wait after
    that step's checkpoint is written and before it is committed (trainer.FAULT_STALL_COMMIT).
    """

    def __init__(self, cfg: TrainConfig, *, rank: int, world: int, device: torch.device, stop: StopRequest,
                 stall: tuple[int, float] | None = None) -> None:
        self.cfg, self.rank, self.world, self.device, self.stall = cfg, rank, world, device, stall
        self.leaving = False  # set on the way out: see the module docstring
        self.store = CheckpointStore(cfg.checkpoint_dir, keep=cfg.keep_checkpoints,
                                     in_a_hurry=lambda: self.leaving or bool(stop))
        # Checkpoints (issue 11): staged into host buffers allocated once (pinned on CUDA), written
        # by a background thread, one write in flight; a failure is reported at the next wait.
        self.snapshot = HostSnapshot(pin=device.type == "cuda")
        self.writer = AsyncWriter()
        self.failed_save = 0  # EXIT_CHECKPOINT_FAILED once a stop or final checkpoint could not be written
        self.abandoned = False  # a write outlived --checkpoint-write-timeout-s: nothing more waits for it
        self.group = None
        if cfg.checkpoint_format == "sharded":
            from elastic_trainer.store import sharded

            sharded.require_numpy()
            # the sharded write's collectives run in the writer thread: a group of their own
            self.group = dist.new_group(backend="gloo")

    def poll(self) -> int:
        """Report a background write that has ended (now, not at the next checkpoint); as ``report``."""
        return self.report(self.writer.poll()) if self.writer.busy else 0

    def save(self, model, optimizer, scheduler, sampler, step, generation, reason) -> int:
        """Copy this step's state to host memory (all that blocks training) and write it in the background.

        One write in flight (issue 11): the previous one is waited for and reported first. A stop and
        the last step also wait for their own write, as does every checkpoint with
        ``--no-async-checkpoint``. Returns EXIT_FENCED if this group must stop, else 0.
        """
        # every rank's RNG state, so a resume at the same world size continues exactly
        rng_states = all_gather_objects(rng_state(), self.device)
        sharded_format = self.cfg.checkpoint_format == "sharded"
        if self.rank != 0 and not sharded_format:
            return 0  # the single format: rank 0 writes everything
        self.leaving = self.leaving or reason == "stop"  # also when another rank got the notice
        started = time.monotonic()
        code = self._finish_write()
        if code:
            return code
        waited = time.monotonic() - started
        epoch, _ = sampler.position(step)
        extra = {
            "scheduler": scheduler.state_dict() if scheduler is not None else None,
            "rng": rng_states,
            "sampler": sampler.state_dict(step),
            "step": step,
            "epoch": epoch,
            "total_steps": self.cfg.total_steps,  # the schedule's horizon, for a resume with another (schedule.py)
        }
        synchronous = reason != "periodic" or not self.cfg.async_checkpoint
        beside = () if synchronous else self._changed_by_the_optimizer_only(model, optimizer)
        if sharded_format:
            from elastic_trainer.store import sharded

            staged = self.snapshot.take({"tensors": sharded.tensors_of(model, optimizer), "extra": extra},
                                        beside=beside)
        else:
            staged = self.snapshot.take({"model": model.state_dict(), "optimizer": optimizer.state_dict(), **extra},
                                        beside=beside)
        blocked = time.monotonic() - started
        info = {"world_size": self.world, "epoch": epoch, "reason": reason}
        stall = self.stall

        def before_commit(tmp: Path) -> None:
            if stall and stall[0] == step:
                emit("ckpt_writing", step=step, tmp=str(tmp))
                time.sleep(stall[1])

        def write() -> Checkpoint | None:
            began = time.monotonic()
            self.snapshot.ready()  # the copies that overlap with the next step (take's ``beside``) are done
            if sharded_format:
                saved = sharded.save(self.store, staged["tensors"], staged["extra"], step=step, generation=generation,
                                     group=self.group, info=info, before_commit=before_commit)
            else:
                saved = self.store.save(staged, step=step, generation=generation, info=info,
                                        before_commit=before_commit)
            if saved is not None:  # committed (rank 0)
                write_s = time.monotonic() - began
                emit("ckpt", step=step, gen=generation, reason=reason, path=str(saved.path),
                     seconds=round(time.monotonic() - started, 3),
                     blocked_s=round(blocked + write_s if synchronous else blocked, 3),
                     write_s=round(write_s, 3), waited_s=round(waited, 3))
            return saved

        self.writer.submit(write, step=step, generation=generation, reason=reason)
        return self._finish_write() if synchronous else 0

    def _changed_by_the_optimizer_only(self, model, optimizer) -> set[int]:
        """Storages of parameters and optimizer state: on CUDA a snapshot copies them beside the next step.

        Only ``optimizer.step()`` changes them (the loop waits for the copy before it); a task whose
        forward pass changed parameters in place would need ``--no-async-checkpoint``.
        """
        if self.device.type != "cuda":
            return set()
        storages = {param.untyped_storage().data_ptr() for param in model.parameters()}
        for buffers in optimizer.state.values():
            storages.update(t.untyped_storage().data_ptr() for t in buffers.values() if isinstance(t, torch.Tensor))
        return storages

    def prepare_staging(self, model, optimizer, step, generation) -> None:
        """Make the host buffers in the background after the first step, once the optimizer state exists.

        Allocating and page-locking them takes a while for a state of gigabytes: done here, the first
        checkpoint only copies, and blocks training no longer than every later one.
        """
        if self.cfg.checkpoint_format == "sharded":
            from elastic_trainer.store import sharded

            layout = self.snapshot.plan({"tensors": sharded.tensors_of(model, optimizer)})
        elif self.rank == 0:
            layout = self.snapshot.plan({"model": model.state_dict(), "optimizer": optimizer.state_dict()})
        else:
            return  # the single format: rank 0 writes everything
        self.writer.submit(lambda: self.snapshot.allocate(layout), step=step, generation=generation, reason="staging")

    def _finish_write(self) -> int:
        """Wait for the write in flight, at most until its bound, and ``report`` it.

        Issue 23: a write that never ends (a store that stopped answering, a peer of a sharded write
        stuck in a collective with no timeout) would hold the GPUs while training nothing. Past
        ``--checkpoint-write-timeout-s`` after the write began, the worker leaves with
        EXIT_MEMBERSHIP_CHANGE: its agent restarts the group, which resumes from the last committed
        checkpoint. The writer thread is a daemon (async_writer.py), so it does not hold up the exit.
        """
        limit_s = self.cfg.checkpoint_write_timeout_s
        try:
            return self.report(self.writer.wait_within(limit_s))
        except TimeoutError as exc:
            context = self.writer.context
            self.abandoned = True
            log.error("the %s checkpoint of step %s: %s (--checkpoint-write-timeout-s=%g); leaving with exit %d, the "
                      "group restarts and resumes from the last committed checkpoint", context.get("reason"),
                      context.get("step"), exc, limit_s, EXIT_MEMBERSHIP_CHANGE)
            emit("exit", rank=self.rank, step=context.get("step"), code=EXIT_MEMBERSHIP_CHANGE, reason="stalled",
                 waiting_for="the checkpoint write", limit_s=limit_s)
            return EXIT_MEMBERSHIP_CHANGE

    def report(self, outcome: WriteOutcome | None) -> int:
        """Say how a checkpoint write ended: EXIT_FENCED if this group must stop, else 0.

        The contract of a synchronous save, kept for a background one: a failed periodic save is
        reported (log and ``ckpt_failed``) and training goes on; a failed stop or final save makes
        the exit code EXIT_CHECKPOINT_FAILED; anything but the store failing is a bug, raised here.
        """
        if outcome is None or outcome.ok:
            return 0
        step, generation, reason = (outcome.context[key] for key in ("step", "generation", "reason"))
        error = outcome.error
        if isinstance(error, StaleGenerationError):
            log.error("%s", error)
            emit("fenced", rank=self.rank, step=step, gen=generation)
            return EXIT_FENCED
        if not isinstance(error, CheckpointWriteError):
            raise error
        # e.g. the store is full: the previous checkpoints stand
        log.error("the %s checkpoint of step %d failed: %s", reason, step, error)
        if self.rank == 0:  # a sharded save fails on every rank: one event
            emit("ckpt_failed", rank=self.rank, step=step, gen=generation, reason=reason, error=str(error))
        if reason != "periodic":
            self.failed_save = EXIT_CHECKPOINT_FAILED
        return 0

    def settle(self) -> None:
        """Leaving on an error: let a write in flight commit if it can, briefly (see SETTLE_WRITE_S)."""
        if not self.writer.busy or self.abandoned:
            return
        self.leaving = True
        try:
            outcome = self.writer.wait(SETTLE_WRITE_S[self.cfg.checkpoint_format])
        except TimeoutError as exc:
            log.warning("leaving without the checkpoint write in flight: %s", exc)
            return
        if not outcome.ok:
            log.warning("the checkpoint write in flight failed: %s", outcome.error)
