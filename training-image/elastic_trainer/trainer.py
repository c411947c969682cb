"""The elastic training loop.

One call, ``train(task, config)``, run by every worker torchrun starts:

1. heavy imports and one optimizer construction *before* joining the process group (docs/facts.md:
   of the ~2 s a restarted worker needs, about 1 s is ``import torch`` and about 1 s a lazy
   import the first ``torch.optim`` constructor triggers; paying them here overlaps them with
   the slowest peer's start instead of adding them after the group formed);
2. rank 0 claims a generation (fence.py) and picks the newest intact checkpoint;
3. every rank restores model, optimizer, scheduler, RNG and sampler state from it;
4. steps of a fixed global batch, resharded over the current world size; one tiny all-reduce
   per step carries the loss and "some rank got SIGTERM", so all ranks stop after the same step,
   and all skip the update of a step whose loss is NaN or infinite (nonfinite.py);
5. checkpoints every ``checkpoint_every`` steps, written in the background while training goes
   on (checkpointing.py), at the end, and at a stop; rank 0 commits them.

Batch size and learning rate across world sizes: the *global* batch is fixed, each rank takes
``global_batch / world_size`` samples (shares differ by at most one), and the loss is the sum
over the global batch divided by its size, so a step's gradient is the same mean over the same
samples at any world size. The learning rate and its schedule (per global step) therefore stay
valid when nodes leave or join; only the per-rank batch, and the time per step, change.
"""

from __future__ import annotations

import os
import threading
import time
import warnings
from datetime import timedelta
from typing import Protocol

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, Dataset

from elastic_trainer import EXIT_MEMBERSHIP_CHANGE, EXIT_NONFINITE, deadline, outputs, schedule
from elastic_trainer.checkpointing import LoopCheckpoints
from elastic_trainer.comm import all_gather_objects, broadcast_object
from elastic_trainer.data.sampler import ElasticBatchSampler
from elastic_trainer.events import Scalars, emit, log, setup_logging
from elastic_trainer.hooks import FAULT_STALL_COMMIT as FAULT_STALL_COMMIT  # still importable from here
from elastic_trainer.hooks import HOLD_FOR_WORLD as HOLD_FOR_WORLD  # (tests and scripts named them here)
from elastic_trainer.hooks import REQUIRED_KEYS, hold_for_world, stall_commit_at
from elastic_trainer.inplace import recovery_mode
from elastic_trainer.inplace.group import train_inplace
from elastic_trainer.launch import worker_exits
from elastic_trainer.launch.first_step import mark_progress
from elastic_trainer.nonfinite import NonFiniteGuard, nan_steps
from elastic_trainer.rng import seed_rank, set_rng_state
from elastic_trainer.signals import StopRequest
from elastic_trainer.store.checkpoint import Checkpoint
from elastic_trainer.store.checkpoint_verify import CorruptCheckpointError
from elastic_trainer.train_config import TrainConfig  # also the scripts' import: `from elastic_trainer.trainer import`


class Task(Protocol):
    """What an example supplies; everything else is the trainer's job."""

    dataset: Dataset

    def build_model(self) -> nn.Module: ...

    def build_optimizer(self, model: nn.Module) -> torch.optim.Optimizer: ...

    def build_scheduler(
        self, optimizer: torch.optim.Optimizer, total_steps: int
    ) -> torch.optim.lr_scheduler.LRScheduler | None: ...

    def loss_sum(self, model: nn.Module, batch: object, device: torch.device) -> torch.Tensor:
        """Sum (not mean) of the per-sample losses of this rank's share of the batch."""
        ...


def warm_imports() -> None:
    """Pay torch.optim's lazy imports now (see the module docstring)."""
    # numpy is optional for this library; torch warns about its absence during these imports
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    param = nn.Parameter(torch.zeros(1))
    torch.optim.SGD([param], lr=0.1, momentum=0.9)
    torch.optim.AdamW([param], lr=0.1)


