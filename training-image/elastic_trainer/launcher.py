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
  ``elastic_trainer.warm``) for ``.py`` scripts: ``import torch`` and torch.optim's lazy imports
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

``TORCHFLEET_DRY_RUN=1`` prints the final torchrun arguments and environment and exits.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import signal
import sys
import sysconfig
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from elastic_trainer import ENV_WARM_MODULES, EXIT_MEMBERSHIP_CHANGE
from elastic_trainer.rdzvconf import (
    LaunchError,
    check_rdzv_conf,
    format_rdzv_conf,
    parse_max_nodes,
    parse_rdzv_conf,
    rdzv_conf_for_nodes,
)

EXIT_BAD_INPUT = 2  # argparse's exit code for a bad argument, and the trainer's for a bad setting
EXIT_RDZV_UNAVAILABLE = 75  # EX_TEMPFAIL (sysexits.h): retry the node later
# Counts worker-group failures, not membership changes: a survivor's workers fail when a peer dies
# (README.md "The launcher"), so one spot interruption costs each surviving node one restart.
DEFAULT_MAX_RESTARTS = "100"
DEFAULT_ENV: dict[str, str] = {
    "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
    "TORCHFLEET_PG_TIMEOUT_S": "300",
}
# Workers forked from a warm forkserver instead of fresh interpreters (see warm.py): torchrun
# runs a script "in the same interpreter" (--run_path) through multiprocessing, and the
# forkserver is started, with torch imported, while the agent is still in the rendezvous.
PRELOAD_OPTIONS: tuple[str, ...] = ("--run_path", "--start_method=forkserver")
PRELOAD_MODULES: tuple[str, ...] = ("elastic_trainer.warm",)
# The script's own imports are preloaded too (warm.py imports them): on an H100 machine a fresh
# worker spent 5.4 s in `import torch` and ~7 s more in `import torchvision`, which only torch's
# preload took off the restart path (README.md's GPU figures). Only modules installed with Python
# (stdlib, site-packages) and this library are taken from the script: its neighbours are the
# user's code, whose import-time side effects (touching CUDA, reading data) must not run in the
# forkserver. TORCHFLEET_PRELOAD_MODULES adds any module by name (comma-separated).
ENV_PRELOAD_MODULES = "TORCHFLEET_PRELOAD_MODULES"
_OWN_PACKAGE = "elastic_trainer"
# a user choosing how workers start keeps that choice
_START_FLAGS = ("--run_path", "--run-path", "--start_method", "--start-method", "--no_python", "--no-python",
                "-m", "--module")
_BACKEND_FLAGS = ("--rdzv_backend", "--rdzv-backend")
_CONF_FLAGS = ("--rdzv_conf", "--rdzv-conf")
_NNODES_FLAGS = ("--nnodes",)


@dataclass(frozen=True)
class LaunchPlan:
    torchrun_args: list[str]
    env: dict[str, str] = field(default_factory=dict)
    rdzv_conf: dict[str, str] = field(default_factory=dict)
    preload: bool = False
    preload_modules: tuple[str, ...] = ()  # imported by the forkserver after elastic_trainer.warm
    warnings: tuple[str, ...] = ()  # printed on stderr before torchrun starts


