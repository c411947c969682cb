"""The launcher's plan: what torchrun is run with, from the container's args and environment (no torch import).

``build_plan`` turns ``[torchrun options] script.py [script args]`` and the pod's environment into
torchrun's arguments, the workers' environment and the forkserver's preload, adding Torchfleet's
defaults (the entry module's docstring, elastic_trainer/launcher.py, lists them and why) and
refusing what cannot work with a ``LaunchError`` that names the option. It runs nothing: the
launcher's ``TORCHFLEET_DRY_RUN=1`` prints its result, and the tests check it without torch.
"""

from __future__ import annotations

import ast
import importlib.util
import sysconfig
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from elastic_trainer.launch.rdzvconf import (
    LaunchError,
    check_rdzv_conf,
    format_rdzv_conf,
    parse_max_nodes,
    parse_rdzv_conf,
    rdzv_conf_for_nodes,
)

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
PRELOAD_MODULES: tuple[str, ...] = ("elastic_trainer.launch.warm",)
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
    preload_modules: tuple[str, ...] = ()  # imported by the forkserver after elastic_trainer.launch.warm
    warnings: tuple[str, ...] = ()  # printed on stderr before torchrun starts


def split_script(argv: Sequence[str]) -> tuple[list[str], list[str]]:
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
    options, script = split_script(argv)
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
