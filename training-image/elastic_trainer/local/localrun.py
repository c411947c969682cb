"""Elastic jobs on one machine: torchrun "nodes" as local process trees, their events, the measured scenarios.

The one harness behind the real-run tests, ``bench/recovery.py`` and ``torchfleet demo``.
A node is the launcher (``python -m elastic_trainer.launcher``) in its own session, exactly
what a pod runs; its workers print progress events (``events.PREFIX`` + JSON) that are
collected here with the monotonic time they arrived, so figures are measured on one clock.

The etcd they meet at is etcd.py's, the process trees are processes.py's. No torch import here: the
demo's parent process only orchestrates.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

from elastic_trainer.events import PREFIX
from elastic_trainer.local.processes import kill_tree

IMAGE_DIR = Path(__file__).resolve().parents[2]  # training-image/
SYNTHETIC_EXAMPLE = IMAGE_DIR / "examples" / "synthetic.py"


@dataclass(frozen=True)
class Event:
    t: float  # time.monotonic() when the line arrived
    node: str
    data: dict

    @property
    def kind(self) -> str:
        return self.data.get("ev", "")

    def __getitem__(self, key: str):
        return self.data[key]


class EventLog:
    """Events from every node of a job, in arrival order; waiters block on a condition."""

    def __init__(self, echo: Callable[[Event], None] | None = None) -> None:
        self._events: list[Event] = []
        self._cond = threading.Condition()
        self._echo = echo

    def add(self, event: Event) -> None:
        with self._cond:
            self._events.append(event)
            self._cond.notify_all()
        if self._echo:
            self._echo(event)

    def snapshot(self) -> list[Event]:
        with self._cond:
            return list(self._events)

    def wait_for(
        self, match: Callable[[Event], bool], timeout: float, since: float = 0.0, describe: str = ""
    ) -> Event:
        """The first event at or after monotonic time ``since`` that matches."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for event in self._events:
                    if event.t >= since and match(event):
                        return event
                left = deadline - time.monotonic()
                if left <= 0:
                    tail = "\n".join(f"  {e.node} {e.data}" for e in self._events[-15:])
                    raise TimeoutError(f"no event {describe or 'matching'} within {timeout:.0f} s; last:\n{tail}")
                self._cond.wait(left)


