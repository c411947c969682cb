"""`torchfleet run --local`: your own training script on N local nodes, killed and replaced on a schedule.

What `torchfleet demo` does for the synthetic example, for any script built on the training image's
elastic_trainer (training-image/examples/train.py is the template): etcd (v2 API) and N nodes, each
the image's launcher in its own process tree exactly as a pod runs it (--recovery restart), or a torchft
Lighthouse and N replica groups (--recovery inplace). With --kill-every or --kill-at a node's whole
tree (agent, workers, their children) is SIGKILLed, as a spot reclaim would, and a replacement started;
the timeline says what happened when, and the run ends with the view `torchfleet status` shows. The run's
folder keeps run.json, each node's log, the checkpoints and output/model (the final model, exported as a
cluster job's is; `torchfleet cp :output/model DEST --local DIR` copies it): `torchfleet status --local DIR` and
`torchfleet logs --local DIR` read it from another shell. Ctrl-C or SIGTERM stops every process started.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import time
from pathlib import Path

from torchfleet import local_nodes, output_paths, task_script
from torchfleet.jobs import flag_checks, script_flags, summary
from torchfleet.jobs.errors import JobError, Problems, UsageError

MAX_NODES = 8
MIN_KILL_EVERY_S = 5.0
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(s|m|h)?")
USAGE = "torchfleet run --local [options] -- SCRIPT.py [ARGS ...]"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run your training script on local nodes, killing and replacing them on a schedule",
                       usage=USAGE, description=__doc__.split("\n\n")[1],
                       epilog="example:\n  torchfleet run --local --nodes 2 --kill-at 60 -- "
                              "training-image/examples/train.py --total-steps=200 --global-batch-size=32 "
                              "--checkpoint-every=20")
    p.add_argument("--local", action="store_true",
                   help="required: on this machine (a job on a cluster is `torchfleet submit`)")
    p.add_argument("--name", default=time.strftime("local-%Y%m%d-%H%M%S"),
                   help="the run's name: its rendezvous id and its folder's (default: local-<date>-<time>)")
    p.add_argument("--nodes", type=int, default=2, help=f"nodes (replica groups in-place), 1 to {MAX_NODES} "
                                                        "(default 2; a kill needs 2)")
    p.add_argument("--recovery", choices=("restart", "inplace"), default="restart",
                   help="restart (default): torchrun restarts every worker from the checkpoint; inplace: the "
                        "survivors keep training and the replacement heals from them (torchft)")
    p.add_argument("--kill-every", metavar="DURATION", default=None,
                   help="kill a node after each DURATION of training with every node (30s, 2m, 1h), then "
                        "start a replacement")
    p.add_argument("--kill-at", metavar="STEP", type=int, action="append", default=[],
                   help="kill a node when training reaches STEP (repeatable), then start a replacement")
    p.add_argument("--replace-after", metavar="DURATION", default="2s",
                   help="how long after a kill the replacement starts (default 2s)")
    p.add_argument("--workdir", type=Path, default=None,
                   help="the run's folder: node logs, run.json, checkpoints (default: ./torchfleet-runs/NAME); "
                        "kept after the run")
    p.add_argument("--param", action="append", default=[], metavar="KEY=V1,V2",
                   help="sweep locally (repeatable): one run per combination, NAME-0, NAME-1, ... one after the "
                        "other, each with --KEY=VALUE appended (as `torchfleet sweep`; --param-style hydra: KEY=VALUE)")
    p.add_argument("--param-style", choices=flag_checks.PARAM_STYLES, default=flag_checks.DEFAULT_PARAM_STYLE,
                   help="how the values reach the script: argparse (default) or hydra")
    p.set_defaults(func=run, takes_command=True)


def seconds(flag: str, text: str) -> float:
    """``30s``, ``2m``, ``1.5h`` or plain seconds."""
    match = _DURATION.fullmatch(text.strip())
    if not match:
        raise UsageError(f"{flag}: a duration such as 30s, 2m or 1h, got {text!r}")
    return float(match.group(1)) * {"s": 1, "m": 60, "h": 3600, None: 1}[match.group(2)]


def script_and_args(command: list[str] | None) -> tuple[Path, list[str]]:
    """The script and its arguments from what followed ``--`` (a leading ``python`` is allowed, as submit takes it)."""
    words = list(command or [])
    if words and Path(words[0]).name.startswith("python") and not words[0].endswith(".py"):
        words = words[1:]
    if not words or words[0].startswith("-"):
        got = " ".join(command or []) or "nothing"
        raise UsageError(f"SCRIPT: the training script goes after --, e.g. {USAGE.split(' -- ')[0]} -- "
                         f"training-image/examples/train.py --total-steps=200 --global-batch-size=32 (the launcher "
                         f"runs a .py file, not python -m); got: {got}")
    script = Path(words[0])
    if not script.is_file():
        raise UsageError(f"SCRIPT: {script} is not a file (from {Path.cwd()})")
    return script.resolve(), words[1:]


def check_args(args: argparse.Namespace) -> tuple[Path, list[str], float | None, float]:
    """Every flag in range before anything starts: (script, its arguments, kill period, replace delay)."""
    problems = Problems()
    if not args.local:
        problems.add("--local: required: `run` runs on this machine only; a job on a cluster is `torchfleet submit`")
    found = problems.check(script_and_args, args.training_command)
    script, script_args = found if found else (None, [])
    if script is not None:  # issue 32: the Task's methods and the imports, before any process starts
        problems.check(task_script.check, script, resolve_imports=True)
    if args.param:
        params = problems.check(flag_checks.parse_params, args.param, args.param_style)
        if params and script is not None and args.param_style == "argparse":
            problems.check(script_flags.check_params, [key for key, _ in params], script, script.name)
            problems.check(script_flags.check_values, params, script, script.name)
    if not 1 <= args.nodes <= MAX_NODES:
        problems.add(f"--nodes: from 1 to {MAX_NODES}, got {args.nodes}")
    every = problems.check(seconds, "--kill-every", args.kill_every) if args.kill_every is not None else None
    if every is not None and not (math.isfinite(every) and every >= MIN_KILL_EVERY_S):
        problems.add(f"--kill-every: at least {MIN_KILL_EVERY_S:g}s (a node needs that to start), "
                     f"got {args.kill_every}")
    replace = problems.check(seconds, "--replace-after", args.replace_after)
    if every is not None and args.kill_at:
        problems.add("--kill-every and --kill-at: give one of them")
    if any(step < 1 for step in args.kill_at):
        problems.add(f"--kill-at: steps from 1, got {', '.join(map(str, args.kill_at))}")
    total = summary.total_steps_from_args(script_args)  # a kill at or past the last step never comes (issue 32)
    beyond = [step for step in args.kill_at if total is not None and step >= total]
    if beyond:
        problems.add(f"--kill-at: steps below the script's --total-steps={total} (the run ends at step {total}), "
                     f"got {', '.join(map(str, beyond))}")
    if (every is not None or args.kill_at) and args.nodes < 2:
        problems.add(f"--nodes: a kill needs at least 2 nodes (one must survive it), got {args.nodes}")
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", args.name):
        problems.add(f"--name: lowercase letters, digits and '-', up to 63, got {args.name!r}")
    if args.workdir is not None:
        problems.check(output_paths.check_folder, "--workdir", args.workdir)
    problems.raise_any()
    return script, script_args, every, replace or 0.0


def run(args: argparse.Namespace) -> int:
    script, script_args, every, replace_after = check_args(args)
    missing = local_nodes.missing_prerequisite(args.recovery)
    if missing:
        raise UsageError(missing)
    if not args.param:
        return _run_one(args, args.name, args.workdir, script, script_args, every, replace_after)
    # A local sweep (issue 32): one run per combination, one after the other, NAME-0, NAME-1, ... as
    # `torchfleet sweep` names its jobs; each in its own folder, ./torchfleet-runs/NAME-i or --workdir/NAME-i
    combos = flag_checks.combinations(flag_checks.parse_params(args.param, args.param_style))
    codes = []
    for i, overrides in enumerate(combos):
        name = f"{args.name}-{i}"
        print(f"sweep {args.name}: run {i + 1} of {len(combos)}, {name}: {' '.join(overrides)}", flush=True)
        folder = args.workdir / name if args.workdir is not None else None
        code = _run_one(args, name, folder, script, [*script_args, *overrides], every, replace_after)
        codes.append((name, overrides, code, folder or Path("torchfleet-runs") / name))
        if code == 130:
            break  # Ctrl-C ends the sweep, not only this run
    for name, overrides, code, folder in codes:
        print(sweep_line(name, overrides, code, folder), flush=True)
    return next((code for _, _, code, _ in codes if code != 0), 0)


def sweep_line(name: str, overrides: list[str], code: int, folder: Path) -> str:
    """One run of a local sweep: its exit and its last reported loss (issue 32: the summary listed exit codes
    only), read from its nodes' progress events as `torchfleet status --local` reads them."""
    from torchfleet import local_folder

    loss = None
    try:
        record = local_folder.check_folder(folder)
        logs = [summary.events_from_lines(path.read_text(errors="replace").splitlines())
                for path in local_folder.node_logs(folder, record)]
        loss = summary.summarize(summary.merge(*logs)).loss
    except (UsageError, OSError):
        pass  # a run stopped before its folder was written: no loss to show
    shown = f"loss {loss:.4g}" if loss is not None else "loss -"
    return f"  {name}  exit {code}  {shown}  {' '.join(overrides)}"


