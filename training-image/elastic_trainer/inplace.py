"""In-place recovery (``TORCHFLEET_RECOVERY=inplace``): survivors keep training, a new group heals from a peer.

The ``restart`` mode (trainer.py) restarts every worker of every node when membership changes.
Here each node's worker is one torchft *replica group* (issue 14; training-image/README.md,
"Recovery modes"):

- a per-job Lighthouse (``torchft_lighthouse``, address in ``TORCHFT_LIGHTHOUSE``) decides a
  quorum before every step; a group that stops heartbeating drops out of it;
- gradients are averaged over the groups of the step's quorum (torchft's fault-tolerant DDP and
  ``Manager.allreduce``); a step where a collective failed is not committed by anyone
  (``should_commit``) and is simply run again with the new quorum;
- a group that joins behind the others (a replacement) heals: it copies model, optimizer,
  scheduler and step from a live peer over HTTP (torchft's checkpoint transport), never from
  the shared store;
- the shared store still gets the periodic checkpoints (written in the background, the same
  CheckpointStore) for the loss of the whole job, or of the Lighthouse: a worker whose quorum
  cannot be reached exits (EXIT_MEMBERSHIP_CHANGE), its node restarts it, and a job where no
  group holds live state resumes from the last checkpoint once the Lighthouse answers again.

Data: group ``g`` of ``G`` (``TORCHFLEET_REPLICA_GROUP``, ``TORCHFLEET_REPLICA_GROUPS``) takes
the same contiguous slice of every global batch as rank ``g`` of world ``G`` in the restart mode
(data/sampler.py), at the step the quorum agreed on. A step whose quorum lacks a group trains on
the slices of the groups present: a smaller batch, same learning rate (the gradient is the mean
over the samples present). The missing slice of that step is not revisited.

Spare indexes: the Job has more completion indexes than groups (torchfleet/jobs/indexed_job.py,
``shell``: with completions = MAX the Job controller marked a finished run Failed). Pod ``k >= G``
starts only once an index failed for good, and its trainer cannot tell which: no pod reads the Job's
status, and torchft's quorum tells a group only its replica rank among the participants, not their
ids. So spare ``k`` is replica ``group<k>`` (an id of its own) and takes slice ``k mod G``. When
that slice's own group is alive (a 1:2 job whose index 1 failed: spare 2 takes slice 0, as index 0
does), both train the same samples; their gradients and their loss per sample are equal, so each
step is what it would be without the spare (its GPU spent for nothing), and the failed group's slice
stays missing, as in any quorum that lacks a group. The spare does count towards the minimum
(``TORCHFLEET_MIN_REPLICA_GROUPS``, the Lighthouse's ``min_replicas``), as any group.

Time limit (``TORCHFLEET_STOP_AT``, deadline.py): each group votes "past the limit" in the step's
gradient all-reduce, beside the loss sum, so every group of a committed step sees the same sum and
all stop after that step: replica rank 0 commits the stop checkpoint, the others wait for it, and
all exit 0 (the Job ends Succeeded, and resumes from that checkpoint when submitted again).

Final model (``--output-dir``, outputs.py): replica rank 0 exports it once the final checkpoint is
committed; the other groups wait for the export as well (bounded as the wait for the checkpoint),
since the Job succeeds at the first group that exits 0 and then stops the rest, the writer included.
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

from elastic_trainer import (
    EXIT_CHECKPOINT_FAILED,
    EXIT_MEMBERSHIP_CHANGE,
    EXIT_NONFINITE,
    deadline,
    outputs,
    schedule,
)
from elastic_trainer.data.sampler import ElasticBatchSampler
from elastic_trainer.events import Scalars, emit, log, setup_logging
from elastic_trainer.inplace_addresses import advertised_host, manager_addresses
from elastic_trainer.nonfinite import NonFiniteGuard, nan_steps
from elastic_trainer.signals import StopRequest
from elastic_trainer.stall_guard import StallGuard
from elastic_trainer.store.async_writer import AsyncWriter, WriteOutcome
from elastic_trainer.store.checkpoint import CheckpointStore, CheckpointWriteError
from elastic_trainer.store.fence import StaleGenerationError
from elastic_trainer.store.staging import HostSnapshot
from elastic_trainer.trainer import (  # the same checkpoints, the same fault and demo hooks
    HOLD_FOR_WORLD,
    REQUIRED_KEYS,
    hold_for_world,
    stall_commit_at,
)

# Which recovery a job uses: "restart" (torchrun restarts every worker, trainer.py) or "inplace".
ENV_RECOVERY = "TORCHFLEET_RECOVERY"
RECOVERY_MODES = ("restart", "inplace")
ENV_LIGHTHOUSE = "TORCHFT_LIGHTHOUSE"  # torchft's own variable: http://host:port of the job's Lighthouse
ENV_GROUP = "TORCHFLEET_REPLICA_GROUP"  # this node's index, 0..groups-1 (a pod's completion index)
ENV_COMPLETION_INDEX = "JOB_COMPLETION_INDEX"  # set by Kubernetes on each pod of an Indexed Job
ENV_GROUPS = "TORCHFLEET_REPLICA_GROUPS"  # how many slices a global batch is cut into (the job's nodes)
ENV_MIN_GROUPS = "TORCHFLEET_MIN_REPLICA_GROUPS"  # fewer groups than this in a quorum: no step commits
# How long a collective, a heal or a commit vote may take; a quorum may wait longer (a group
# waiting alone for the Lighthouse to come back). Seconds.
ENV_TIMEOUT_S = "TORCHFLEET_INPLACE_TIMEOUT_S"
ENV_QUORUM_TIMEOUT_S = "TORCHFLEET_INPLACE_QUORUM_TIMEOUT_S"
# The groups' gradient all-reduce: nccl (the default on a GPU) or gloo (the CPU's; on a GPU it
# reduces CUDA tensors through host memory). gloo on a GPU is for two groups sharing one GPU,
# which NCCL refuses: bench/goodput.py --overhead measures a heal from a peer that way.
ENV_BACKEND = "TORCHFLEET_INPLACE_BACKEND"
# How long a group that does not write the final checkpoint waits for it before it exits (_finish):
# the writer's final save of a large state to a network store can take minutes.
ENV_FINAL_WAIT_S = "TORCHFLEET_INPLACE_FINAL_WAIT_S"
# How long a worker waits for a Lighthouse that refuses connections before it exits for its node to
# start it again (replica_node.py; a retry, up to --max_restarts): a Lighthouse pod rescheduled onto
# a new node pulls its image and starts within minutes; one away longer is reported, not waited on
# in silence (issue 23: every wait in the recovery path is bounded).
ENV_LIGHTHOUSE_WAIT_S = "TORCHFLEET_INPLACE_LIGHTHOUSE_WAIT_S"
# The most one torchft call may take before the worker exits (stall_guard.py: start_quorum, wait_quorum
# and should_commit have no timeout of their own). 300 s: the restart mode's process-group timeout
# (launcher.py, TORCHFLEET_PG_TIMEOUT_S: a peer that stalls longer has failed), far above the bounds
# of what runs inside one call (quorum + configure + heal metadata + transfer: 40 s by default), with
# room for a heal of a large state over a slow link (longer torchft timeouts raise the default).
ENV_STALL_S = "TORCHFLEET_INPLACE_STALL_S"
EXIT_BAD_SETTINGS = 2  # the node does not start the worker again (replica_node.FINAL_CODES)


_TAIL = 3  # the gradient buffer's last entries: loss sum, sample count, time-limit votes (_bind_gradients)


def recovery_mode(environ: dict[str, str] | os._Environ[str] = os.environ) -> str:
    """The job's recovery mode; a value that is neither mode is refused, naming the variable."""
    mode = environ.get(ENV_RECOVERY, "restart") or "restart"
    if mode not in RECOVERY_MODES:
        raise ValueError(f"{ENV_RECOVERY}={mode!r}: must be one of {', '.join(RECOVERY_MODES)}")
    return mode


