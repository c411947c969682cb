"""`torchfleet list | status | delete`: what is running, how far it is, removing it (what it printed:
logs_command.py).

Kubectl's conventions where a researcher expects them (issue 13): ``-o json|yaml|wide`` on list and
status, ``status --watch``, ``delete`` of several names, ``--all`` or ``-l key=value`` (``--all`` asks
first unless ``--yes``). Exit codes as every command: 0 ok;
2 the input is wrong (a bad name, a job that does not exist); 1 the cluster failed.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from components import spec as platform
from torchfleet.jobs import commands, flag_checks, manifests, progress, summary, table, usage
from torchfleet.jobs.errors import EXIT_OK, ClusterError, JobNotFoundError, NotYoursError, Problems, UsageError
from torchfleet.jobs.indexed_job import recovery_of
from torchfleet.jobs.inplace_job import LABEL_LIGHTHOUSE
from torchfleet.jobs.session import EXIT_DOC, cluster_options, connect_session

WATCH_INTERVAL_S = 2.0
FINISHED = ("Succeeded", "Failed")
# Label selectors as `kubectl -l` takes the equality form: key=value[,key=value]. Keys are
# [prefix/]name, names up to 63 characters (the same label rules as spec.LABEL_VALUE).
_LABEL_NAME = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)")
_LABEL_PREFIX = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
LOG_TAIL = 2000  # lines read per pod for status (events and the last checkpoint)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("list", help="the jobs in the namespace", description=f"List jobs. {EXIT_DOC}")
    p.add_argument("-o", "--output", choices=("table", "wide", "json", "yaml"), default="table",
                   help="table (default); wide adds machine, image and sweep; json or yaml for scripts")
    cluster_options(p)
    p.set_defaults(func=run_list)

    p = sub.add_parser("status", help="a job's progress (step, steps/s, ETA, world size, restarts), pods and events",
                       usage="torchfleet status (NAME | --local DIR) [options]",
                       description=f"Show a job, or a local run's folder (--local). {EXIT_DOC}")
    p.add_argument("name", metavar="NAME", nargs="?", help="the job's name")
    p.add_argument("--local", type=Path, metavar="DIR",
                   help="a `torchfleet run --local` run's folder instead of a job: the same progress view")
    p.add_argument("--shared-dir", type=Path,
                   help="where the shared store is mounted on this machine: read checkpoints from it directly")
    p.add_argument("-o", "--output", choices=("text", "wide", "json", "yaml"), default="text",
                   help="text (default); wide lists every event; json or yaml for scripts")
    p.add_argument("-w", "--watch", action="store_true",
                   help=f"redraw every {WATCH_INTERVAL_S:g} s until the job succeeds or fails (Ctrl-C stops)")
    cluster_options(p)
    p.set_defaults(func=run_status)

    p = sub.add_parser("delete", help="delete jobs (their checkpoints stay on the shared store)",
                       usage="torchfleet delete (NAME [NAME ...] | --all | -l KEY=VALUE) [options]",
                       description=f"Delete jobs by name, every job (--all) or by label (-l). {EXIT_DOC}")
    p.add_argument("names", nargs="*", metavar="NAME", help="one or more job names")
    p.add_argument("--all", action="store_true", help="every job in the namespace (asks first unless --yes)")
    p.add_argument("-l", "--selector", metavar="KEY=VALUE[,KEY=VALUE]",
                   help="the jobs whose labels match, e.g. -l torchfleet.io/sweep=grid (a sweep's jobs)")
    p.add_argument("-y", "--yes", action="store_true", help="delete without asking (required without a terminal)")
    cluster_options(p)
    p.set_defaults(func=run_delete)


def _dump(data: Any, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(data, indent=2, default=str)
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False).rstrip("\n")


# ---------------------------------------------------------------- list


def run_list(args: argparse.Namespace) -> int:
    session, jobs = connect_session(args)
    found = sorted(jobs.list(), key=lambda j: j["metadata"]["name"])
    by_job: dict[str, list] = {}
    for pod in jobs.pods(f"{platform.LABEL_ROLE}={platform.ROLE_TRAINING}"):
        by_job.setdefault((pod.metadata.labels or {}).get(platform.LABEL_JOB, ""), []).append(pod)
    now = commands._now()
    rows, used = [], []
    for j in found:
        pods = by_job.get(j["metadata"]["name"], [])
        u = usage.of_job(j, pods, session.target.cloud, jobs.node_labels, now, session.target.region)
        cost = "-" if u.usd is None else f"{u.usd:.2f}"
        rows.append(replace(table.job_row(j, pods, jobs.node_labels, now), gpu_hours=f"{u.gpu_hours:.2f}", cost=cost))
        used.append(u)
    if args.output in ("json", "yaml"):
        print(_dump([{**table.row_dict(r, j), "usage": u.as_dict()} for r, j, u in zip(rows, found, used, strict=True)],
                    args.output))
    elif not rows:
        print(f"no {jobs.resource['kind']}s in namespace {session.target.namespace}")
    elif args.output == "wide":
        print(table.render_list_wide(rows, found))
    else:
        print(table.render_list(rows))
    if rows and used[0].basis and args.output in ("table", "wide"):
        print(f"GPU-HOURS and USD: at least, from the jobs' current pods; USD at most, at the {used[0].basis} "
              "(spot pays less)", file=sys.stderr)
    return EXIT_OK


# ---------------------------------------------------------------- status


@dataclass(frozen=True)
class StatusData:
    job: dict[str, Any]
    pods: list
    events: list
    checkpoint: progress.CheckpointInfo | None
    progress: summary.Summary
    lighthouse: list  # an in-place job's Lighthouse pods (inplace_job.py); none for the operators' jobs


def _job_pods(jobs, name: str) -> list:
    return jobs.pods(f"{platform.LABEL_JOB}={name}")


def gather(args: argparse.Namespace, jobs) -> StatusData:
    """Everything the status view shows, read once: the job, its pods and events, and rank 0's
    progress events from the pods' logs (training-image/elastic_trainer/events.py)."""
    job = jobs.get(args.name)
    pods = _job_pods(jobs, args.name)
    lighthouse = jobs.pods(f"{LABEL_LIGHTHOUSE}={args.name}") if recovery_of(job) == "inplace" else []
    events = jobs.events([args.name, *(p.metadata.name for p in [*pods, *lighthouse])])
    checkpoint = None
    if args.shared_dir:
        ckpt_dir = Path(args.shared_dir) / args.name / "checkpoints"
        try:
            checkpoint = progress.from_store(ckpt_dir)
        except OSError as error:
            raise UsageError(f"--shared-dir: cannot read {ckpt_dir} ({error.strerror})") from None
    found, logs = [], []
    for pod in pods:
        if pod.status and pod.status.phase in ("Running", "Succeeded", "Failed"):
            try:
                lines = list(jobs.log_lines(pod.metadata.name, manifests.container_name(job), tail=LOG_TAIL))
            except (ClusterError, JobNotFoundError):
                # The API server reads logs from the pod's kubelet: a node gone with a spot reclaim (or a
                # pod deleted meanwhile) answers an error. That pod's progress is unknown; the status is not.
                continue
            found.append(progress.from_log_lines(lines, f"{pod.metadata.name} log"))
            logs.append(summary.events_from_lines(lines))
    if checkpoint is None:
        checkpoint = progress.newest(found)
    container = ((manifests.worker_spec(job).get("template") or {}).get("spec") or {}).get("containers") or [{}]
    total = summary.total_steps_from_args([str(a) for a in container[0].get("args") or []])
    return StatusData(job, pods, events, checkpoint, summary.summarize(summary.merge(*logs), total), lighthouse)


