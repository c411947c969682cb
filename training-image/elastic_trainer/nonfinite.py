"""A step whose loss is not finite does not update the weights; too many in a row end the worker.

One NaN or inf loss, once applied, makes every weight NaN, and the next checkpoints would then
rotate the last good ones out of the store (``--keep-checkpoints``): the job could no longer be
saved by resuming. So the trainer reads the step's global loss (the sum every rank already
all-reduces, so all ranks decide alike) *before* the optimizer step and skips the update when it
is NaN or infinite: optimizer and weights stay as they were, the step counter and the learning-
rate schedule still advance (the schedule stays a function of the global step), and that step's
samples are not learned from. This is what mixed-precision loss scaling does with an overflowed
step (torch.amp.GradScaler skips ``optimizer.step``).

More than ``--max-nonfinite-steps`` such steps *in a row* mean the run has diverged, or a device
computes wrong values: the worker then writes no checkpoint and exits EXIT_NONFINITE. No periodic
checkpoint is written inside such a run of steps either, so the workers, restarted like after any
failure, resume from before it: a transient fault (a bit flip, a bad batch read) does not come
back, while a truly diverged run diverges again at the same step, uses up its restarts, and the
job fails (training-image/README.md, "Non-finite loss").
"""

from __future__ import annotations

import math
import os

from elastic_trainer.events import emit, log

# Fault injection for tests: comma-separated global steps whose loss is made NaN ("5,6,7" or "5-9").
FAULT_NAN_STEPS = "TORCHFLEET_FAULT_NAN_STEPS"


def nan_steps(environ=os.environ) -> frozenset[int]:
    steps: set[int] = set()
    for part in filter(None, (p.strip() for p in environ.get(FAULT_NAN_STEPS, "").split(","))):
        first, dash, last = part.partition("-")
        if not first.isdigit() or (dash and not last.isdigit()):
            raise ValueError(f"{FAULT_NAN_STEPS}: {part!r} is not a step or a range of steps like 5-9")
        steps.update(range(int(first), int(last or first) + 1))
    return frozenset(steps)


class NonFiniteGuard:
    """Counts the non-finite steps in a row; says whether a step's update may be applied."""

    def __init__(self, limit: int, report: bool) -> None:
        self.limit = limit  # more than this many in a row end the worker; 0: the first one does
        self.report = report  # emit the events (rank 0, or every in-place group)
        self.in_a_row = 0
        self.skipped = 0

    def admits(self, loss_sum: float, step: int, grad_norm: float | None = None, **fields: object) -> bool:
        """True: apply the update of ``step`` (1-based, the step being taken). False: skip it.

        ``grad_norm``: the gradient's norm where the trainer computed it anyway (--clip-grad-norm);
        a finite loss can still overflow in the backward pass, and clipping a NaN gradient keeps it NaN.
        """
        if math.isfinite(loss_sum) and (grad_norm is None or math.isfinite(grad_norm)):
            self.in_a_row = 0
            return True
        self.in_a_row += 1
        self.skipped += 1
        if self.report:
            what = "loss" if not math.isfinite(loss_sum) else "gradient norm"
            log.warning("step %d: the %s is not finite; its update is skipped (%d in a row, at most %d)",
                        step, what, self.in_a_row, self.limit)
            norm = {} if grad_norm is None else {"grad_norm": str(grad_norm)}
            emit("nonfinite", step=step, loss=str(loss_sum), in_a_row=self.in_a_row, **norm, **fields)
        return False

    @property
    def gave_up(self) -> bool:
        return self.in_a_row > self.limit