class _Run:
    def __init__(self, task: Task, cfg: TrainConfig, stop: StopRequest) -> None:
        self.task, self.cfg, self.stop = task, cfg, stop
        self.stop_at = deadline.stop_at()  # --max-duration/--max-cost: a stop with a checkpoint, exit 0
        self.rank = dist.get_rank()
        self.world = dist.get_world_size()
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        if torch.cuda.is_available():
            self.device = torch.device("cuda", self.local_rank)
        else:
            self.device = torch.device("cpu")
        self.checkpoints = LoopCheckpoints(cfg, rank=self.rank, world=self.world, device=self.device, stop=stop,
                                           stall=stall_commit_at())
        self.store = self.checkpoints.store
        self.scalars = Scalars(cfg.tensorboard_dir, self.rank)
        self.hold = hold_for_world()

    # -- collectives helpers ----------------------------------------------------------------
    def _broadcast_object(self, obj: object) -> object:
        return broadcast_object(obj, self.device)

    def _claim_generation(self) -> int:
        generation = 0
        if self.rank == 0:
            generation = self.store.generations.claim(
                {
                    "world_size": self.world,
                    "run_id": os.environ.get("TORCHELASTIC_RUN_ID", ""),
                    "restart_count": int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")),
                    "claimed": time.time(),
                }
            )
        return int(self._broadcast_object(generation))

    def _gather_objects(self, obj: object) -> list[object]:
        return all_gather_objects(obj, self.device)

    def _pick_checkpoint(self) -> tuple[dict, dict] | None:
        """The state and meta of the newest checkpoint every rank could load; None to start afresh.

        Rank 0 verifies (the only hashing of a resume), loads and checks the candidates, newest
        first, falling back past any that is corrupt, refused by torch.load or lacks a key of
        REQUIRED_KEYS (issue 11: such a checkpoint crash-looped every restart). It broadcasts
        its choice; the other ranks only deserialize that one, and report back whether they
        could: if one could not, all fall back together to the one before it, so every rank
        always resumes from the same checkpoint.

        Loaded to the CPU, deliberately: the RNG states must be CPU ByteTensors (issue 11),
        ``load_state_dict`` copies model and optimizer state onto the parameters' device anyway,
        and torch.load reads every storage into host memory first even with map_location=cuda,
        so loading to the GPU would only add a second, transient copy of the state there.
        """
        passed_over: list[Checkpoint] = []

        def skipped(checkpoint: Checkpoint, reason: str) -> None:
            passed_over.append(checkpoint)
            emit("ckpt_skipped", name=checkpoint.path.name, reason=reason)

        while True:
            found = None
            if self.rank == 0:
                found = self.store.load_latest("cpu", required=REQUIRED_KEYS, exclude=passed_over, on_skip=skipped)
            chosen = self._broadcast_object(None if found is None else (found[2], found[1]))
            if chosen is None:
                return None
            checkpoint, meta = chosen
            state, error = (found[0], None) if found is not None else (None, None)
            if self.rank != 0:
                try:
                    state, _ = self.store.load(checkpoint, "cpu", verified=True, required=REQUIRED_KEYS)
                except CorruptCheckpointError as exc:
                    error = str(exc)
            failed = [(rank, e) for rank, e in enumerate(self._gather_objects(error)) if e]
            if not failed:
                return state, meta
            if self.rank == 0:
                reason = "; ".join(f"rank {rank}: {e}" for rank, e in failed)
                log.warning("skipping checkpoint: %s; trying the previous one", reason)
                skipped(checkpoint, reason)

    # -- the run ------------------------------------------------------------------------------
    def run(self) -> int:
        cfg, task = self.cfg, self.task
        generation = self._claim_generation()
        torch.manual_seed(cfg.seed)  # identical initial weights on every rank
        model = task.build_model().to(self.device)
        optimizer = task.build_optimizer(model)
        scheduler = task.build_scheduler(optimizer, cfg.total_steps)

        step = 0
        loaded = self._pick_checkpoint()
        if loaded is None:
            seed_rank(cfg.seed, 0, self.rank)
            if self.rank == 0:
                emit("start", world=self.world, gen=generation, device=str(self.device))
        else:
            state, meta = loaded
            saved = state["sampler"]
            if (saved["global_batch"], saved["seed"]) != (cfg.global_batch_size, cfg.seed):
                # the step count, data order and learning rate all assume one global batch and seed
                raise ValueError(
                    f"the checkpoint was written with --global-batch-size={saved['global_batch']} "
                    f"--seed={saved['seed']}; this run has {cfg.global_batch_size} and {cfg.seed}"
                )
            model.load_state_dict(state["model"])
            if meta.get("checkpoint_format") == "sharded":  # its optimizer state is keyed by parameter name
                from elastic_trainer.store import sharded

                sharded.restore_optimizer(model, optimizer, state["optimizer"])
            else:
                optimizer.load_state_dict(state["optimizer"])
            step = ElasticBatchSampler.step_from_state(state["sampler"], len(task.dataset))
            # a checkpoint of another --total-steps: the schedule's horizon follows the new one (schedule.py)
            scheduler = schedule.restore(task, optimizer, scheduler, state, step, cfg.total_steps,
                                         cfg.schedule_on_extend)
            if len(state["rng"]) == self.world:
                set_rng_state(state["rng"][self.rank])  # same world size: continue exactly
            else:
                seed_rank(cfg.seed, step, self.rank)  # resharded: fresh per-rank streams
            if self.rank == 0:
                log.info("resumed from %s at step %d (world size %d -> %d)",
                         meta.get("step"), step, meta.get("world_size"), self.world)
                emit("resumed", step=step, world=self.world, gen=generation, from_gen=meta["generation"],
                     from_world=meta.get("world_size"), device=str(self.device))

        if self.world > 1:
            ddp_model: nn.Module = nn.parallel.DistributedDataParallel(
                model, device_ids=[self.local_rank] if self.device.type == "cuda" else None
            )
        else:
            ddp_model = model
        sampler = ElasticBatchSampler(
            len(task.dataset), cfg.global_batch_size, self.rank, self.world, cfg.seed,
            start_step=step, total_steps=cfg.total_steps,
        )
        # Its own generator: a DataLoader iterator otherwise draws its base seed from the global
        # RNG, and a resumed run would then continue from a different dropout stream.
        _warmed()
        loader = DataLoader(task.dataset, batch_sampler=sampler, num_workers=cfg.num_workers,
                            pin_memory=self.device.type == "cuda",
                            generator=torch.Generator().manual_seed(cfg.seed + step))
        # DDP averages gradients over ranks; scaling by world / global batch turns that into the
        # mean over the global batch however it is split (see the module docstring).
        scale = self.world / cfg.global_batch_size
        try:
            return self._loop(ddp_model, model, optimizer, scheduler, sampler, loader, step, generation, scale)
        finally:
            self.checkpoints.settle()
            self.scalars.close()

    def _loop(self, ddp_model, model, optimizer, scheduler, sampler, loader, step, generation, scale) -> int:
        cfg = self.cfg
        if step >= cfg.total_steps:
            if self.rank == 0:  # resumed from the final checkpoint: the export may not have happened
                outputs.finish(model, cfg.output_dir, step, self.world)
                emit("done", step=step, world=self.world, gen=generation)
            return 0
        ddp_model.train()
        first_step = step + 1
        guard = NonFiniteGuard(cfg.max_nonfinite_steps, report=self.rank == 0)
        poisoned = nan_steps()  # fault injection (tests): these steps' losses are NaN
        for batch in loader:
            if self.hold and step + 1 == self.hold[0] and self.world < self.hold[1]:
                self._hold()
            loss = self.task.loss_sum(ddp_model, batch, self.device)
            if step + 1 in poisoned:
                loss = loss * float("nan")
            (loss * scale).backward()
            if cfg.step_delay_s:  # pacing for demos and tests: stands for a bigger model's compute
                time.sleep(cfg.step_delay_s)
            # One small all-reduce carries "some rank got SIGTERM", the loss sum and "past the job's
            # time limit" (deadline.py), read before the update so that a NaN or infinite loss skips
            # it on every rank alike (nonfinite.py).
            signalled = bool(self.stop)
            flags = torch.stack([torch.tensor(1.0 if signalled else 0.0), loss.detach().double().cpu(),
                                 torch.tensor(1.0 if deadline.due(self.stop_at) else 0.0, dtype=torch.float64)])
            flags = flags.to(self.device)
            dist.all_reduce(flags)
            step += 1
            stop_votes, loss_sum, due_votes = flags.tolist()
            stopping = stop_votes > 0 or due_votes > 0
            grad_norm = None
            if cfg.clip_grad_norm is not None:  # the same all-reduced gradient on every rank: the same scaling
                grad_norm = float(nn.utils.clip_grad_norm_(model.parameters(), cfg.clip_grad_norm))
            if guard.admits(loss_sum, step, grad_norm, gen=generation):
                # a checkpoint's copy may still be reading what the step changes
                self.checkpoints.snapshot.before_update()
                optimizer.step()
            if scheduler is not None:
                scheduler.step()  # also after a skipped update: the schedule follows the global step
            optimizer.zero_grad(set_to_none=True)
            mark_progress()  # this attempt trained: its failures are no longer "before a step" (first_step.py)
            if self.rank == 0 and (step % cfg.progress_every == 0 or step == first_step):
                mean_loss = loss_sum / cfg.global_batch_size if not guard.in_a_row else None
                emit("step", step=step, world=self.world, gen=generation,
                     loss=None if mean_loss is None else round(mean_loss, 6))
                if mean_loss is not None:
                    self.scalars.add("train/loss", mean_loss, step)
                if grad_norm is not None and not guard.in_a_row:
                    self.scalars.add("train/grad_norm", grad_norm, step)  # before clipping
                self.scalars.add("train/world_size", self.world, step)
                outputs.custom_scalars(self.task, model, optimizer, step, self.scalars)
            if guard.gave_up:  # nothing is saved: resume from the newest checkpoint, of finite weights
                if self.rank == 0:
                    log.error("the loss or gradient was not finite for %d steps in a row (--max-nonfinite-steps=%d): "
                              "stopping without a checkpoint; the restarted workers resume from the newest one",
                              guard.in_a_row, cfg.max_nonfinite_steps)
                emit("exit", rank=self.rank, step=step, code=EXIT_NONFINITE, reason="nonfinite")
                return EXIT_NONFINITE
            if signalled:
                emit("signal", rank=self.rank, signum=self.stop.signum, step=step)
            # No periodic checkpoint inside a run of non-finite steps: a restart after giving up must
            # resume from before it, or every restart would creep past a few more (nonfinite.py).
            reason = "final" if step >= cfg.total_steps else "stop" if stopping else (
                "periodic" if step % cfg.checkpoint_every == 0 and not guard.in_a_row else None)
            if step == first_step and reason is None and cfg.async_checkpoint:
                self.checkpoints.prepare_staging(model, optimizer, step, generation)
            code = self.checkpoints.poll()
            if code:
                return code
            if reason:
                code = self.checkpoints.save(model, optimizer, scheduler, sampler, step, generation, reason)
                if code:
                    return code
            if not stopping and (reason == "final" or (cfg.eval_every and step % cfg.eval_every == 0)):
                outputs.evaluate(self.task, model, self.device, step, self.scalars, self.rank)
            if stopping:
                # a stop is rare: make sure rank 0's commit is done before anyone leaves
                dist.barrier()
                if self.stop or stop_votes > 0:
                    signal_code = 128 + self.stop.signum if self.stop else EXIT_MEMBERSHIP_CHANGE
                    code = self.checkpoints.failed_save or signal_code
                    emit("exit", rank=self.rank, step=step, code=code)
                else:  # the time limit alone: a planned end, the state saved (deadline.py)
                    code = self.checkpoints.failed_save
                    emit("exit", rank=self.rank, step=step, code=code, reason="time_limit")
                return code
            if reason == "final":
                break
        if self.checkpoints.failed_save:
            emit("exit", rank=self.rank, step=step, code=self.checkpoints.failed_save)
            return self.checkpoints.failed_save
        if self.rank == 0:
            outputs.finish(model, cfg.output_dir, step, self.world)
            emit("done", step=step, world=self.world, gen=generation)
        return 0

    def _hold(self) -> None:
        """Wait (HOLD_FOR_WORLD) until any rank is asked to stop; then this step runs and all stop."""
        if self.rank == 0:
            emit("hold", step=self.hold[0], world=self.world, until_world=self.hold[1])
        flag = torch.zeros(1, device=self.device)
        while True:  # collective, so a stop request on any rank releases every rank
            flag.fill_(1.0 if self.stop else 0.0)
            dist.all_reduce(flag)
            if flag.item() > 0:
                return
            time.sleep(0.05)