def status_dict(data: StatusData, jobs, now) -> dict[str, Any]:
    row = table.job_row(data.job, data.pods, jobs.node_labels, now)
    return {
        **table.row_dict(row, data.job),
        "lastCheckpoint": None if data.checkpoint is None else {
            "step": data.checkpoint.step, "generation": data.checkpoint.generation, "source": data.checkpoint.source},
        "progress": data.progress.as_dict(),
        "recovery": recovery_of(data.job),
        "lighthouse": [{"name": p.metadata.name, "phase": (p.status and p.status.phase) or None,
                        "node": (p.spec and p.spec.node_name) or None} for p in data.lighthouse],
        "pods": [{"name": p.metadata.name, "phase": (p.status and p.status.phase) or None,
                  "node": (p.spec and p.spec.node_name) or None, "restarts": table.pod_restarts(p)}
                 for p in sorted(data.pods, key=lambda p: p.metadata.name)],
        "events": [{"type": e.type, "reason": e.reason, "object": e.involved_object.name if e.involved_object else None,
                    "message": (e.message or "").strip()} for e in data.events],
    }


def render_status(args: argparse.Namespace, data: StatusData, jobs) -> str:
    now = commands._now()
    cloud = getattr(args, "usage_cloud", None)  # run_status: the target's cloud prices the usage
    used = None if cloud is None else usage.of_job(data.job, data.pods, cloud, jobs.node_labels, now,
                                                   getattr(args, "usage_region", None))
    if args.output in ("json", "yaml"):
        return _dump({**status_dict(data, jobs, now), **({"usage": used.as_dict()} if used else {})}, args.output)
    return table.render_status(data.job, data.pods, data.events, jobs.node_labels, data.checkpoint, now,
                               progress=data.progress, all_events=args.output == "wide", lighthouse=data.lighthouse,
                               used=used.text() if used else None)


def run_status(args: argparse.Namespace) -> int:
    flag_checks.name_or_local(args)
    if args.local is not None:
        return _local_status(args)
    flag_checks.check_lookup_name(args.name)
    if args.shared_dir and not Path(args.shared_dir).is_dir():
        raise UsageError(f"--shared-dir: {args.shared_dir} is not a folder; give where the shared store is mounted "
                         "on this machine")
    session, jobs = connect_session(args)
    args.usage_cloud = session.target.cloud
    args.usage_region = session.target.region  # issue 32: the stack's region prices the usage
    if not args.watch:
        print(render_status(args, gather(args, jobs), jobs))
        return EXIT_OK
    clear = sys.stdout.isatty() and args.output in ("text", "wide")
    while True:  # Ctrl-C ends it (torchfleet.cli: exit 130, no traceback)
        data = gather(args, jobs)
        text = render_status(args, data, jobs)
        # A plain ANSI redraw (home, clear screen): no extra dependency for a refreshing view.
        sys.stdout.write(("\x1b[H\x1b[2J" if clear else "") + text + "\n" + ("" if clear else "\n"))
        sys.stdout.flush()
        if table.state(data.job, data.pods) in FINISHED:
            return EXIT_OK
        time.sleep(WATCH_INTERVAL_S)


