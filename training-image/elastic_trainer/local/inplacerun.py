"""In-place jobs on one machine: a real torchft Lighthouse and replica-group "nodes" as local process trees.

The harness of the in-place tests and ``bench/goodput.py`` (localrun.py is the restart mode's).
A node is the launcher with ``TORCHFLEET_RECOVERY=inplace`` in its own session, exactly what a
pod of an in-place job runs; events arrive on one clock, as in localrun.

No torch import here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

from elastic_trainer.local.localrun import IMAGE_DIR, SYNTHETIC_EXAMPLE, EventLog, Node
from elastic_trainer.local.processes import free_port, worker_pids

ENV_LIGHTHOUSE_BINARY = "TORCHFLEET_LIGHTHOUSE_BINARY"
# How long the Lighthouse waits for a silent group before the quorum goes on without it. The
# survivors' next step comes about this long after a kill (issue 14's target: within 2 s).
HEARTBEAT_TIMEOUT_MS = 1000


def lighthouse_binary() -> str | None:
    """torchft's ``torchft_lighthouse``: ``$TORCHFLEET_LIGHTHOUSE_BINARY``, beside this Python, or on PATH."""
    chosen = os.environ.get(ENV_LIGHTHOUSE_BINARY)
    if chosen:
        return chosen if os.access(chosen, os.X_OK) else None
    beside = Path(sys.executable).parent / "torchft_lighthouse"
    return str(beside) if os.access(beside, os.X_OK) else shutil.which("torchft_lighthouse")


def lighthouse_command(port: int, min_replicas: int = 1, heartbeat_timeout_ms: int = HEARTBEAT_TIMEOUT_MS,
                       join_timeout_ms: int = 1000, binary: str | None = None) -> list[str]:
    """The Lighthouse of one job. ``join_timeout_ms``: how long a quorum waits for a group that
    heartbeats but has not asked to join yet (a replacement starting up) before going on without it."""
    return [binary or lighthouse_binary() or "torchft_lighthouse", f"--bind=127.0.0.1:{port}",
            f"--min_replicas={min_replicas}", f"--heartbeat_timeout_ms={heartbeat_timeout_ms}",
            f"--join_timeout_ms={join_timeout_ms}", "--quorum_tick_ms=50"]


class Lighthouse:
    """One job's Lighthouse as a real process; ``stop`` kills it, ``start`` brings it back on the same port."""

    def __init__(self, port: int | None = None, log_path: Path | None = None, min_replicas: int = 1) -> None:
        self.port = port or free_port()
        self.min_replicas = min_replicas
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Lighthouse:
        log = self.log_path.open("ab") if self.log_path else subprocess.DEVNULL
        self.proc = subprocess.Popen(lighthouse_command(self.port, self.min_replicas), stdout=log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        if self.log_path:
            log.close()
        return self

    def stop(self) -> float:
        now = time.monotonic()
        if self.proc is not None:
            with suppress(ProcessLookupError):
                self.proc.kill()
            self.proc.wait()
            self.proc = None
        return now


@dataclass
class InplaceJob:
    """Replica groups of one in-place job sharing a Lighthouse and a checkpoint directory."""

    workdir: Path
    script_args: Sequence[str]
    groups: int = 3
    # Groups a step needs, told to the Lighthouse and the trainers alike, as a Kubernetes job does
    # (torchfleet/jobs/inplace_job.py): a trainer wanting more than its Lighthouse forms quorums of
    # only drops steps, and a group joining one at step 0 deadlocks with it.
    min_groups: int = 1
    script: Path = SYNTHETIC_EXAMPLE
    extra_env: Mapping[str, str] = field(default_factory=dict)
    nodes: list[Node] = field(default_factory=list)
    checkpoint_flag: bool = True  # as LocalJob's

    def __post_init__(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.events = EventLog()
        self.lighthouse = Lighthouse(log_path=self.workdir / "lighthouse.log", min_replicas=self.min_groups)

    @property
    def checkpoint_dir(self) -> Path:
        return self.workdir / "checkpoints"

    def node_env(self, group: int) -> dict[str, str]:
        env = dict(os.environ)
        paths = [str(IMAGE_DIR), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
        env.update(
            PYTHONPATH=os.pathsep.join(dict.fromkeys(paths)), PYTHONUNBUFFERED="1", GLOO_SOCKET_IFNAME="lo",
            OMP_NUM_THREADS="1", TORCHFLEET_RECOVERY="inplace", TORCHFT_LIGHTHOUSE=self.lighthouse.address,
            TORCHFLEET_REPLICA_GROUP=str(group), TORCHFLEET_REPLICA_GROUPS=str(self.groups),
            TORCHFLEET_MIN_REPLICA_GROUPS=str(self.min_groups),
            RUST_LOG="error",  # torchft's servers log every quorum at info
            TORCHFLEET_CHECKPOINT_DIR=str(self.checkpoint_dir),  # train_config.ENV_CHECKPOINT_DIR
            TORCHFLEET_EVENTS="json",  # events.ENV_EVENTS: this harness reads them, whatever the user's shell set
        )
        env.update(self.extra_env)
        return env

    def start_group(self, group: int, name: str | None = None) -> Node:
        flag = [f"--checkpoint-dir={self.checkpoint_dir}"] if self.checkpoint_flag else []
        argv = ["--nproc_per_node=1", str(self.script), *flag, *self.script_args]
        node = Node(name or f"group{group}-{len(self.nodes)}", argv, self.node_env(group), self.workdir, self.events)
        node.group = group  # type: ignore[attr-defined]
        self.nodes.append(node)
        return node.start()

    def workers(self, node: Node) -> list[int]:
        """The worker process(es) a node runs (its launcher's children)."""
        return worker_pids(node.pid)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
        self.lighthouse.stop()

    def __enter__(self) -> InplaceJob:
        self.lighthouse.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def steps(self, node: str | None = None) -> list:
        return [e for e in self.events.snapshot() if e.kind == "step" and (node is None or e.node == node)]
