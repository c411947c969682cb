"""Restart mode: workers waiting on a node the rendezvous has declared dead are restarted at once (issue 23).

torchrun's agent restarts its workers when one of them fails or when a new node waits to join
(torch/distributed/elastic/agent/server/api.py, ``_invoke_run``), never because a node of the running
round died: the survivors' workers learn it only from a collective that fails. A node killed after
the rendezvous and before the workers' process group formed (they were starting) left the
survivor's worker waiting in ``init_process_group`` for the dead node's ranks until the process-group
timeout (TORCHFLEET_PG_TIMEOUT_S, 300 s): reproduced with a 90 s timeout, the survivor's next step
came 122 s after the kill, and it trained nothing meanwhile (tests/training_image/test_lost_peer.py).

The dynamic rendezvous (etcd-v2 and c10d backends) drops a node whose heartbeat is older than
``keep_alive_interval x keep_alive_max_attempt`` from the round's participants whenever it syncs its
state (``_BackendRendezvousStateHolder._sanitize``), which the agent does at every monitor pass
(``num_nodes_waiting``) and on each keep-alive. When the rendezvous then has fewer nodes than the
workers' group (see below), the monitor reports the workers UNHEALTHY and the agent restarts them into
a new round (one of ``--max_restarts``, as the collective's failure would have used). The bound is
the heartbeat expiry (3 s with the launcher's tuned settings) plus a monitor pass, not minutes.

A live node can be dropped too: at a load average of 6-12 on 2 cores, an agent busy starting its
workers missed heartbeats for over 3 s and both nodes of a new round saw the other dropped (a first
version of this restarted them: an extra restart at every start, bench/kills.py). A live node's
late keep-alive can still land before its drop is written to etcd, and a node that was dropped for good
rejoins by itself (below); a dead one never comes back. So a peer counts as lost only when it is in
neither ``participants`` nor ``last_heartbeats``, for a whole heartbeat window
(``keep_alive_interval x keep_alive_max_attempt``) in a row: the bound for a true loss is two such
windows (6 s with the tuned settings) plus a monitor pass. This reads the handler's private state
(torch 2.13's DynamicRendezvousHandler ``_state_holder.state`` and ``_settings``); any other handler,
or a torch without it, is left alone. No torch import at module level: the launcher stays light.

A node can also lose the rendezvous itself: its own heartbeat starved past the window, it is dropped (by a
peer's write or its own sync) and never heartbeats again, since torch's keep-alive only refreshes a node
still in ``last_heartbeats`` (``_should_keep_alive``). Its agent kept training the old round, unseen: with
``--nnodes=1:2`` a node joining meanwhile found no live participant, moved the run to the next round
(``_remove_participant_epilogue``) and completed it alone, and both world-1 groups of one run id trained
apart and waited for each other forever (issue 23; num_nodes_waiting counts only the wait list). So an
agent whose own node is in neither ``participants`` nor ``last_heartbeats`` of a live rendezvous restarts
its workers at the next monitor pass: its rejoin goes to the wait list of the newer round, whose agents
then restart into one round with it (tests/training_image/test_lost_peer.py reproduces it with SIGSTOP).

A node never declares ITSELF dead: torch's sanitizer runs on every sync, the node's own included, so an agent
starved past the window (a lone first node starting its worker at a load average of 8-11 on 2 cores, 2 of 2
``torchfleet run --local`` runs) dropped itself at its next sync, emptied its round and restarted its
workers to rejoin: one restart for nothing, and a round any joiner could have formed alone meanwhile. A node
that syncs is alive, so its own expired heartbeat is kept through the sanitizer and refreshed by its next
keep-alive (``_should_keep_alive``: it is due). A peer's sync still drops a starved node, and it rejoins as above.
"""

from __future__ import annotations

import sys
import time

_FLAG = "_torchfleet_lost_peer"


def nodes_present(handler: object) -> int | None:
    """Nodes of the rendezvous as its last sync saw them, in the round or heartbeating (a live node dropped
    from the round heartbeats again); None for a handler without that state, and for a closed rendezvous:
    the run has ended (a node's failure closes it, launch_agent), its workers end by themselves, and a
    new round could not form (a restart would only repeat their work)."""
    state = getattr(getattr(handler, "_state_holder", None), "state", None)
    participants, heartbeats = getattr(state, "participants", None), getattr(state, "last_heartbeats", None)
    if getattr(state, "closed", True) or not isinstance(participants, dict) or not isinstance(heartbeats, dict):
        return None
    return len(set(participants) | set(heartbeats))