RUNS = Path("torchfleet-runs")  # the default parent of a run's folder, in the current folder
RUNS_GITIGNORE = "# Created by torchfleet run --local: its runs (logs, checkpoints) stay out of git.\n*\n"


def runs_folder() -> Path:
    """./torchfleet-runs, with a .gitignore of ``*`` written when this creates it, as python -m venv and
    pytest do for their folders, so that ``git add -A`` leaves the runs out (issue 32, a second fresh
    walk). A folder that already exists is left as its owner made it."""
    if not RUNS.exists():
        output_paths.make_folder("--workdir", RUNS)
        (RUNS / ".gitignore").write_text(RUNS_GITIGNORE)
    return RUNS


def _run_one(args: argparse.Namespace, name: str, folder: Path | None, script: Path, script_args: list[str],
             every: float | None, replace_after: float) -> int:
    workdir = output_paths.make_folder("--workdir", folder or runs_folder() / name)
    from torchfleet import local_folder, local_schedule

    record = local_folder.Record(workdir, name=name, recovery=args.recovery, nodes_wanted=args.nodes,
                                 command=[str(script), *script_args])
    schedule = local_schedule.Schedule(args.nodes, every, sorted(args.kill_at), replace_after)
    code = 1
    try:
        with local_nodes.interruptible():
            print(f"run {name}: logs, checkpoints and run.json in {workdir}; from another shell: "
                  f"torchfleet status --local {workdir}   torchfleet logs --local {workdir} -f", flush=True)
            code = local_schedule.run(args.recovery, name, workdir, script, script_args, schedule, record)
            model = workdir / local_schedule.OUTPUT_FOLDER / "model"
            if code == 0 and model.is_dir():  # elastic_trainer/outputs.py's MODEL_DIR
                print(f"the final model: {model}; take it with: torchfleet cp :{local_schedule.OUTPUT_FOLDER}/model "
                      f"./{name}-model --local {workdir}", flush=True)
            return code
    except KeyboardInterrupt:
        code = 130
        print("\ninterrupted: every process the run started has been stopped", file=sys.stderr)
        return code
    except JobError as error:
        code = error.exit_code
        raise
    finally:
        record.ended(code)