class Node:
    """One "machine": the launcher and its torchrun agent and workers, in a new session."""

    def __init__(self, name: str, argv: Sequence[str], env: Mapping[str, str], log_dir: Path, events: EventLog):
        self.name = name
        self.argv = list(argv)
        self.env = dict(env)
        self.log_path = log_dir / f"{name}.log"
        self.events = events
        self.proc: subprocess.Popen[str] | None = None
        self.started_at = 0.0
        self._reader: threading.Thread | None = None

    def start(self) -> Node:
        self.started_at = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, "-u", "-m", "elastic_trainer.launcher", *self.argv],
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            bufsize=1,
            start_new_session=True,  # Ctrl-C in the demo's terminal reaches only us; we clean up
        )
        self._reader = threading.Thread(target=self._read, name=f"read-{self.name}", daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        assert self.proc and self.proc.stdout
        with self.log_path.open("a") as log:
            for line in self.proc.stdout:
                now = time.monotonic()
                log.write(line)
                log.flush()
                if line.startswith(PREFIX):
                    try:
                        data = json.loads(line[len(PREFIX) :])
                    except ValueError:
                        continue
                    self.events.add(Event(now, self.name, data))

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def sigterm(self) -> float:
        """SIGTERM the launcher only, as the kubelet does to a container's PID 1."""
        now = time.monotonic()
        os.kill(self.pid, signal.SIGTERM)
        return now

    def kill(self) -> float:
        """SIGKILL the whole tree at once: the spot instance is gone."""
        now = time.monotonic()
        kill_tree(self.pid, signal.SIGKILL)
        return now

    def dump_stacks(self) -> None:
        """SIGUSR1 to the tree: the launcher, its forkserver and workers print their threads' stacks into the log
        (hooks.py); a process without that handler (multiprocessing's resource tracker) ends, so stop() follows."""
        if self.running():
            kill_tree(self.pid, signal.SIGUSR1)

    def stop(self) -> None:
        """Kill the whole tree, if started, and reap it (at most 10 s): the end of a job or a test."""
        if self.proc is not None:
            kill_tree(self.pid, signal.SIGKILL)
            with suppress(subprocess.TimeoutExpired):
                self.wait(10)

    def wait(self, timeout: float) -> int:
        assert self.proc is not None
        rc = self.proc.wait(timeout)
        if self._reader:
            self._reader.join(5)
        return rc

    def log_text(self) -> str:
        return self.log_path.read_text() if self.log_path.exists() else ""


@dataclass
class LocalJob:
    """Nodes of one elastic job sharing an etcd endpoint, a run id and a checkpoint directory."""

    etcd_endpoint: str
    run_id: str
    workdir: Path
    script_args: Sequence[str]
    nnodes: str = "1:2"
    script: Path = SYNTHETIC_EXAMPLE
    rdzv_conf: str | None = None  # None: the launcher's tuned defaults
    extra_env: Mapping[str, str] = field(default_factory=dict)
    echo: Callable[[Event], None] | None = None
    nodes: list[Node] = field(default_factory=list)
    # False: the checkpoint folder reaches the script only as $TORCHFLEET_CHECKPOINT_DIR, as in a job
    # `torchfleet submit` makes (a script with its own flags, Hydra's say, refuses --checkpoint-dir).
    checkpoint_flag: bool = True

    def __post_init__(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.events = EventLog(self.echo)

    @property
    def checkpoint_dir(self) -> Path:
        return self.workdir / "checkpoints"

    def node_env(self) -> dict[str, str]:
        env = dict(os.environ)
        paths = [str(IMAGE_DIR), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
        env.update(
            PYTHONPATH=os.pathsep.join(dict.fromkeys(paths)),
            PYTHONUNBUFFERED="1",
            # loopback only: gloo would otherwise pick the interface of the hostname
            GLOO_SOCKET_IFNAME="lo",
            OMP_NUM_THREADS="1",
            TORCHFLEET_CHECKPOINT_DIR=str(self.checkpoint_dir),  # train_config.ENV_CHECKPOINT_DIR
            TORCHFLEET_EVENTS="json",  # events.ENV_EVENTS: this harness reads them, whatever the user's shell set
            TORCHFLEET_STACKS_ON_SIGUSR1="1",  # hooks.STACKS_ON_SIGUSR1: dump_stacks() when a test times out
        )
        env.update(self.extra_env)
        return env

    def node_argv(self) -> list[str]:
        argv = [
            f"--nnodes={self.nnodes}",
            "--nproc_per_node=1",
            f"--rdzv_endpoint={self.etcd_endpoint}",
            f"--rdzv_id={self.run_id}",
            "--local_addr=127.0.0.1",
        ]
        if self.rdzv_conf is not None:
            argv.append(f"--rdzv_conf={self.rdzv_conf}")
        flag = [f"--checkpoint-dir={self.checkpoint_dir}"] if self.checkpoint_flag else []
        return [*argv, str(self.script), *flag, *self.script_args]

    def start_node(self, name: str | None = None, env: Mapping[str, str] | None = None) -> Node:
        """``env`` is this node's own on top of the job's (e.g. ``CUDA_VISIBLE_DEVICES``: a GPU each)."""
        node = Node(name or f"node{len(self.nodes)}", self.node_argv(), {**self.node_env(), **(env or {})},
                    self.workdir, self.events)
        self.nodes.append(node)
        return node.start()

    def dump_stacks(self, settle_s: float = 2.0) -> None:
        """Every running node's stacks into its log (Node.dump_stacks), then a moment for them to be read."""
        running = [node for node in self.nodes if node.running()]
        for node in running:
            node.dump_stacks()
        if running:
            time.sleep(settle_s)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def __enter__(self) -> LocalJob:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- helpers on the event stream -------------------------------------------------------
    def wait_for(self, kind: str, timeout: float, since: float = 0.0, **fields) -> Event:
        def match(event: Event) -> bool:
            return event.kind == kind and all(event.data.get(k) == v for k, v in fields.items())

        return self.events.wait_for(match, timeout, since, describe=f"{kind} {fields or ''}")

    def steps(self) -> list[Event]:
        return [e for e in self.events.snapshot() if e.kind == "step"]


# -- the measured scenarios (bench/recovery.py and `torchfleet demo` report these) ----------------
def kill_and_resume(job: LocalJob, victim: Node, world_after: int, timeout: float = 180) -> dict:
    """SIGKILL ``victim``'s tree; time until the survivors take their next step."""
    killed_at = victim.kill()
    first = job.events.wait_for(
        lambda e: e.kind == "step" and e.t > killed_at and e["world"] == world_after, timeout,
        describe=f"step at world size {world_after} after the kill",
    )
    # "start" when no checkpoint had been committed yet: everything is redone from step 0
    restarts = [e for e in job.events.snapshot() if e.kind in ("resumed", "start") and killed_at < e.t <= first.t]
    resumed_step = restarts[-1].data.get("step", 0) if restarts else first["step"] - 1
    # The old group's last step, even if its event came just after the kill (a step the victim had
    # already done its part of): what `torchfleet status` counts as lost too (jobs/summary.py).
    old_group_until = restarts[0].t if restarts else first.t
    last_step = max((e["step"] for e in job.steps() if e.t < old_group_until), default=0)
    return {
        "node": victim.name,
        "last_step_before_kill": last_step,
        "resumed_from_step": resumed_step,
        "lost_steps": last_step - resumed_step,
        "kill_to_resume_s": round(first.t - killed_at, 3),
        "at": killed_at,
    }


def add_node_and_join(job: LocalJob, name: str, world_after: int, timeout: float = 180) -> dict:
    """Start a replacement node; time until it trains together with the others."""
    node = job.start_node(name)
    first = job.events.wait_for(
        lambda e: e.kind == "step" and e.t > node.started_at and e["world"] == world_after, timeout,
        describe=f"step at world size {world_after} after {name} started",
    )
    return {"node": name, "replacement_join_s": round(first.t - node.started_at, 3), "step": first["step"],
            "at": node.started_at}


def sigterm_and_checkpoint(job: LocalJob, node: Node, timeout: float = 120) -> dict:
    """A spot notice: SIGTERM the launcher; time until the checkpoint is committed."""
    sent_at = node.sigterm()
    committed = job.wait_for("ckpt", timeout, since=sent_at, reason="stop")
    code = node.wait(timeout)
    return {"node": node.name, "sigterm_checkpoint_s": round(committed.t - sent_at, 3),
            "checkpoint_step": committed["step"], "exit_code": code, "at": sent_at}
