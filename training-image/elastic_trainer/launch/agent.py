"""torchrun's elastic agent, run in this process with what Torchfleet changes about it.

``run_torchrun`` runs torchrun's ``run`` here (not as a child process), so that its exceptions map
to exit codes the controllers act on: 128 + signal for a stop, 2 (final) when a worker exited 2,
75 (retried) when etcd is unreachable or the rendezvous closed without this node, 1 otherwise. Before
it, the agent is patched where torchrun has no option for what a spot job needs: a worker exiting 2
is not restarted (``_make_bad_input_final``), nor one that failed 3 times in a row before its first step
with the same error (first_step.py: exit 1, its traceback printed), a worker's exit code is logged in one line
(``_quiet_worker_exits``), a node lost before its peers formed their group restarts them
(lost_peer.py), and the rendezvous store's keys expire (rdzv_store_ttl.py). ``start_forkserver`` and
``warm_agent_imports`` pay imports while the agent is still in the rendezvous (warm.py).
No torch import at module level: the launcher imports this before it knows it will run torchrun.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Mapping, Sequence

from elastic_trainer import ENV_WARM_MODULES, EXIT_MEMBERSHIP_CHANGE
from elastic_trainer.launch import first_step, lost_peer
from elastic_trainer.launch.plan import PRELOAD_MODULES
from elastic_trainer.launch.worker_exits import debug

EXIT_BAD_INPUT = 2  # argparse's exit code for a bad argument, and the trainer's for a bad setting
EXIT_RDZV_UNAVAILABLE = 75  # EX_TEMPFAIL (sysexits.h): retry the node later


def start_forkserver(modules: Sequence[str] = ()) -> None:
    import multiprocessing
    import multiprocessing.forkserver

    # The forkserver inherits this environment; warm.py imports these after torch, each guarded:
    # multiprocessing's own preload only forgives an ImportError, and any other error raised by
    # a module's import would kill the forkserver, and with it every worker start.
    os.environ[ENV_WARM_MODULES] = ",".join(modules)
    multiprocessing.set_forkserver_preload(list(PRELOAD_MODULES))
    # now, so that warming up overlaps the rendezvous instead of following it
    multiprocessing.forkserver.ensure_running()


def warm_agent_imports() -> None:
    """Import torch._dynamo in the agent, in the background, before any worker can fail.

    torchrun logs a worker's failure with ``logger.exception``, and torch's log formatter imports
    ``torch._dynamo`` to format it (torch/_logging/_internal.py): sympy, inductor's config and the
    DTensor op tables, 5 s on a loaded CPU here, paid inside the agent between the failure and the
    restart, once per launcher. It is why a node's first worker restart was slower than the later
    ones (CPU: 6.2 s against 1.6 s; an H100 machine: 20.6 s against 13-14 s, docs/benchmarks.md).
    """

    def work() -> None:
        try:
            import torch._dynamo  # noqa: F401
        except Exception as exc:  # an optimisation only
            print(f"[torchfleet] agent warm-up: torch._dynamo not imported ({exc})", file=sys.stderr, flush=True)

    threading.Thread(target=work, name="warm-agent-imports", daemon=True).start()


def _make_bad_input_final() -> None:
    """A worker that exits 2 ends its agent's run at once instead of being restarted.

    torchrun has no option for exit codes not worth a retry: its agent restarts a failed worker group
    while ``_remaining_restarts`` is above 0 (torch/distributed/elastic/agent/server/api.py,
    ``_invoke_run``). Wrapping the local agent's monitor to zero that count when a worker exited 2
    makes the agent stop its workers and return the failure, which ``launch_agent`` raises as
    ChildFailedError (closing the rendezvous, as any failed run does). Idempotent.
    """
    from torch.distributed.elastic.agent.server.api import WorkerState
    from torch.distributed.elastic.agent.server.local_elastic_agent import LocalElasticAgent

    monitor = LocalElasticAgent._monitor_workers
    if getattr(monitor, "_torchfleet_final_exit", False):
        return

    def _monitor_workers(self, worker_group):
        result = monitor(self, worker_group)
        if result.state == WorkerState.FAILED and _exit_codes(result.failures) & {EXIT_BAD_INPUT}:
            if self._remaining_restarts > 0:
                print(f"[torchfleet] a worker exited {EXIT_BAD_INPUT} (a bad argument or setting): not restarting "
                      "it, every attempt would fail the same way", file=sys.stderr, flush=True)
            self._remaining_restarts = 0
        return result

    _monitor_workers._torchfleet_final_exit = True  # type: ignore[attr-defined]
    LocalElasticAgent._monitor_workers = _monitor_workers  # type: ignore[method-assign]


def _quiet_worker_exits() -> None:
    """The agent's report of a worker that exited with a code: one line, no traceback (issue 22).

    torchrun logs every failed worker with ``logger.exception`` (torch/distributed/elastic/
    multiprocessing/api.py, ``_poll``): for a worker that raised, the traceback is the worker's and
    stays; for one that exited with a code it is the agent's own ``join`` (7 lines after each node
    loss, on every survivor). Exit 75 is the trainer's "a peer left": the worker has said so in one
    line, so the agent's record goes. ``TORCHFLEET_DEBUG=1`` keeps everything. Idempotent.
    """
    import logging

    from torch.multiprocessing.spawn import ProcessExitedException

    class WorkerExits(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            exc = record.exc_info[1] if record.exc_info else None
            if not isinstance(exc, ProcessExitedException) or debug():
                return True
            if exc.exit_code == EXIT_MEMBERSHIP_CHANGE:
                return False
            record.exc_info, record.exc_text = None, None
            return True

    agent_log = logging.getLogger("torch.distributed.elastic.multiprocessing.api")
    if not any(type(f).__name__ == "WorkerExits" for f in agent_log.filters):
        agent_log.addFilter(WorkerExits())


def _exit_codes(failures: Mapping[int, object]) -> set[int]:
    return {getattr(failure, "exitcode", None) for failure in (failures or {}).values()} - {None}


def closed_rendezvous_message(rdzv_id: str, endpoint: str) -> str:
    """What a bare RendezvousClosedError means for this node, and what to do (issue 22)."""
    return (
        f"[torchfleet] the rendezvous {rdzv_id!r} (etcd {endpoint}) is closed (RendezvousClosedError): the run "
        "under this id has already ended, finished or failed on another node, so this node cannot join it. A node "
        "that starts after the last step (one that was Pending) meets this and loses nothing; the other nodes' logs "
        "say how the run ended. A new run that reuses a finished run's --rdzv_id meets it too: etcd-v2 keeps a "
        "closed rendezvous for 2 hours, so give every run its own id (torchfleet submit makes one per submission). "
        f"Exit {EXIT_RDZV_UNAVAILABLE}, to be retried"
    )


def _join_timeout(config) -> str:
    """The rendezvous's join_timeout from torchrun's --rdzv_conf (torch's default: 600 s)."""
    pairs = dict(item.split("=", 1) for item in (config.rdzv_conf or "").split(",") if "=" in item)
    value = pairs.get("join_timeout")
    return f"{value} s" if value is not None else "600 s, torch's default"


def run_torchrun(torchrun_args: list[str]) -> int:
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, record
    from torch.distributed.elastic.rendezvous.api import (
        RendezvousClosedError,
        RendezvousConnectionError,
        RendezvousTimeoutError,
    )
    from torch.distributed.run import parse_args, run

    config = parse_args(torchrun_args)

    @record
    def launch() -> None:
        run(config)

    _make_bad_input_final()
    # a worker failing before its first step the same way, again and again: stop at 3, not 101 (first_step.py)
    first_step.install(first_step.FirstStepFailures())
    _quiet_worker_exits()
    # a node lost before its peers' process group formed: restart them now, not at its timeout (lost_peer.py)
    lost_peer.install()
    # The store keys of every rendezvous round expire as its state does (rdzv_store_ttl.py): torch's
    # etcd-v2 store writes them without a TTL, and they piled up in etcd for good.
    from elastic_trainer.launch import rdzv_store_ttl  # here: it imports torch, and this module must not

    rdzv_store_ttl.install()
    try:
        launch()
    except SignalException as exc:
        # torchrun has already SIGTERMed its workers and waited for them (they checkpoint);
        # it raises SignalException, which would end in exit code 1 (docs/facts.md, "Controllers and exit codes").
        print(f"[torchfleet] agent stopped by {exc.sigval.name}", file=sys.stderr, flush=True)
        return 128 + int(exc.sigval)
    except ChildFailedError as exc:
        # @record has written the root cause to the error file and stderr
        return EXIT_BAD_INPUT if EXIT_BAD_INPUT in _exit_codes(exc.failures) else 1
    except RendezvousClosedError:
        # torch raises it without a message (etcd_rendezvous_backend/dynamic_rendezvous): say what it means here
        print(closed_rendezvous_message(config.rdzv_id, config.rdzv_endpoint), file=sys.stderr, flush=True)
        return EXIT_RDZV_UNAVAILABLE
    except RendezvousTimeoutError:
        # Fewer than MIN nodes joined within join_timeout. torch raises it without a message, and
        # its agent closes the rendezvous on the way out (LocalElasticAgent._shutdown), so a retry
        # would meet it closed: the exit stays 1 (the launcher's module docstring), said in one line.
        print(f"[torchfleet] rendezvous timed out (RendezvousTimeoutError): fewer than the minimum of "
              f"--nnodes={config.nnodes} nodes joined {config.rdzv_id!r} within its join_timeout "
              f"({_join_timeout(config)}), and the rendezvous is closed now; exit 1: submit the job again "
              f"when nodes can start (a new submission gets a new rendezvous id)", file=sys.stderr, flush=True)
        return 1
    except RendezvousConnectionError as exc:
        print(f"[torchfleet] rendezvous unavailable (RendezvousConnectionError): etcd at {config.rdzv_endpoint} "
              f"cannot be reached ({exc}); exit {EXIT_RDZV_UNAVAILABLE}, to be retried", file=sys.stderr, flush=True)
        return EXIT_RDZV_UNAVAILABLE
    return 0
