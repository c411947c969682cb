"""Many rendezvous-only jobs on one machine: the parent side of ``rdzvnode`` (issue 15).

A :class:`NodeHost` is one ``python -m elastic_trainer.local.rdzvnode`` process that forks nodes on
request; a :class:`RdzvJob` is a group of those nodes sharing a run id. The measured scenarios
are the rendezvous part of a spot interruption, on one clock (``time.monotonic``, which every
process on the machine shares; nodes stamp their own events):

- :meth:`RdzvJob.form`: every node calls ``next_rendezvous`` at once; until all are in one round.
- :meth:`RdzvJob.kill_one`: one node SIGKILLed, the survivors re-enter at once (their workers
  would fail as the peer dies); until the survivors are in one round without it.
- :meth:`RdzvJob.replace`: a new node joins; the others see it waiting (their monitor loop) and
  re-enter; until all are in one round.

No torch import here: this runs in the bench's and the tests' own processes.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

from elastic_trainer.events import PREFIX

IMAGE_DIR = Path(__file__).resolve().parents[2]  # training-image/


COUNTERS = ("sets", "conflicts", "gets", "declared_dead", "late_s", "dead_age_s")


class RendezvousFailed(RuntimeError):
    """A group did not form in time, or a node's handler raised."""


class EventStream:
    """Every node's events, in arrival order, with a condition to wait on."""

    def __init__(self) -> None:
        self.events: list[dict] = []
        self.cond = threading.Condition()

    def add(self, event: dict) -> None:
        with self.cond:
            self.events.append(event)
            self.cond.notify_all()

    def wait(self, check: Callable[[list[dict]], object], timeout: float, describe: str) -> object:
        """The first truthy ``check(events)``; re-evaluated whenever an event arrives."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                found = check(self.events)
                if found:
                    return found
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{describe}: not within {timeout:.0f} s")
                self.cond.wait(min(left, 1.0))


class NodeHost:
    """The process that forks rendezvous nodes (torch's rendezvous code loaded once, pages shared)."""

    def __init__(self, log_path: Path) -> None:
        env = dict(os.environ)
        env.update(
            PYTHONPATH=os.pathsep.join(dict.fromkeys([str(IMAGE_DIR), *filter(None, env.get("PYTHONPATH", "")
                                                                            .split(os.pathsep))])),
            # what the launcher sets on every node (training-image/README.md): no TCPStore in the rendezvous
            TORCH_DISABLE_SHARE_RDZV_TCP_STORE="1",
        )
        self.log_path = log_path
        self._log = log_path.open("ab")
        self.stream = EventStream()
        self.proc = subprocess.Popen(
            [sys.executable, "-u", "-m", "elastic_trainer.local.rdzvnode"], env=env, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self._log, start_new_session=True,
        )
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, name="rdzv-host-reader", daemon=True)
        self._reader.start()
        self.pids: dict[str, int] = {}
        self.stream.wait(lambda evs: any(e["ev"] == "host" for e in evs), 60, "the rendezvous node host to start")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace")
            if line.startswith(PREFIX):
                with suppress(ValueError):
                    self.stream.add(json.loads(line[len(PREFIX):]))
            else:
                self._log.write(raw)

    def spawn(self, requests: Sequence[Mapping[str, object]], timeout: float = 120) -> dict[str, int]:
        """Fork one node per request (``name``, ``endpoint``, ``run_id``, ``min_nodes``, ``max_nodes``, ``conf``)."""
        assert self.proc.stdin is not None
        with self._lock:
            for request in requests:
                self.proc.stdin.write((json.dumps(request) + "\n").encode())
            self.proc.stdin.flush()
        names = {str(r["name"]) for r in requests}

        def ready(events: list[dict]) -> dict[str, int] | None:
            found = {e["node"]: e["pid"] for e in events if e["ev"] == "ready" and e["node"] in names}
            return found if len(found) == len(names) else None

        found = self.stream.wait(ready, timeout, f"{len(names)} nodes to start")
        self.pids.update(found)  # type: ignore[arg-type]
        return found  # type: ignore[return-value]

    def signal(self, names: Iterable[str], signum: int) -> float:
        """Signal nodes; returns the monotonic time just before the first signal."""
        now = time.monotonic()
        for name in names:
            with suppress(ProcessLookupError):
                os.kill(self.pids[name], signum)
        return now

    def counters(self, names: Sequence[str], timeout: float = 60) -> dict[str, dict[str, int]]:
        """Each live node's counters (``COUNTERS``: rdzvnode's ``_Counters``), asked for by SIGUSR2."""
        since = self.signal(names, signal.SIGUSR2)
        wanted = set(names)

        def replies(events: list[dict]) -> dict[str, dict[str, int]] | None:
            got = {e["node"]: {k: e[k] for k in COUNTERS}
                   for e in events if e["ev"] == "stats" and e["t"] >= since and e["node"] in wanted}
            return got if len(got) == len(wanted) else None

        return self.stream.wait(replies, timeout, "counters from every node")  # type: ignore[return-value]

    def memory_kb(self, name: str) -> dict[str, int]:
        """VmRSS (shared pages counted in full) and Pss (shared pages divided among their users)."""
        pid = self.pids[name]
        rss = pss = 0
        with suppress(OSError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    pss = int(line.split()[1])
        return {"rss_kb": rss, "pss_kb": pss}

    def close(self) -> None:
        for pid in self.pids.values():
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self._reader.join(5)
        self._log.close()

    def __enter__(self) -> NodeHost:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _formed_round(events: list[dict], names: Sequence[str], world: int, since: float) -> dict | None:
    """When every node in ``names`` has, as its latest event since ``since``, joined one same round of
    size ``world``: that round, when the last node got there, and every round seen on the way."""
    wanted = set(names)
    latest: dict[str, dict] = {}
    rounds: set[int] = set()
    for event in events:
        if event.get("node") in wanted and event["t"] >= since:
            if event["ev"] == "error":
                raise RendezvousFailed(f"{event['node']}: {event['error']}")
            if event["ev"] in ("formed", "restart"):
                latest[event["node"]] = event
                if event["ev"] == "formed":
                    rounds.add(event["round"])
    if len(latest) < len(wanted) or any(e["ev"] != "formed" for e in latest.values()):
        return None
    if {e["round"] for e in latest.values()} != {next(iter(latest.values()))["round"]}:
        return None
    if any(e["world"] != world for e in latest.values()):
        return None
    formed = [e for e in events if e["ev"] == "formed" and e.get("node") in wanted and e["t"] >= since]
    return {
        "round": next(iter(latest.values()))["round"],
        "t": max(e["t"] for e in latest.values()),
        "rounds": len(rounds),
        "partial_rounds": len({e["round"] for e in formed if e["world"] != world}),
    }


@dataclass
class RdzvJob:
    """Nodes of one job (one run id) on a :class:`NodeHost`; endpoints are used round-robin."""

    host: NodeHost
    run_id: str
    endpoints: Sequence[str]
    min_nodes: int
    max_nodes: int
    conf: Mapping[str, str]
    live: list[str] = field(default_factory=list)
    spawned: int = 0

    def _requests(self, count: int) -> list[dict]:
        requests = []
        for _ in range(count):
            name = f"{self.run_id}-n{self.spawned}"
            requests.append({"name": name, "endpoint": self.endpoints[self.spawned % len(self.endpoints)],
                             "run_id": self.run_id, "min_nodes": self.min_nodes, "max_nodes": self.max_nodes,
                             "conf": dict(self.conf)})
            self.spawned += 1
        return requests

    def start(self, count: int) -> list[dict]:
        """Requests for ``count`` new nodes (spawn several jobs' at once with ``NodeHost.spawn``)."""
        requests = self._requests(count)
        self.live.extend(r["name"] for r in requests)
        return requests

    def wait_formed(self, since: float, timeout: float) -> dict:
        world = len(self.live)
        try:
            found = self.host.stream.wait(lambda evs: _formed_round(evs, self.live, world, since), timeout,
                                          f"job {self.run_id}: {world} nodes in one round")
        except TimeoutError as exc:
            events = [e for e in self.host.stream.events if e.get("node") in self.live and e["t"] >= since]
            formed = {e["node"] for e in events if e["ev"] == "formed" and e["world"] == world}
            latest = {e["node"]: e for e in events if e["ev"] in ("formed", "restart")}
            seen = ", ".join(f"{name.rsplit('-', 1)[-1]}: " + (
                f"round {e['round']} of {e['world']}" if e["ev"] == "formed" else f"re-entering ({e['reason']})")
                for name, e in sorted(latest.items()))
            raise RendezvousFailed(f"{exc} ({len(formed)}/{world} reported a round of {world}; "
                                   f"{len(events)} events; last: {seen or 'none'})") from None
        found = dict(found)  # type: ignore[arg-type]
        found["seconds"] = round(found.pop("t") - since, 3)
        return found

    def kill_one(self, victim: str | None = None) -> tuple[str, float]:
        """SIGKILL one node and tell the survivors to re-enter; (victim, time of the kill)."""
        victim = victim or self.live[len(self.live) // 2]
        killed_at = self.host.signal([victim], signal.SIGKILL)
        self.live.remove(victim)
        self.host.signal(self.live, signal.SIGUSR1)
        return victim, killed_at


def etcd_metrics(endpoint: str) -> dict[str, float]:
    """Counters from etcd's /metrics (client port): raft proposals committed (every v2 write, a failed
    compare-and-swap included: the comparison happens when the entry is applied) and v2 store actions."""
    with urllib.request.urlopen(f"http://{endpoint}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    found: dict[str, float] = {}
    for match in re.finditer(r"^(etcd_server_proposals_committed_total|etcd_debugging_store_writes_total"
                             r"|etcd_debugging_store_reads_total|etcd_debugging_store_expires_total)"
                             r"(\{[^}]*\})? (\S+)$", text, re.MULTILINE):
        found[match[1]] = found.get(match[1], 0.0) + float(match[3])  # summed over the action label
    return found


def rendezvous_state_bytes(endpoint: str, run_id: str) -> int:
    """Size of a job's rendezvous state as stored (base64): what every heartbeat writes."""
    url = f"http://{endpoint}/v2/keys/torch/elastic/rendezvous/{run_id}"
    with urllib.request.urlopen(url, timeout=10) as reply:
        return len(json.loads(reply.read())["node"]["value"])