def _env_int(name: str, default: int | None, minimum: int) -> int:
    text = os.environ.get(name)
    if text is None or text == "":
        if default is None:
            raise ValueError(f"{name} is not set: the in-place mode needs it (training-image/README.md)")
        return default
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{name}={text!r}: must be a whole number >= {minimum}") from None
    if value < minimum:
        raise ValueError(f"{name}={text!r}: must be a whole number >= {minimum}")
    return value


def _env_seconds(name: str, default: float) -> float:
    text = os.environ.get(name) or ""
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ValueError(f"{name}={text!r}: must be a positive number of seconds")
    return value


def _backend(device: torch.device) -> str:
    """``TORCHFLEET_INPLACE_BACKEND``, else nccl on a GPU and gloo on the CPU; nccl needs a GPU."""
    chosen = os.environ.get(ENV_BACKEND) or ("nccl" if device.type == "cuda" else "gloo")
    if chosen not in ("nccl", "gloo"):
        raise ValueError(f"{ENV_BACKEND}={chosen!r}: must be nccl or gloo")
    if chosen == "nccl" and device.type != "cuda":
        raise ValueError(f"{ENV_BACKEND}=nccl needs a CUDA device and this worker has none: use gloo")
    return chosen


def _group_index() -> int:
    """``TORCHFLEET_REPLICA_GROUP``, else a Kubernetes Indexed Job's ``JOB_COMPLETION_INDEX`` (one per pod)."""
    if os.environ.get(ENV_GROUP, "") == "" and os.environ.get(ENV_COMPLETION_INDEX, "") != "":
        return _env_int(ENV_COMPLETION_INDEX, None, 0)
    return _env_int(ENV_GROUP, None, 0)