def _warm_cuda_libraries(device: int) -> None:
    """Load cuBLAS and cuDNN in the background while the process group forms and the checkpoint loads.

    A fresh GPU worker's first bf16 step took 2.8 s on an H100 (README.md's GPU figures), much of
    it loading these libraries on first use. Their handles are pooled per device, so the ones made
    here serve the training thread. Tiny zero tensors: no RNG is drawn, nothing the run depends on.
    """

    def warm() -> None:
        try:
            torch.cuda.set_device(device)  # the current device is per thread
            x = torch.zeros(8, 8, device="cuda")
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=torch.cuda.is_bf16_supported()):
                x @ x
                nn.functional.conv2d(torch.zeros(1, 3, 8, 8, device="cuda"), torch.zeros(4, 3, 3, 3, device="cuda"))
            torch.cuda.synchronize(device)
        except Exception as exc:  # an optimisation only: training goes on and pays the cost later
            log.warning("warming CUDA libraries failed: %s", exc)

    global _warming
    _warming = threading.Thread(target=warm, name="warm-cuda", daemon=True)
    _warming.start()


_warming: threading.Thread | None = None


def _warmed() -> None:
    """Wait for the warm-up thread: the data-loader workers are forked next, and a fork copies
    only the forking thread, so no other thread should be inside the CUDA driver's locks then."""
    if _warming is not None:
        _warming.join()


def train(task: Task, cfg: TrainConfig) -> int:
    """Run one worker's share of the job; returns the process exit code."""
    stop = StopRequest().install()
    warm_imports()
    if recovery_mode() == "inplace":  # issue 14: survivors keep training (inplace/)
        return train_inplace(task, cfg, stop)
    worker_exits.exit_if_not_launched()  # `python train.py` alone: say how to launch it (issue 22)
    if cfg.checkpoint_format == "sharded":
        # torch.distributed.checkpoint takes seconds to import: pay it before joining the group
        from elastic_trainer.store import sharded  # noqa: F401
    rank = int(os.environ.get("RANK", "0"))
    setup_logging(rank)
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        _warm_cuda_libraries(torch.cuda.current_device())
    timeout = timedelta(seconds=float(os.environ.get("TORCHFLEET_PG_TIMEOUT_S", "300")))
    dist.init_process_group(backend, timeout=timeout)
    try:
        return _Run(task, cfg, stop).run()
    except Exception as exc:  # a collective met a node that is gone: one line, not a traceback (issue 22)
        if not worker_exits.peer_lost(exc):
            raise
        return worker_exits.leave_after_peer_loss(exc, rank)
    finally:
        dist.destroy_process_group()
