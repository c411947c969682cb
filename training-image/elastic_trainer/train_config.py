"""What a training script configures: the trainer's flags, their defaults from the pod's environment.

``TrainConfig.add_arguments`` adds the trainer's flags to a script's parser and ``from_args``
reads them back (training-image/README.md, "The elastic_trainer library"); a bad value is a
usage error naming the flag. Scripts import it from ``elastic_trainer.trainer``, with ``train``.
"""

from __future__ import annotations

import argparse
import math
import os
from dataclasses import dataclass
from pathlib import Path

# Set on every pod of a job the torchfleet CLI submits (torchfleet/jobs/pod_template.py environment()).
ENV_CHECKPOINT_DIR = "TORCHFLEET_CHECKPOINT_DIR"
ENV_LOADER_WORKERS = "TORCHFLEET_DATALOADER_WORKERS"
ENV_OUTPUT_DIR = "TORCHFLEET_OUTPUT_DIR"  # the final model goes there (outputs.py)
CHECKPOINT_FORMATS = ("single", "sharded")
SCHEDULE_ON_EXTEND = ("rebuild", "keep")  # schedule.py: what a changed --total-steps does to the LR schedule


def _at_least(minimum: int):
    """An argparse type: a whole number >= minimum, else a usage error naming the value."""

    def parse(text: str) -> int:
        value = int(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    parse.__name__ = f"int >= {minimum}"
    return parse


def _positive_float(text: str) -> float:
    """An argparse type: a finite number > 0, else a usage error naming the value."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan  # "abc": the same message as 0 or nan, not argparse's "invalid _positive_float value"
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return value


@dataclass(frozen=True)
class TrainConfig:
    checkpoint_dir: Path
    total_steps: int
    global_batch_size: int
    checkpoint_every: int = 50
    keep_checkpoints: int = 3
    seed: int = 0
    tensorboard_dir: Path | None = None
    num_workers: int = 0
    step_delay_s: float = 0.0  # only to pace demos and tests on a tiny model
    progress_every: int = 1  # step events; the first step of every worker group is always reported
    async_checkpoint: bool = True  # training blocks only for the copy to host memory (issue 11)
    checkpoint_format: str = "single"  # one of CHECKPOINT_FORMATS
    max_nonfinite_steps: int = 10  # NaN/inf losses in a row whose updates are skipped (nonfinite.py)
    clip_grad_norm: float | None = None  # the gradient's largest L2 norm (over all parameters); None: no clipping
    schedule_on_extend: str = "rebuild"  # one of SCHEDULE_ON_EXTEND (schedule.py)
    output_dir: Path | None = None  # the final model is exported there (outputs.py); None: not exported
    eval_every: int = 0  # steps between the task's evaluate() calls; 0: after the last step only
    checkpoint_write_timeout_s: float = 1800.0  # a write still running after this ends the worker (checkpointing.py)

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        # A job submitted with the torchfleet CLI has these in its pods' environment
        # (torchfleet/jobs/pod_template.py): defaults from there, so a script needs no flags for them.
        env_checkpoint_dir = os.environ.get(ENV_CHECKPOINT_DIR) or None
        parser.add_argument("--checkpoint-dir", type=Path, required=env_checkpoint_dir is None,
                            default=env_checkpoint_dir, help=f"on the shared store (default: ${ENV_CHECKPOINT_DIR})")
        parser.add_argument("--total-steps", type=_at_least(1), required=True, help="global optimizer steps")
        parser.add_argument("--global-batch-size", type=_at_least(1), required=True, help="fixed at any world size")
        # Every flag says its default (issue 22: these three showed neither help nor default); the script
        # owns the parser, so its formatter cannot be chosen here.
        parser.add_argument("--checkpoint-every", type=_at_least(1), default=50,
                            help="steps between periodic checkpoints; a stop and the last step always save one "
                                 "(default: 50)")
        parser.add_argument("--keep-checkpoints", type=_at_least(1), default=3,
                            help="newest committed checkpoints kept on the store, older ones pruned (default: 3)")
        parser.add_argument("--seed", type=int, default=0,
                            help="initial weights, data order and each rank's random streams; a resume must use "
                                 "the checkpoint's (default: 0)")
        parser.add_argument("--tensorboard-dir", type=Path, default=None,
                            help="rank 0 writes TensorBoard scalars there (default: none written)")
        # argparse converts a string default with `type`: a bad value is a usage error naming the flag
        parser.add_argument("--num-workers", type=_at_least(0), default=os.environ.get(ENV_LOADER_WORKERS) or 0,
                            help=f"data-loader processes per rank (default: ${ENV_LOADER_WORKERS}, else 0)")
        parser.add_argument("--step-delay-s", type=float, default=0.0,
                            help="sleep per step, to pace demos and tests on a tiny model (default: 0)")
        parser.add_argument("--progress-every", type=_at_least(1), default=1,
                            help="steps between progress events (default: 1)")
        parser.add_argument("--async-checkpoint", action=argparse.BooleanOptionalAction, default=True,
                            help="write checkpoints in the background: training blocks only while the state is "
                                 "copied to host memory (default: on)")
        parser.add_argument("--checkpoint-format", choices=CHECKPOINT_FORMATS, default="single",
                            help="single: rank 0 writes one state.pt; sharded: every rank writes part of the "
                                 "bytes (torch.distributed.checkpoint), for states too big for one writer")
        parser.add_argument("--clip-grad-norm", type=_positive_float, default=None, metavar="NORM",
                            help="scale the gradient down to this L2 norm (over all parameters) when it is "
                                 "larger, before each update (default: no clipping)")
        parser.add_argument("--output-dir", type=Path, default=os.environ.get(ENV_OUTPUT_DIR) or None,
                            help=f"rank 0 exports the final model to DIR/model after the last step (default: "
                                 f"${ENV_OUTPUT_DIR}; none without it)")
        parser.add_argument("--eval-every", type=_at_least(0), default=0,
                            help="steps between the task's evaluate() calls, if it has one (default 0: after the "
                                 "last step only)")
        parser.add_argument("--schedule-on-extend", choices=SCHEDULE_ON_EXTEND, default="rebuild",
                            help="resuming a checkpoint written for another --total-steps: rebuild the task's LR "
                                 "schedule for the new total at the resumed step (warm-up not repeated), or keep the "
                                 "saved one and its old horizon (default: rebuild; training-image/README.md)")
        parser.add_argument("--checkpoint-write-timeout-s", type=_positive_float, default=1800.0, metavar="SECONDS",
                            help="a checkpoint write (or a wait for one) still running this long after it began "
                                 "ends the worker with exit 75: its group restarts and resumes from the last "
                                 "committed checkpoint (default: 1800, torch's default process-group timeout)")
        parser.add_argument("--max-nonfinite-steps", type=_at_least(0), default=10,
                            help="steps in a row whose NaN or infinite loss only skips their update; one more "
                                 "ends the worker without saving, to resume from the last checkpoint (default: 10)")

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> TrainConfig:
        return cls(
            checkpoint_dir=args.checkpoint_dir, total_steps=args.total_steps,
            global_batch_size=args.global_batch_size, checkpoint_every=args.checkpoint_every,
            keep_checkpoints=args.keep_checkpoints, seed=args.seed, tensorboard_dir=args.tensorboard_dir,
            num_workers=args.num_workers, step_delay_s=args.step_delay_s, progress_every=args.progress_every,
            async_checkpoint=args.async_checkpoint, checkpoint_format=args.checkpoint_format,
            max_nonfinite_steps=args.max_nonfinite_steps, clip_grad_norm=args.clip_grad_norm,
            schedule_on_extend=args.schedule_on_extend,
            output_dir=args.output_dir, eval_every=args.eval_every,
            checkpoint_write_timeout_s=args.checkpoint_write_timeout_s,
        )