def _digest(model: nn.Module) -> float:
    """A cheap fingerprint of the weights: equal on every group that holds the same state.

    A step event's digest is of the weights that step was computed from (the state every group
    agreed on, a healing group's peer's included), taken before the update is queued: see _run.
    """
    with torch.no_grad():  # one reduction per tensor on its device, one transfer: no per-tensor sync
        sums = torch.stack([p.detach().sum(dtype=torch.float64) for p in model.parameters()])
        return round(float(sums.sum()), 9)


class _InplaceRun:
    def __init__(self, task, cfg, stop: StopRequest) -> None:
        self.task, self.cfg, self.stop = task, cfg, stop
        self.group = _group_index()  # the replica group's own id; a spare index's is above the slices
        self.groups = _env_int(ENV_GROUPS, None, 1)
        if self.group >= self.groups and os.environ.get(ENV_GROUP, "") != "":  # a spare index is a pod's only
            raise ValueError(f"{ENV_GROUP}={self.group} must be below {ENV_GROUPS}={self.groups}")
        self.slice = self.group % self.groups  # a spare index's slice (module docstring)
        self.min_groups = _env_int(ENV_MIN_GROUPS, 1, 1)
        self.timeout = timedelta(seconds=_env_seconds(ENV_TIMEOUT_S, 10.0))
        self.quorum_timeout = timedelta(seconds=_env_seconds(ENV_QUORUM_TIMEOUT_S, 10.0))
        self.final_wait_s = _env_seconds(ENV_FINAL_WAIT_S, 600.0)
        self.lighthouse_wait_s = _env_seconds(ENV_LIGHTHOUSE_WAIT_S, 600.0)
        inner = self.quorum_timeout.total_seconds() + 3 * self.timeout.total_seconds()
        self.stall_s = _env_seconds(ENV_STALL_S, max(300.0, inner + 60))
        if self.stall_s <= inner:  # it would end calls that are still within torchft's own bounds
            raise ValueError(f"{ENV_STALL_S}={self.stall_s:g}: must exceed {ENV_QUORUM_TIMEOUT_S} + 3 x "
                             f"{ENV_TIMEOUT_S} ({inner:g} s), what one torchft call may take by its own timeouts")
        self.stop_at = deadline.stop_at()  # --max-duration/--max-cost: all groups stop together, exit 0
        self.lighthouse = os.environ.get(ENV_LIGHTHOUSE, "")
        if not self.lighthouse:
            raise ValueError(f"{ENV_LIGHTHOUSE} is not set: the in-place mode needs the job's Lighthouse address")
        advertised_host()  # a POD_IP that is no address: exit 2 now, not an unreachable group later
        self.device = torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
        self.backend = _backend(self.device)
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
                # the pod IP on Kubernetes, where no other pod resolves this one's hostname (inplace_addresses.py)
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

    _failed_save = 0

    def failed_save(self) -> int:
        return self._failed_save

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
