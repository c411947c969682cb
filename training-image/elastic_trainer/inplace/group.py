"""One replica group's worker: the quorum, the gradient average and the commit vote of every step.

The mode and why: the package's docstring (inplace/__init__.py). Its checkpoints and resume are
checkpoints.py's; the end of a run (time limit, final checkpoint, export) is ending.py's. torchft is
imported when a worker starts (``run``), so its settings are checked without it.
"""

from __future__ import annotations

import os
import socket
import time
from datetime import timedelta
from urllib.parse import urlsplit

import torch
from torch import nn
from torch.utils.data import default_collate

from elastic_trainer import EXIT_MEMBERSHIP_CHANGE, EXIT_NONFINITE, deadline
from elastic_trainer.data.sampler import ElasticBatchSampler
from elastic_trainer.events import Scalars, emit, log, setup_logging
from elastic_trainer.hooks import HOLD_FOR_WORLD, hold_for_world
from elastic_trainer.inplace.addresses import advertised_host, manager_addresses
from elastic_trainer.inplace.checkpoints import GroupCheckpoints
from elastic_trainer.inplace.ending import Ending
from elastic_trainer.inplace.settings import (
    ENV_FINAL_WAIT_S,
    ENV_GROUP,
    ENV_GROUPS,
    ENV_LIGHTHOUSE,
    ENV_LIGHTHOUSE_WAIT_S,
    ENV_MIN_GROUPS,
    ENV_QUORUM_TIMEOUT_S,
    ENV_STALL_S,
    ENV_TIMEOUT_S,
    EXIT_BAD_SETTINGS,
    backend,
    env_int,
    env_seconds,
    group_index,
)
from elastic_trainer.inplace.stall_guard import StallGuard
from elastic_trainer.nonfinite import NonFiniteGuard, nan_steps
from elastic_trainer.signals import StopRequest
from elastic_trainer.store import AsyncWriter, CheckpointStore, HostSnapshot

_TAIL = 3  # the gradient buffer's last entries: loss sum, sample count, time-limit votes (_bind_gradients)


def _digest(model: nn.Module) -> float:
    """A cheap fingerprint of the weights: equal on every group that holds the same state.

    A step event's digest is of the weights that step was computed from (the state every group
    agreed on, a healing group's peer's included), taken before the update is queued: see _run.
    """
    with torch.no_grad():  # one reduction per tensor on its device, one transfer: no per-tensor sync
        sums = torch.stack([p.detach().sum(dtype=torch.float64) for p in model.parameters()])
        return round(float(sums.sum()), 9)