def dropped_self(handler: object) -> bool:
    """Whether the rendezvous, as its last sync saw it, has dropped this node (in neither the round nor the
    heartbeats) while it is still open: permanent, the node's keep-alive no longer writes (module docstring)."""
    state = getattr(getattr(handler, "_state_holder", None), "state", None)
    node = getattr(handler, "_this_node", None)
    participants, heartbeats = getattr(state, "participants", None), getattr(state, "last_heartbeats", None)
    if node is None or getattr(state, "closed", True):
        return False
    if not isinstance(participants, dict) or not isinstance(heartbeats, dict):
        return False
    return node not in participants and node not in heartbeats


def heartbeat_window_s(handler: object) -> float:
    """``keep_alive_interval x keep_alive_max_attempt`` of the handler's settings (torch's defaults: 15 s)."""
    settings = getattr(handler, "_settings", None)
    interval = getattr(getattr(settings, "keep_alive_interval", None), "total_seconds", lambda: 5.0)()
    return interval * getattr(settings, "keep_alive_max_attempt", 3)


def install() -> None:
    """Wrap the local agent's monitor (idempotent; keeps the flags of the wrappers already there)."""
    from torch.distributed.elastic.agent.server.api import RunResult, WorkerState
    from torch.distributed.elastic.agent.server.local_elastic_agent import LocalElasticAgent

    monitor = LocalElasticAgent._monitor_workers
    if getattr(monitor, _FLAG, False):
        return
    _keep_own_heartbeat()

    def _monitor_workers(self, worker_group):
        result = monitor(self, worker_group)
        if result.state == WorkerState.HEALTHY and dropped_self(self._rdzv_handler):
            print(
                f"[torchfleet] the rendezvous dropped this node (its heartbeats stopped for over "
                f"{heartbeat_window_s(self._rdzv_handler):g} s; round {self._rdzv_handler._state_holder.state.round} "
                "goes on without it): restarting the workers to rejoin, instead of training a round no other "
                "node is in",
                file=sys.stderr,
                flush=True,
            )
            self._torchfleet_short_since = None
            return RunResult(state=WorkerState.UNHEALTHY)
        present = nodes_present(self._rdzv_handler) if result.state == WorkerState.HEALTHY else None
        if present is None or present >= worker_group.group_world_size:
            self._torchfleet_short_since = None
            return result
        now = time.monotonic()
        since = getattr(self, "_torchfleet_short_since", None) or now
        self._torchfleet_short_since = since
        if now - since < heartbeat_window_s(self._rdzv_handler):  # a live node heartbeats again within it
            return result
        self._torchfleet_short_since = None
        print(
            f"[torchfleet] the rendezvous has {present} of this round's {worker_group.group_world_size} nodes "
            "(a node's heartbeats stopped): restarting the workers into a new round instead of letting them "
            "wait for the lost node until the process-group timeout (TORCHFLEET_PG_TIMEOUT_S)",
            file=sys.stderr,
            flush=True,
        )
        return RunResult(state=WorkerState.UNHEALTHY)

    _monitor_workers.__dict__.update(getattr(monitor, "__dict__", {}))  # e.g. launcher.py's exit-2 flag
    setattr(_monitor_workers, _FLAG, True)
    LocalElasticAgent._monitor_workers = _monitor_workers  # type: ignore[method-assign]


def _keep_own_heartbeat() -> None:
    """The sanitizer of each node's state holder skips that node itself (module docstring): torch 2.13's
    ``_BackendRendezvousStateHolder._sanitize`` drops every node whose heartbeat expired, the syncing one too.
    The handler tells its holder which node it is; a holder without one (another handler) is left as torch has it."""
    from torch.distributed.elastic.rendezvous import dynamic_rendezvous as dr

    holder_cls, handler_cls = dr._BackendRendezvousStateHolder, dr.DynamicRendezvousHandler
    sanitize, init = holder_cls._sanitize, handler_cls.__init__

    def _sanitize(self) -> None:
        node = getattr(self, "_torchfleet_this_node", None)
        heartbeats = self._state.last_heartbeats
        own = heartbeats.pop(node, None) if node is not None else None
        try:
            sanitize(self)
        finally:
            if own is not None:
                heartbeats[node] = own

    def __init__(self, *args, **kwargs) -> None:
        init(self, *args, **kwargs)
        holder = getattr(self, "_state_holder", None)
        if isinstance(holder, holder_cls):
            holder._torchfleet_this_node = self._this_node

    holder_cls._sanitize = _sanitize  # type: ignore[method-assign]
    handler_cls.__init__ = __init__  # type: ignore[method-assign]
