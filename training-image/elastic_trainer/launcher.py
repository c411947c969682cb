"""The training image's entrypoint: ``torchrun`` with Torchfleet's defaults.

Every operator starts this: the default ``job`` operator's Indexed Job passes the whole rendezvous in
the container args; the ElasticJob controller prepends ``--rdzv_backend=etcd --rdzv_endpoint=...
--rdzv_id=<job> --nnodes=min:max`` to them (torchfleet's own later ``--rdzv_id``, one per submission,
wins); PyTorchJob passes its own as PET_* variables. Usage::

    python -m elastic_trainer.launcher [torchrun options] script.py [script args]

What it adds (every item can be overridden, see README.md):

- ``--rdzv_backend=etcd-v2``. The legacy ``etcd`` backend loses its keys after 2 hours
  (docs/facts.md, "Rendezvous"), so when the effective backend is ``etcd`` (what the ElasticJob controller
  prepends) it is switched to ``etcd-v2`` unless ``TORCHFLEET_ALLOW_LEGACY_ETCD=1``. Any later
  ``--rdzv_backend`` in the args wins, as with torchrun itself (argparse: last one wins).
- tuned rendezvous timeouts, merged key by key with any ``--rdzv_conf`` given (yours win);
  settings whose heartbeat budget is too small are refused (``check_rdzv_conf``).
- ``--max_restarts=100``: a survivor's workers fail when a peer dies; torchrun's default of 0
  would end the job at the first spot interruption instead of re-entering the rendezvous.
- ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1``: torch 2.13 rejoin bug, a replacement node cannot
  join a running job without it (docs/facts.md, "Rendezvous").
- ``TORCHFLEET_PG_TIMEOUT_S=300``: the trainer's process-group timeout. Minutes, not NCCL's
  10-minute default: a peer that stalls longer than that has failed (seeds/004, docs/facts.md).
- workers forked from a warm forkserver (``--run_path --start_method=forkserver``, preloading
  ``elastic_trainer.launch.warm``) for ``.py`` scripts: ``import torch`` and torch.optim's lazy imports
  are paid while the agent is still in the rendezvous, not after it (docs/facts.md: about 2 s of a
  6 s recovery on an idle machine), and so are the script's own top-level imports of installed
  packages (torchvision: ~7 s on a GPU machine), found by parsing the script, plus
  ``TORCHFLEET_PRELOAD_MODULES``. ``TORCHFLEET_PRELOAD=0`` or your own ``--start_method``,
  ``--no-python`` or ``-m`` turns it off.
- exit code 2 at once when a worker exits 2 (a bad argument or setting: argparse's exit code, and the
  trainer's): torchrun would restart the workers until ``--max_restarts`` ran out (101 attempts, then
  exit 1), and every attempt would fail the same way. Each node whose worker exits 2 stops its agent
  and ends with 2, which every controller treats as fatal (the Indexed Job's pod failure policy fails
  the job at once).
- exit code 1 after 3 attempts in a row that failed before their first step with the same error (a Task
  error in the first step: launch/first_step.py), with the worker's traceback, not after 101: a fatal code
  for the Indexed Job's pod failure policy, as torchrun's own 1 when its restarts run out. A failure after
  a step (a peer lost, a spot reclaim) keeps restarting up to ``--max_restarts``.
- exit code 75 (EX_TEMPFAIL) when etcd cannot be reached, or the rendezvous was closed before this node
  joined (the run ended without it, e.g. a node that was Pending until the last step): the Indexed Job
  retries 75 instead of failing the job on a late node or an etcd blip. Too few nodes within the join
  timeout stays 1: torch has closed the rendezvous then, and a retry would meet it closed.
- the etcd-v2 rendezvous store's keys written with a TTL (``rdzv_store_ttl.py``): torch's store writes
  every round's keys without one, and nothing deletes them.
- exit code 143 on SIGTERM. torchrun exits 1 on SIGTERM, which both controllers treat as a
  fatal job failure; 143 is retried. torchrun is run in this process so that its
  ``SignalException`` can be mapped to 128 + signal number. Before torchrun's own handler is
  installed (it is, when workers start), SIGTERM and SIGINT end the launcher at once with
  143 and 130: as PID 1 it would otherwise ignore them.
- Kubeflow's ``PET_RDZV_BACKEND``, ``PET_RDZV_CONF`` and ``PET_MAX_RESTARTS`` (a PyTorchJob's
  elasticPolicy) replace the defaults above; explicit options still win over them.

- the script's Task checked by reading it before torchrun starts (task_check.py): a missing or misnamed
  method, a signature the trainer cannot call, an import that cannot be found, each as FILE:LINE, exit 2
  (issue 32: workers restarted three times and the cause sat in a log under torch's lines).
  ``TORCHFLEET_TASK_CHECK=0`` turns it off.

``TORCHFLEET_DRY_RUN=1`` prints the final torchrun arguments and environment and exits.

This module is the entry point and what happens before torchrun owns the process (the signals, the
choice of recovery mode); the parts are in launch/: the arguments (plan.py), torchrun's agent and
its exit codes (agent.py), the rendezvous settings (rdzvconf.py). No torch import at module level.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Sequence
from types import FrameType

from elastic_trainer.events import ENV_EVENTS
from elastic_trainer.hooks import stacks_on_sigusr1
from elastic_trainer.launch.agent import (
    EXIT_BAD_INPUT,
    EXIT_RDZV_UNAVAILABLE,
    run_torchrun,
    start_forkserver,
    warm_agent_imports,
)
from elastic_trainer.launch.plan import build_plan, split_script
from elastic_trainer.launch.rdzvconf import LaunchError
from elastic_trainer.task_check import check_script, format_problems

__all__ = ["EXIT_BAD_INPUT", "EXIT_RDZV_UNAVAILABLE", "main"]


def _exit_before_torchrun_handles(signum: int, frame: FrameType | None) -> None:
    # As a container's PID 1 a signal without a handler is ignored, and torchrun installs its
    # own only when it starts workers (PContext.start): a SIGTERM during the imports or the
    # initial rendezvous (minutes while it waits for --nnodes' minimum) was ignored, and the pod
    # sat out its grace period to end in 137. No worker exists yet, so there is nothing to
    # checkpoint: exit at once, 128 + signal like torchrun's own path. os._exit, not an
    # exception: launch_agent closes the rendezvous for every node on any exception but
    # torchrun's SignalException, and a raise in the middle of an etcd request may come back
    # wrapped in another error.
    print(f"[torchfleet] stopped by {signal.Signals(signum).name} before the workers started",
          file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    stacks_on_sigusr1()
    # first thing: `import torch` alone takes seconds; torchrun's own handlers replace these
    previous = {signum: signal.signal(signum, _exit_before_torchrun_handles)
                for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        return _main(argv)
    finally:  # for callers in-process (the tests); the process ends here otherwise
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _main(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    recovery = os.environ.get("TORCHFLEET_RECOVERY") or "restart"
    if recovery not in ("restart", "inplace"):
        print(f"torchfleet launcher: TORCHFLEET_RECOVERY={recovery!r}: must be restart or inplace", file=sys.stderr)
        return 2
    try:
        options, script = split_script(argv)
    except LaunchError as exc:
        print(f"torchfleet launcher: {exc}", file=sys.stderr)
        return 2
    if _task_problems(script[0]):
        return 2
    if recovery == "inplace":  # issue 14: no torchrun, see replica_node.py
        from elastic_trainer.inplace import replica_node

        return replica_node.main(options, script)
    try:
        plan = build_plan(argv, os.environ)
    except LaunchError as exc:
        print(f"torchfleet launcher: {exc}", file=sys.stderr)
        return 2
    for warning in plan.warnings:
        print(f"torchfleet launcher: warning: {warning}", file=sys.stderr, flush=True)
    if os.environ.get("TORCHFLEET_DRY_RUN") == "1":
        print(json.dumps({"torchrun": plan.torchrun_args, "env": plan.env, "preload": list(plan.preload_modules)},
                         indent=2))
        return 0
    os.environ.update(plan.env)  # inherited by the workers torchrun starts
    if "--standalone" in options and not os.environ.get(ENV_EVENTS):
        # A standalone run is a person's (the no-launcher message suggests it): torchfleet's readers of the
        # @@tf events start nodes with a rendezvous (run --local, a job's pods). Readable lines even through a
        # pipe or a tool's shell, where the terminal test of events.py saw no terminal (issue 32)
        os.environ[ENV_EVENTS] = "text"
    print("[torchfleet] torchrun " + " ".join(plan.torchrun_args), file=sys.stderr, flush=True)
    if plan.preload:
        start_forkserver(plan.preload_modules)
    warm_agent_imports()
    return run_torchrun(plan.torchrun_args)


def _task_problems(script: str) -> bool:
    """Print what is wrong with the script's Task (its file and line) and say so; a missing
    script is torchrun's to report."""
    if os.environ.get("TORCHFLEET_TASK_CHECK") == "0" or not script.endswith(".py") or not os.path.isfile(script):
        return False
    problems = check_script(script)
    if problems:
        print(f"torchfleet launcher: {format_problems(problems)}", file=sys.stderr, flush=True)
    return bool(problems)


if __name__ == "__main__":
    sys.exit(main())