class _InplaceRun(GroupCheckpoints, Ending):
    def __init__(self, task, cfg, stop: StopRequest) -> None:
        self.task, self.cfg, self.stop = task, cfg, stop
        self.group = group_index()  # the replica group's own id; a spare index's is above the slices
        self.groups = env_int(ENV_GROUPS, None, 1)
        if self.group >= self.groups and os.environ.get(ENV_GROUP, "") != "":  # a spare index is a pod's only
            raise ValueError(f"{ENV_GROUP}={self.group} must be below {ENV_GROUPS}={self.groups}")
        self.slice = self.group % self.groups  # a spare index's slice (module docstring)
        self.min_groups = env_int(ENV_MIN_GROUPS, 1, 1)
        self.timeout = timedelta(seconds=env_seconds(ENV_TIMEOUT_S, 10.0))
        self.quorum_timeout = timedelta(seconds=env_seconds(ENV_QUORUM_TIMEOUT_S, 10.0))
        self.final_wait_s = env_seconds(ENV_FINAL_WAIT_S, 600.0)
        self.lighthouse_wait_s = env_seconds(ENV_LIGHTHOUSE_WAIT_S, 600.0)
        inner = self.quorum_timeout.total_seconds() + 3 * self.timeout.total_seconds()
        self.stall_s = env_seconds(ENV_STALL_S, max(300.0, inner + 60))
        if self.stall_s <= inner:  # it would end calls that are still within torchft's own bounds
            raise ValueError(f"{ENV_STALL_S}={self.stall_s:g}: must exceed {ENV_QUORUM_TIMEOUT_S} + 3 x "
                             f"{ENV_TIMEOUT_S} ({inner:g} s), what one torchft call may take by its own timeouts")
        self.stop_at = deadline.stop_at()  # --max-duration/--max-cost: all groups stop together, exit 0
        self.lighthouse = os.environ.get(ENV_LIGHTHOUSE, "")
        if not self.lighthouse:
            raise ValueError(f"{ENV_LIGHTHOUSE} is not set: the in-place mode needs the job's Lighthouse address")
        advertised_host()  # a POD_IP that is no address: exit 2 now, not an unreachable group later
        self.device = torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
        self.backend = backend(self.device)
        # in a hurry while a spot notice is under way: the stop save's prune hashes no older checkpoint
        self.store = CheckpointStore(cfg.checkpoint_dir, keep=cfg.keep_checkpoints, in_a_hurry=lambda: bool(stop))
        self.scalars = Scalars(cfg.tensorboard_dir, 0 if self.group == 0 else 1)
        self.snapshot = HostSnapshot(pin=self.device.type == "cuda")
        self.guard = NonFiniteGuard(cfg.max_nonfinite_steps, report=True)  # every group logs its own
        self.poisoned = nan_steps()  # fault injection (tests): these steps' losses are NaN
        self.writer = AsyncWriter()
        self.generation = 0  # claimed by the group that writes, at each new quorum
        self.writer_quorum = -1
        self.trained = False  # has this worker committed a step (the final checkpoint is then its to write)
        self.hold = hold_for_world()  # (step, groups): tests and the demo (trainer.py's HOLD_FOR_WORLD)
        self.holding = False
        if cfg.global_batch_size < self.groups:
            raise ValueError(f"--global-batch-size={cfg.global_batch_size} is smaller than {ENV_GROUPS}="
                             f"{self.groups}: every group needs at least one sample of each global batch")
        # this group's slice of every global batch (ValueError, exit 2, if the dataset is smaller than one)
        self.sampler = ElasticBatchSampler(len(task.dataset), cfg.global_batch_size, self.slice, self.groups,
                                           cfg.seed, total_steps=cfg.total_steps)

    # -- state exchanged with a healing peer (torchft's checkpoint transport) ---------------------
    def _state_dict(self) -> dict:
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict() if self.scheduler is not None else None,
        }

    def _load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.scheduler is not None and state.get("scheduler") is not None:
            self.scheduler.load_state_dict(state["scheduler"])
        self.healed = True

    def run(self) -> int:
        # torchft's servers log every quorum and commit vote at INFO: 4 lines per step in the pod log
        os.environ.setdefault("RUST_LOG", "warn")
        from torchft.manager import Manager
        from torchft.process_group import ProcessGroupGloo, ProcessGroupNCCL

        cfg, task = self.cfg, self.task
        timeout, quorum_timeout = self.timeout, self.quorum_timeout
        torch.manual_seed(cfg.seed)  # identical initial weights in every group
        self.model = task.build_model().to(self.device)
        self.optimizer = task.build_optimizer(self.model)
        self.scheduler = task.build_scheduler(self.optimizer, cfg.total_steps)
        self.healed = False
        try:
            self._wait_for_lighthouse()
        except TimeoutError as exc:
            log.error("%s", exc)
            emit("exit", group=self.group, step=0, code=EXIT_MEMBERSHIP_CHANGE, reason="no lighthouse")
            return EXIT_MEMBERSHIP_CHANGE
        if self.stop:  # stopped while waiting: nothing trained, nothing to save
            emit("exit", group=self.group, step=0, code=128 + self.stop.signum)
            return 128 + self.stop.signum
        # The group's own store (one worker per group): torchft keeps the manager's address in it.
        store = torch.distributed.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
        pg = ProcessGroupNCCL(timeout=timeout) if self.backend == "nccl" else ProcessGroupGloo(timeout=timeout)
        self.bound = StallGuard(self.stall_s, EXIT_MEMBERSHIP_CHANGE, ENV_STALL_S, group=self.group)
        with self.bound("starting torchft's Manager (its Lighthouse connection)"):
            self.manager = Manager(
                pg=pg, load_state_dict=self._load_state_dict, state_dict=self._state_dict,
                min_replica_size=self.min_groups,
                # the quorum is computed while the batch loads and forward and backward run (_run)
                use_async_quorum=True,
                timeout=timeout, quorum_timeout=quorum_timeout, connect_timeout=quorum_timeout,
                rank=0, world_size=1, store_port=store.port,
                lighthouse_addr=self.lighthouse, replica_id=f"group{self.group}",
                # the pod IP on Kubernetes, where no other pod resolves this one's hostname (addresses.py)
                **manager_addresses(timeout),
                init_sync=False,  # the weights are made from the seed, identical everywhere
            )
        try:
            return self._run()
        finally:
            self._settle_write()
            self.scalars.close()
            self.manager.shutdown(wait=False)

    def _wait_for_lighthouse(self) -> None:
        """Block until the Lighthouse accepts connections (or a stop is requested), at most
        ``TORCHFLEET_INPLACE_LIGHTHOUSE_WAIT_S``: past it, TimeoutError.

        A worker that lost its Lighthouse exits and is started again by its node; without this
        wait it would fail again at once, and a Lighthouse away for minutes (its pod rescheduled)
        would use up the node's restarts.
        """
        parsed = urlsplit(self.lighthouse)
        address = (parsed.hostname or "127.0.0.1", parsed.port or 29510)
        waiting_since = None
        while not self.stop:
            if waiting_since is not None and time.monotonic() - waiting_since > self.lighthouse_wait_s:
                raise TimeoutError(f"the Lighthouse at {self.lighthouse} ({ENV_LIGHTHOUSE}) refused connections for "
                                   f"{self.lighthouse_wait_s:g} s ({ENV_LIGHTHOUSE_WAIT_S}): exiting for the node "
                                   f"to start this worker again")
            try:
                with socket.create_connection(address, timeout=1.0):
                    break
            except OSError:
                if waiting_since is None:
                    waiting_since = time.monotonic()
                    emit("lighthouse_wait", group=self.group, address=self.lighthouse)
                time.sleep(0.2)
        if waiting_since is not None:
            emit("lighthouse_back", group=self.group, waited_s=round(time.monotonic() - waiting_since, 3))

    def _bind_gradients(self) -> torch.Tensor:
        """One flat buffer holding every parameter's gradient (as views) and, after them, the step's loss
        sum, sample count and time-limit votes: what ``_average_gradients`` all-reduces.

        Backward accumulates into existing ``.grad`` tensors in place, so the gradients land in the
        buffer: no per-step copy into a flat tensor and back, and one division for all of them
        (DDP's ``gradient_as_bucket_view``). Zeroing the buffer replaces ``zero_grad``: every
        parameter gets a gradient each step, zero where the loss does not reach it, as before.
        """
        params = list(self.model.parameters())
        kinds = {(p.dtype, p.device) for p in params}
        if len(kinds) != 1:
            raise ValueError(f"the in-place mode averages gradients in one buffer: the model's parameters must share "
                             f"one dtype and device, got {sorted(str(k) for k in kinds)}")
        total = sum(p.numel() for p in params)
        flat = torch.zeros(total + _TAIL, dtype=params[0].dtype, device=params[0].device)
        offset = 0
        for param in params:
            chunk = flat[offset:offset + param.numel()]
            # a channels_last weight (examples/imagenet.py on a GPU) gets a gradient of its own
            # layout, dense within its chunk: a plain view's strides would differ from the
            # parameter's, and the optimizer's fused and foreach kernels fall back to slow loops
            dense = param.is_contiguous() or param.is_contiguous(memory_format=torch.channels_last)
            param.grad = chunk.as_strided(param.size(), param.stride()) if dense else chunk.view_as(param)
            offset += param.numel()
        return flat

    def _alone(self) -> bool:
        """This group is the whole quorum: an all-reduce over it would return its own tensor.

        The quorum's process group size is the number of groups in it, healing ones included
        (which ``num_participants`` leaves out); torchft 0.2.0 keeps it only on its ``_pg``.
        An errored manager is never alone: its ``allreduce`` is then a no-op, and the step is dropped.
        """
        manager = self.manager
        return manager.errored() is None and manager.is_participating() and manager._pg.size() == 1

    def _average_gradients(self, loss_sum: torch.Tensor, count: int) -> None:
        """Average the gradients over the quorum's groups, and sum the loss and sample count, in one collective.

        One flat buffer and ``Manager.allreduce``, not torchft's DDP wrapper: its comm hook
        asserts on a failed all-reduce (torchft 0.2.0, ``assert fut._fut`` in ddp.py) and killed
        the survivors of a SIGKILLed peer instead of letting the step be dropped. A failed
        collective is reported to the Manager, whose commit vote then drops the step everywhere.
        A group alone in its quorum skips the collective (its sum over one group is its own
        buffer): on the CPU that was ~0.45 ms of a step (bench/goodput.py --overhead).
        """
        flat = self.grads
        tail = flat[-_TAIL:]
        tail[0].copy_(loss_sum.reshape(()))
        tail[1].fill_(float(count))
        tail[2].fill_(1.0 if deadline.due(self.stop_at) else 0.0)  # a healing group's is zeroed: it sees the others'
        if not self._alone():
            with self.bound("the gradient all-reduce"):
                self.manager.allreduce(flat, reduce_op=torch.distributed.ReduceOp.SUM).wait()
        groups = self.manager.num_participants()
        if groups > 1:
            flat[:-_TAIL].div_(groups)

    def _no_quorum(self, exc: Exception) -> int:
        """The Lighthouse is gone (or the quorum failed): the node starts this worker again (replica_node.py)."""
        log.error("no quorum: %s", exc)
        emit("exit", group=self.group, step=self.manager.current_step(), code=EXIT_MEMBERSHIP_CHANGE,
             reason="no quorum")
        return EXIT_MEMBERSHIP_CHANGE

    def _run(self) -> int:
        """The loop. Per step: start the quorum (computed in torchft's background thread while this
        thread loads the batch and runs forward and backward), wait for it, average the gradients over
        the quorum, vote to commit, and step the optimizer only if every group committed.

        A group that heals at a quorum takes no part in that step (its contribution is zeroed by
        ``Manager.allreduce``); its peer's state is applied at the commit vote, so it steps together
        with the others from there on.
        """
        cfg, task = self.cfg, self.task
        manager = self.manager
        sampler = self.sampler
        self.grads = self._bind_gradients()
        self.model.train()
        started = False
        last_quorum = None
        while True:
            try:
                with self.bound("the quorum (torchft's start_quorum)"):
                    manager.start_quorum()
                    if not started:
                        manager.wait_quorum()
            except Exception as exc:
                return self._no_quorum(exc)
            self.grads.zero_()  # the parameters' gradients are views of it (_bind_gradients)
            step = manager.current_step()  # a healing group's is its peer's step, set when the quorum came
            if not started:
                started = True
                if step == 0 and not manager._healing:
                    # no live group is ahead: the job (re)starts from the shared store, if it has one.
                    # Identical in every group that starts together (same newest checkpoint).
                    if self._resume_from_store() == 0:
                        emit("start", group=self.group, pid=os.getpid())
                    continue  # the loaded step goes to the next quorum
            if step >= cfg.total_steps:
                emit("done", group=self.group, step=step)
                return self._finish(step)
            indices = sampler.batch(step)
            batch = default_collate([task.dataset[i] for i in indices])
            loss = task.loss_sum(self.model, batch, self.device)
            if step + 1 in self.poisoned:
                loss = loss * float("nan")
            (loss / len(indices)).backward()  # this group's mean; the groups' means are averaged
            try:
                with self.bound("the quorum (torchft's wait_quorum)"):
                    manager.wait_quorum()
            except Exception as exc:
                return self._no_quorum(exc)
            quorum = (manager.num_participants(), manager.participating_rank())
            if quorum != last_quorum:
                emit("quorum", group=self.group, step=step, participants=quorum[0], replica_rank=quorum[1])
                last_quorum = quorum
            held = self._held(step, quorum[0])
            self._average_gradients(loss.detach(), len(indices))
            self.snapshot.before_update()
            try:
                with self.bound("the commit vote (torchft's should_commit)"):
                    committed = manager.should_commit()  # applies a healing group's pending state first
            except Exception as exc:
                return self._no_quorum(exc)
            if self.healed:
                emit("healed", group=self.group, step=manager.current_step() - (1 if committed else 0),
                     pid=os.getpid())
                self.healed = False
            if not committed:
                if not held:
                    emit("step_dropped", group=self.group, step=step + 1)
                continue
            # Read on the host now, before the update is queued: should_commit synchronised the
            # device, so these wait for nothing. After optimizer.step they would wait for it, and
            # the next batch could not be prepared while the update runs (on a GPU).
            loss_sum, loss_count, due_votes = self.grads[-_TAIL:].tolist()
            step = manager.current_step()
            report = step % cfg.progress_every == 0 or step == cfg.total_steps
            digest = _digest(self.model) if report else None
            # The quorum's loss sum is the same in every group, so all skip a non-finite step alike.
            grad_norm = None
            if cfg.clip_grad_norm is not None:  # the quorum's averaged gradient: every group scales alike
                grad_norm = float(nn.utils.clip_grad_norm_(self.model.parameters(), cfg.clip_grad_norm))
            if self.guard.admits(loss_sum, step, grad_norm, group=self.group):
                self.optimizer.step()
            if self.scheduler is not None:
                self.scheduler.step()  # also after a skipped update: the schedule follows the global step
            if cfg.step_delay_s:
                time.sleep(cfg.step_delay_s)
            self.trained = True
            mean_loss = loss_sum / max(loss_count, 1.0) if not self.guard.in_a_row else None
            if report:
                emit("step", step=step, group=self.group, world=quorum[0],
                     loss=None if mean_loss is None else round(mean_loss, 6), digest=digest)
                if quorum[1] == 0:
                    if mean_loss is not None:
                        self.scalars.add("train/loss", mean_loss, step)
                    self.scalars.add("train/replica_groups", quorum[0], step)
            if self.guard.gave_up:  # nothing is saved; the node restarts the worker (nonfinite.py)
                log.error("the loss or gradient was not finite for %d steps in a row (--max-nonfinite-steps=%d): "
                          "stopping without a checkpoint", self.guard.in_a_row, cfg.max_nonfinite_steps)
                emit("exit", group=self.group, step=step, code=EXIT_NONFINITE, reason="nonfinite")
                return EXIT_NONFINITE
            code = self._report(self.writer.poll()) if self.writer.busy else 0
            if code:
                return code
            if self.stop:
                emit("signal", group=self.group, signum=self.stop.signum, step=step)
                code = self._checkpoint(sampler, step, "stop") or self.failed_save()
                code = code or 128 + self.stop.signum
                emit("exit", group=self.group, step=step, code=code)
                return code
            if step >= cfg.total_steps:
                continue  # the final checkpoint after the next quorum agrees we are done
            if due_votes > 0:  # every group of this committed step got the same sum: all stop here
                return self._time_limit(step, quorum[1])
            if step % cfg.checkpoint_every == 0 and quorum[1] == 0 and not self.guard.in_a_row:  # nonfinite.py
                self._checkpoint(sampler, step, "periodic")

    def _held(self, step: int, groups: int) -> bool:
        """HOLD_FOR_WORLD: before its step, a quorum of fewer groups votes the step down and goes round again.

        The whole quorum protocol still runs (a replacement that heals at such a quorum gets the
        state at the commit vote, trainer.py's hold stops at a collective the same way); the step is
        dropped everywhere by this group's error report (torchft's should_commit), so no group trains it.
        """
        if not (self.hold and step + 1 == self.hold[0] and groups < self.hold[1]):
            self.holding = False
            return False
        if not self.holding:
            emit("hold", group=self.group, step=self.hold[0], world=groups, until_world=self.hold[1])
            self.holding = True
        self.manager.report_error(RuntimeError(f"{HOLD_FOR_WORLD}: holding step {step + 1} for {self.hold[1]} groups"))
        time.sleep(0.05)  # a quorum round each 50 ms, as the Lighthouse's tick (inplacerun.py)
        return True



def train_inplace(task, cfg, stop: StopRequest | None = None) -> int:
    """One replica group's worker of an in-place job; returns the process exit code."""
    stop = stop or StopRequest().install()
    setup_logging(0)
    try:
        run = _InplaceRun(task, cfg, stop)
    except ValueError as exc:  # the pod's settings: starting it again would not help (replica_node.py)
        log.error("%s", exc)
        return EXIT_BAD_SETTINGS
    return run.run()
