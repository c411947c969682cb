"""How an in-place run ends: the time limit, the final checkpoint and the final model, waited for by every group.

The Kubernetes Job succeeds at the first group that exits 0 and then stops the rest
(torchfleet/jobs/inplace_job.py, successPolicy), so no group may exit 0 before what ends the run is
on the store: the writer (replica rank 0 of the last quorum) commits the stop or final checkpoint
and exports the model; every other group waits for them, at most ``TORCHFLEET_INPLACE_FINAL_WAIT_S``.
Past it, a group that saw no checkpoint exits ``EXIT_MEMBERSHIP_CHANGE`` (its node starts it again,
and whichever group holds the state writes it); one that saw no export exits 0 (the final
checkpoint holds the same weights).

A mix-in of ``_InplaceRun`` (group.py): it reads the run's ``manager``, ``store``, ``stop``, ``cfg``,
``model``, ``group``, ``trained`` and ``final_wait_s``, and writes through its ``_checkpoint``.
"""

from __future__ import annotations

import time

from elastic_trainer import EXIT_MEMBERSHIP_CHANGE, outputs
from elastic_trainer.events import emit, log


class Ending:
    def _time_limit(self, step: int, replica_rank: int | None) -> int:
        """Past ``TORCHFLEET_STOP_AT``: replica rank 0 commits the stop checkpoint, the others wait for it; exit 0."""
        emit("time_limit", group=self.group, step=step)
        if replica_rank == 0:
            code = self._checkpoint(None, step, "stop") or self.failed_save()
        else:
            code = self._await_committed(step, "stop")
        emit("exit", group=self.group, step=step, code=code, reason="time_limit")
        return code

    def _finish(self, step: int) -> int:
        """The last step: the group of replica rank 0 writes the final checkpoint; the others wait for it.

        The Kubernetes Job succeeds at the first group that exits 0 and stops the rest
        (torchfleet/jobs/inplace_job.py, successPolicy), so no group may exit 0 before the final
        checkpoint is committed. The same group then exports the final model (outputs.py); a group that
        resumed an already finished job from the store exports it if it is missing, as trainer.py does.
        """
        writer = self.manager.participating_rank() == 0
        if self.trained and writer:  # not a group that found the job done
            self._checkpoint(None, step, "final")
            code = self.failed_save()
        else:
            code = self._await_committed(step, "final")
        if code == 0 and writer:
            outputs.finish(self.model, self.cfg.output_dir, step, self.manager.num_participants())
        elif code == 0 and self.cfg.output_dir is not None:
            self._await_export(step)
        return code

    def _await_committed(self, step: int, what: str) -> int:
        """Wait for the writer's checkpoint of ``step`` (``what``: final or stop), at most ``final_wait_s``."""
        limit = time.monotonic() + self.final_wait_s
        started = time.monotonic()
        while not any(c.step >= step for c in self.store.committed()):
            if self.stop:  # a spot notice: the writer's group finishes the job
                return 128 + self.stop.signum
            if time.monotonic() > limit:
                # The writer died before committing it: start again, so that whichever group holds the
                # state trains on from the newest checkpoint and writes the final one.
                log.warning("no %s checkpoint of step %d after %.0f s", what, step, time.monotonic() - started)
                emit("exit", group=self.group, step=step, code=EXIT_MEMBERSHIP_CHANGE, reason=f"no {what} checkpoint")
                return EXIT_MEMBERSHIP_CHANGE
            time.sleep(0.2)
        emit(f"{what}_seen", group=self.group, step=step, waited_s=round(time.monotonic() - started, 3))
        return 0

    def _await_export(self, step: int) -> None:
        """Wait (at most ``final_wait_s``) for the writer's export: exiting 0 first would let the Job stop it.

        A failed export is the writer's to report (outputs.finish); it then exits 0 itself, and on
        Kubernetes the Job ends this wait. Past the bound this group exits 0 anyway: the final
        checkpoint holds the same weights.
        """
        limit = time.monotonic() + self.final_wait_s
        while outputs.exported_step(self.cfg.output_dir) != step:
            if self.stop or time.monotonic() > limit:
                log.warning("no exported model of step %d in %s", step, self.cfg.output_dir)
                return
            time.sleep(0.2)
