"""A replica group and the shared store: its resume, the generation it claims, its background writes.

A group resumes from the store only when no live group is ahead of it (a job that starts, or
restarts after losing every group); otherwise it heals from a peer (group.py).

Only the writer of a step writes: replica rank 0 of the step's quorum (periodic, stop and final
checkpoints); a new quorum makes it claim a new generation (store/fence.py), so a group cut off from
the others cannot commit over the newer quorum's checkpoints. A failed or fenced periodic write is
reported and training goes on (the state is live in every group); a failed stop or final one makes
the worker exit ``EXIT_CHECKPOINT_FAILED``.

A mix-in of ``_InplaceRun`` (group.py): it reads the run's ``manager``, ``store``, ``writer``,
``snapshot``, ``model``, ``optimizer``, ``scheduler``, ``sampler``, ``task``, ``cfg`` and ``group``.
"""

from __future__ import annotations

import time

import torch

from elastic_trainer import EXIT_CHECKPOINT_FAILED, schedule
from elastic_trainer.data.sampler import ElasticBatchSampler
from elastic_trainer.events import emit, log
from elastic_trainer.hooks import REQUIRED_KEYS, stall_commit_at
from elastic_trainer.store import CheckpointWriteError, StaleGenerationError, WriteOutcome


class GroupCheckpoints:
    def _resume_from_store(self) -> int:
        """Load the newest checkpoint of the shared store: only when no live group holds a newer state."""
        found = self.store.load_latest("cpu", required=REQUIRED_KEYS,
                                       on_skip=lambda c, reason: emit("ckpt_skipped", name=c.path.name, reason=reason))
        if found is None:
            return 0
        state, meta, _ = found
        saved = state["sampler"]
        if (saved["global_batch"], saved["seed"]) != (self.cfg.global_batch_size, self.cfg.seed):
            raise ValueError(
                f"the checkpoint was written with --global-batch-size={saved['global_batch']} "
                f"--seed={saved['seed']}; this run has {self.cfg.global_batch_size} and {self.cfg.seed}"
            )
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        step = ElasticBatchSampler.step_from_state(saved, len(self.task.dataset))
        # a checkpoint of another --total-steps: the schedule's horizon follows the new one (schedule.py)
        self.scheduler = schedule.restore(self.task, self.optimizer, self.scheduler, state, step,
                                          self.cfg.total_steps, self.cfg.schedule_on_extend)
        self.manager.load_state_dict({"step": step, "batches_committed": state.get("batches_committed", 0)})
        emit("resumed", step=step, group=self.group, from_gen=meta["generation"], source="store")
        return step

    _failed_save = 0

    def failed_save(self) -> int:
        return self._failed_save

    def _claim(self) -> int:
        """A new generation whenever this group becomes the writer of a new quorum (checkpoint.py's fence).

        A writer of an older quorum (a group cut off from the others) then cannot commit over it.
        """
        quorum_id = getattr(self.manager, "_quorum_id", -1)
        if quorum_id != self.writer_quorum or not self.generation:
            self.generation = self.store.generations.claim({"group": self.group, "quorum": quorum_id,
                                                            "claimed": time.time(), "mode": "inplace"})
            self.writer_quorum = quorum_id
        return self.generation

    def _checkpoint(self, sampler, step: int, reason: str) -> int:
        sampler = sampler or self.sampler
        code = self._report(self.writer.wait())
        if code:
            return code
        try:
            generation = self._claim()
        except OSError as exc:
            log.error("could not claim a generation for the %s checkpoint of step %d: %s", reason, step, exc)
            emit("ckpt_failed", group=self.group, step=step, reason=reason, error=str(exc))
            if reason != "periodic":
                self._failed_save = EXIT_CHECKPOINT_FAILED
            return 0
        epoch, _ = sampler.position(step)
        started = time.monotonic()
        staged = self.snapshot.take({
            "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict() if self.scheduler is not None else None,
            "rng": [{"torch": torch.get_rng_state()}], "sampler": sampler.state_dict(step), "step": step,
            "epoch": epoch, "batches_committed": self.manager.batches_committed(),
            "total_steps": self.cfg.total_steps,  # the schedule's horizon, for a resume with another (schedule.py)
        })
        blocked = time.monotonic() - started
        info = {"world_size": 1, "epoch": epoch, "reason": reason, "recovery": "inplace", "group": self.group}

        stall = stall_commit_at()  # fault injection (tests): this step's checkpoint is slow to write

        def write():
            began = time.monotonic()
            if stall and stall[0] == step:
                time.sleep(stall[1])
            saved = self.store.save(staged, step=step, generation=generation, info=info)
            emit("ckpt", step=step, gen=generation, group=self.group, reason=reason, path=str(saved.path),
                 blocked_s=round(blocked, 3), write_s=round(time.monotonic() - began, 3))
            return saved

        self.writer.submit(write, step=step, generation=generation, reason=reason)
        if reason != "periodic" or not self.cfg.async_checkpoint:
            return self._report(self.writer.wait())
        return 0

    def _report(self, outcome: WriteOutcome | None) -> int:
        """A failed or fenced periodic write is reported and training goes on (the state is live)."""
        if outcome is None or outcome.ok:
            return 0
        step, reason = outcome.context["step"], outcome.context["reason"]
        error = outcome.error
        if isinstance(error, StaleGenerationError):
            # another group claimed a newer quorum's generation meanwhile: its checkpoints win
            log.warning("the %s checkpoint of step %d was fenced: %s", reason, step, error)
            emit("fenced", group=self.group, step=step, reason=reason)
            return 0
        if not isinstance(error, CheckpointWriteError):
            raise error
        log.error("the %s checkpoint of step %d failed: %s", reason, step, error)
        emit("ckpt_failed", group=self.group, step=step, reason=reason, error=str(error))
        if reason != "periodic":
            self._failed_save = EXIT_CHECKPOINT_FAILED
        return 0

    def _settle_write(self) -> None:
        if self.writer.busy:
            try:
                self.writer.wait(60.0)
            except TimeoutError as exc:
                log.warning("leaving without the checkpoint write in flight: %s", exc)