def _split_script(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Split the args into torchrun options and ``[script, *script_args]``, as torchrun would."""
    from torch.distributed.run import get_args_parser

    try:
        parsed = get_args_parser().parse_args(list(argv))
    except SystemExit as exc:
        if exc.code == 0:  # --help: torchrun's own help was printed
            raise
        raise LaunchError("invalid torchrun arguments (see above)") from exc  # argparse printed why
    tail = 1 + len(parsed.training_script_args)
    return list(argv[: len(argv) - tail]), list(argv[len(argv) - tail :])


def _take(options: list[str], flags: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """Remove every occurrence of ``flags`` (``--f=v`` or ``--f v``); return (rest, values)."""
    rest: list[str] = []
    values: list[str] = []
    i = 0
    while i < len(options):
        token = options[i]
        name, sep, value = token.partition("=")
        if name in flags:
            if sep:
                values.append(value)
            elif i + 1 < len(options):
                values.append(options[i + 1])
                i += 1
            else:
                raise LaunchError(f"{name}: missing value")
        else:
            rest.append(token)
        i += 1
    return rest, values


def _last_value(options: Sequence[str], flags: tuple[str, ...]) -> str | None:
    """The value of the last of ``flags`` (``--f=v`` or ``--f v``), as argparse would keep it."""
    _, values = _take(list(options), flags)
    return values[-1] if values else None


def script_imports(source: str) -> list[str]:
    """Absolute modules a script imports at its top level (in ``try``/``if`` blocks too), in order.

    Parsed, never run. Imports inside functions are left out: they may be deliberately lazy.
    """
    found: list[str] = []

    def visit(statements: list[ast.stmt]) -> None:
        for node in statements:
            if isinstance(node, ast.Import):
                found.extend(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.append(node.module)
            elif isinstance(node, ast.Try | ast.If):
                visit(node.body)
                visit(node.orelse)
                for handler in getattr(node, "handlers", ()):
                    visit(handler.body)
                visit(getattr(node, "finalbody", []))

    visit(ast.parse(source).body)
    return [name for name in dict.fromkeys(found) if name != "__future__"]


def _installed_roots() -> tuple[Path, ...]:
    names = ("stdlib", "platstdlib", "purelib", "platlib")
    return tuple(dict.fromkeys(Path(path).resolve() for key in names if (path := sysconfig.get_paths().get(key))))


def is_safe_to_preload(module: str, roots: Sequence[Path] | None = None) -> bool:
    """``module``'s top-level package is this library or installed with Python (no import is run)."""
    top = module.partition(".")[0]
    if top == _OWN_PACKAGE:
        return True
    try:
        spec = importlib.util.find_spec(top)  # a top-level name: found on sys.path, not imported
    except (ImportError, ValueError):
        return False
    if spec is None:
        return False
    if spec.origin in ("built-in", "frozen"):
        return True
    locations = [spec.origin] if spec.origin else list(spec.submodule_search_locations or ())
    roots = _installed_roots() if roots is None else roots
    return bool(locations) and all(
        any(Path(location).resolve().is_relative_to(root) for root in roots) for location in locations
    )


def preload_modules(script: str, environ: Mapping[str, str]) -> tuple[str, ...]:
    """What the forkserver imports for ``script`` besides torch: its safe imports, then the user's list."""
    try:
        source = Path(script).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        source = ""  # torchrun reports a missing script itself; nothing to preload
    try:
        imported = script_imports(source)
    except SyntaxError:
        imported = []  # the worker will report it where the user looks for it
    chosen = [name for name in imported if is_safe_to_preload(name)]
    extra = [name.strip() for name in environ.get(ENV_PRELOAD_MODULES, "").split(",") if name.strip()]
    for name in extra:
        if not all(part.isidentifier() for part in name.split(".")):
            raise LaunchError(f"{ENV_PRELOAD_MODULES}: {name!r} is not a module name "
                              "(expected e.g. torchvision,mypkg.model)")
    return tuple(name for name in dict.fromkeys([*chosen, *extra]) if name not in PRELOAD_MODULES)


def build_plan(argv: Sequence[str], environ: Mapping[str, str]) -> LaunchPlan:
    """The torchrun argv and worker environment for ``argv`` (pure: no process is started)."""
    options, script = _split_script(argv)
    options, backends = _take(options, _BACKEND_FLAGS)
    options, confs = _take(options, _CONF_FLAGS)

    # Kubeflow's PyTorchJob passes elasticPolicy as PET_* variables, which torchrun reads only as
    # the defaults of its options: the options this launcher always passes would silently
    # override them. So a PET_* value replaces our default, and an explicit option still wins.
    backend = backends[-1] if backends else environ.get("PET_RDZV_BACKEND") or "etcd-v2"
    # The legacy etcd backend loses its keys after 2 hours (docs/facts.md, "Rendezvous"): a plain `etcd`, whether
    # the ElasticJob controller's prepended arg or a PyTorchJob's rdzvBackend, becomes etcd-v2.
    if backend == "etcd" and environ.get("TORCHFLEET_ALLOW_LEGACY_ETCD") != "1":
        backend = "etcd-v2"

    # torchrun reads PET_NNODES as --nnodes' default (PyTorchJob sets it); the last --nnodes wins
    nnodes = _last_value(options, _NNODES_FLAGS)
    if nnodes is not None:
        max_nodes = parse_max_nodes(nnodes)
    elif environ.get("PET_NNODES"):
        max_nodes = parse_max_nodes(environ["PET_NNODES"], source="PET_NNODES")
    else:
        max_nodes = 1  # torchrun's default --nnodes
    conf = rdzv_conf_for_nodes(max_nodes)
    if environ.get("PET_RDZV_CONF"):
        conf.update(parse_rdzv_conf(environ["PET_RDZV_CONF"], source="PET_RDZV_CONF"))
    for text in confs:
        conf.update(parse_rdzv_conf(text))
    warnings = check_rdzv_conf(conf, max_nodes)
    max_restarts = environ.get("PET_MAX_RESTARTS") or DEFAULT_MAX_RESTARTS

    preload = (
        environ.get("TORCHFLEET_PRELOAD", "1") != "0"
        and script[0].endswith(".py")
        and not any(token.partition("=")[0] in _START_FLAGS for token in options)
    )
    torchrun_args = [
        f"--max_restarts={max_restarts}",  # before the user's options: a later --max_restarts wins
        *(PRELOAD_OPTIONS if preload else ()),
        *options,
        f"--rdzv_backend={backend}",
        f"--rdzv_conf={format_rdzv_conf(conf)}",
        *script,
    ]
    env = {key: environ.get(key, value) for key, value in DEFAULT_ENV.items()}
    try:
        if float(env["TORCHFLEET_PG_TIMEOUT_S"]) <= 0:
            raise ValueError
    except ValueError:
        raise LaunchError(
            f"TORCHFLEET_PG_TIMEOUT_S={env['TORCHFLEET_PG_TIMEOUT_S']!r}: must be a positive number of seconds"
        ) from None
    return LaunchPlan(torchrun_args=torchrun_args, env=env, rdzv_conf=conf, preload=preload,
                      preload_modules=preload_modules(script[0], environ) if preload else (), warnings=warnings)


def _start_forkserver(modules: Sequence[str] = ()) -> None:
    import multiprocessing
    import multiprocessing.forkserver

    # The forkserver inherits this environment; warm.py imports these after torch, each guarded:
    # multiprocessing's own preload only forgives an ImportError, and any other error raised by
    # a module's import would kill the forkserver, and with it every worker start.
    os.environ[ENV_WARM_MODULES] = ",".join(modules)
    multiprocessing.set_forkserver_preload(list(PRELOAD_MODULES))
    # now, so that warming up overlaps the rendezvous instead of following it
    multiprocessing.forkserver.ensure_running()


def _warm_agent_imports() -> None:
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

    from elastic_trainer.worker_exits import debug

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


def _run_torchrun(torchrun_args: list[str]) -> int:
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, record
    from torch.distributed.elastic.rendezvous.api import RendezvousClosedError, RendezvousConnectionError
    from torch.distributed.run import parse_args, run

    config = parse_args(torchrun_args)

    @record
    def launch() -> None:
        run(config)

    _make_bad_input_final()
    _quiet_worker_exits()
    # a node lost before its peers' process group formed: restart them now, not at its timeout (lost_peer.py)
    from elastic_trainer import lost_peer

    lost_peer.install()
    # The store keys of every rendezvous round expire as its state does (rdzv_store_ttl.py): torch's
    # etcd-v2 store writes them without a TTL, and they piled up in etcd for good.
    from elastic_trainer import rdzv_store_ttl

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
    except RendezvousConnectionError as exc:
        print(f"[torchfleet] rendezvous unavailable (RendezvousConnectionError): etcd at {config.rdzv_endpoint} "
              f"cannot be reached ({exc}); exit {EXIT_RDZV_UNAVAILABLE}, to be retried", file=sys.stderr, flush=True)
        return EXIT_RDZV_UNAVAILABLE
    return 0


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
    if recovery == "inplace":  # issue 14: no torchrun, see replica_node.py
        from elastic_trainer.inplace import replica_node

        try:
            options, script = _split_script(argv)
        except LaunchError as exc:
            print(f"torchfleet launcher: {exc}", file=sys.stderr)
            return 2
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
    print("[torchfleet] torchrun " + " ".join(plan.torchrun_args), file=sys.stderr, flush=True)
    if plan.preload:
        _start_forkserver(plan.preload_modules)
    _warm_agent_imports()
    return _run_torchrun(plan.torchrun_args)


if __name__ == "__main__":
    sys.exit(main())