def _local_status(args: argparse.Namespace) -> int:
    from torchfleet import local_folder

    if args.output not in ("text", "wide") or args.shared_dir:
        raise UsageError("--local: shows the text view; -o json|yaml and --shared-dir are for a cluster job "
                         "(the run's folder has run.json and the nodes' logs for scripts)")
    while True:  # Ctrl-C ends --watch (torchfleet.cli: exit 130)
        text = local_folder.status_text(args.local)
        print(text + ("\n" if args.watch else ""), flush=True)
        if not args.watch or local_folder.check_folder(args.local).get("ended") is not None:
            return EXIT_OK
        time.sleep(WATCH_INTERVAL_S)


# ---------------------------------------------------------------- delete


def parse_selector(text: str) -> dict[str, str]:
    """``-l a=b,c=d`` -> {"a": "b", "c": "d"}; equality only, as a job's labels are set by torchfleet."""
    out: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.partition("==" if "==" in part else "=")
        prefix, slash, name = key.strip().rpartition("/")
        if not sep or not _LABEL_NAME.fullmatch(name) or (slash and not _LABEL_PREFIX.fullmatch(prefix)):
            raise UsageError(f"-l/--selector: expected KEY=VALUE[,KEY=VALUE], e.g. -l torchfleet.io/sweep=grid; "
                             f"got {text!r}")
        flag_checks.check_label_value(f"-l/--selector {key.strip()}", value.strip())
        out[key.strip()] = value.strip()
    return out


def _confirm_all(count: int, namespace: str) -> None:
    if not sys.stdin.isatty():
        raise UsageError(f"--yes: --all deletes {count} job(s) in namespace {namespace} and there is no terminal "
                         "to confirm on; add --yes (nothing was deleted)")
    print(f"delete all {count} job(s) in namespace {namespace}? [y/N] ", end="", file=sys.stderr, flush=True)
    if sys.stdin.readline().strip().lower() not in ("y", "yes"):
        raise UsageError("not confirmed: nothing was deleted (--yes skips the question)")


def run_delete(args: argparse.Namespace) -> int:
    problems = Problems()
    for name in args.names:
        problems.check(flag_checks.check_lookup_name, name)
    ways = [w for w, given in (("NAME", bool(args.names)), ("--all", args.all), ("-l", args.selector is not None))
            if given]
    if len(ways) != 1:
        problems.add("NAME: give the jobs to delete as names, --all or -l KEY=VALUE (one of them), e.g. "
                     "torchfleet delete resnet-a resnet-b" + (f"; got {' and '.join(ways)}" if ways else ""))
    selector = problems.check(parse_selector, args.selector) if args.selector is not None else None
    if args.all and not args.yes and not sys.stdin.isatty():
        # refused before connecting (issue 23: it connected first, and a cluster that did not answer
        # hid the missing --yes); with a terminal the question needs the count, so it comes after
        problems.add("--yes: --all deletes every job in the namespace and there is no terminal to confirm on; "
                     "add --yes (nothing was deleted)")
    problems.raise_any()
    session, jobs = connect_session(args)
    namespace = session.target.namespace
    names: Sequence[str] = args.names
    if args.all or selector is not None:
        found = jobs.list()
        names = sorted(j["metadata"]["name"] for j in found
                       if all(((j["metadata"].get("labels") or {}).get(k)) == v for k, v in (selector or {}).items()))
        if not names:
            print(f"no {jobs.resource['kind']}s in namespace {namespace}" + (
                f" with labels {args.selector}" if selector else ""))
            return EXIT_OK
        if args.all and not args.yes:
            _confirm_all(len(names), namespace)
    missing, not_yours = [], []
    for name in dict.fromkeys(names):
        try:
            kind = jobs.delete(name)
        except JobNotFoundError:
            missing.append(name)
            continue
        except NotYoursError as refusal:  # another researcher's job: the others are still deleted
            not_yours.append(str(refusal))
            continue
        print(f"deleted {kind} {name} from namespace {namespace}")
    if len(names) > len(missing) + len(not_yours):
        print("their checkpoints and outputs stay on the shared store")
    if not_yours:
        absent = [f"no {jobs.resource['kind']} {n!r} in namespace {namespace}" for n in missing]
        raise NotYoursError("not deleted: " + "; ".join([*not_yours, *absent]))
    if missing:
        raise JobNotFoundError(f"NAME: no {jobs.resource['kind']} {', '.join(map(repr, missing))} in namespace "
                               f"{namespace}; `torchfleet list` shows the jobs there")
    return EXIT_OK
