"""`torchfleet logs`: what a job's pods printed, or a local run's nodes (``--local DIR``).

Kubectl's conventions where a researcher expects them (issue 13): ``--rank N`` (one node's pod),
``--all-ranks`` (every pod, each line prefixed with its index; followed pods interleaved as their lines
arrive), ``--previous`` (the container before the last restart), ``-f``, ``--tail``. The trainer's progress
events print as readable lines (log_lines.py; ``--json``: as printed). Exit codes as every command: 0 ok;
2 the input is wrong (a bad name, a job or a rank that does not exist); 1 the cluster failed.
"""

from __future__ import annotations

import argparse
import queue
import threading
from collections.abc import Iterator
from pathlib import Path

from components import spec as platform
from torchfleet.jobs import flag_checks, manifests
from torchfleet.jobs.errors import EXIT_OK, Problems, UsageError
from torchfleet.jobs.log_lines import Readable
from torchfleet.jobs.session import EXIT_DOC, cluster_options, connect_session


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("logs", help="a job's logs", usage="torchfleet logs (NAME | --local DIR) [options]",
                       description=f"Print a job's logs, or a local run's (--local): the trainer's progress events "
                                   f"as readable lines (--json: as printed). {EXIT_DOC}")
    p.add_argument("name", metavar="NAME", nargs="?", help="the job's name")
    p.add_argument("--json", action="store_true",
                   help="the progress events as the trainer prints them (@@tf JSON lines), for scripts")
    p.add_argument("--local", type=Path, metavar="DIR", help="a `torchfleet run --local` run's folder instead of a job")
    p.add_argument("--node", metavar="NODE", help="with --local: only this node's log (node0, node1, ...)")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing as the pods write")
    p.add_argument("--rank", type=int, default=0,
                   help="node index N: the pod <job>-worker-N (default 0; rank 0 writes the progress lines)")
    p.add_argument("--all-ranks", action="store_true",
                   help="every pod of the job, each line prefixed with its pod's index: [worker-N]")
    p.add_argument("-p", "--previous", action="store_true",
                   help="the previous container's logs: the one that was killed or failed before the restart")
    p.add_argument("--tail", type=int, default=None, help="only the last N lines (of each pod)")
    cluster_options(p)
    p.set_defaults(func=run_logs)


# Kubernetes labels each pod of an Indexed Job (the `job` operator's, a --recovery inplace job) with its
# index; the ElasticJob and PyTorchJob operators name their pods <job>-worker-<index> instead.
LABEL_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"


def _pod_index(pod) -> int:
    index = ((pod.metadata and pod.metadata.labels) or {}).get(LABEL_COMPLETION_INDEX)
    if index is None:
        index = pod.metadata.name.rsplit("-", 1)[-1]
    return int(index) if str(index).isdigit() else 1 << 30


def _pod_of_rank(pods: list, rank: int):
    """The pod of node ``rank``: the running one if an index has several (a replacement beside the
    pod it replaced), else the newest."""
    mine = [p for p in pods if _pod_index(p) == rank]
    running = [p for p in mine if p.status and p.status.phase == "Running"]
    return max(running or mine, key=lambda p: str(p.metadata.creation_timestamp or ""), default=None)


def run_logs(args: argparse.Namespace) -> int:
    flag_checks.name_or_local(args)
    if args.local is not None:
        return _local_logs(args)
    if args.node is not None:
        raise UsageError("--node: names a node of a local run (with --local DIR); a job's pod is --rank N")
    problems = Problems()
    problems.check(flag_checks.check_lookup_name, args.name)
    if not 0 <= args.rank < flag_checks.MAX_NODES:
        problems.add(f"--rank: a node index from 0 to {flag_checks.MAX_NODES - 1}, got {args.rank}")
    if args.tail is not None and args.tail < 0:
        problems.add(f"--tail: a number of lines, 0 or more, got {args.tail}")
    if args.all_ranks and args.rank != 0:
        problems.add(f"--rank {args.rank} and --all-ranks: give one of them")
    problems.raise_any()
    _, jobs = connect_session(args)
    job = jobs.get(args.name)  # a clear "no such job" before looking for its pods
    pods = jobs.pods(f"{platform.LABEL_JOB}={args.name}")
    if args.all_ranks:
        chosen = sorted(pods, key=lambda p: (_pod_index(p), p.metadata.name))
        if not chosen:
            raise UsageError(f"--all-ranks: job {args.name} has no pods yet (see `torchfleet status {args.name}`)")
    else:
        pod = _pod_of_rank(pods, args.rank)
        if pod is None:
            have = ", ".join(sorted(p.metadata.name for p in pods)) or "none yet (see `torchfleet status`)"
            raise UsageError(f"--rank: job {args.name} has no pod of node {args.rank}; its pods: {have}")
        chosen = [pod]
    index = {p.metadata.name: _pod_index(p) for p in chosen}
    streams = {name: jobs.log_lines(name, manifests.container_name(job), follow=args.follow, tail=args.tail,
                                    previous=args.previous) for name in index}
    prefix = len(index) > 1 or args.all_ranks
    readable = {name: Readable() for name in index}  # per pod: the speed is between its own steps
    for name, raw in (_interleave(streams) if args.follow and len(index) > 1 else _in_turn(streams)):
        line = raw if args.json else readable[name].line(raw)
        if line is not None:
            print(f"[worker-{index[name]}] {line}" if prefix else line, flush=args.follow)
    return EXIT_OK


def _local_logs(args: argparse.Namespace) -> int:
    from torchfleet import local_folder

    if args.rank != 0 or args.all_ranks or args.previous:
        raise UsageError("--local: every node's log is shown, each line prefixed [nodeN]; --node NODE picks one "
                         "(--rank, --all-ranks and --previous are for a cluster job)")
    if args.tail is not None and args.tail < 0:
        raise UsageError(f"--tail: a number of lines, 0 or more, got {args.tail}")
    lines = local_folder.log_lines(args.local, args.node, readable=not args.json, follow=args.follow)
    if args.tail is not None and not args.follow:
        lines = list(lines)[-args.tail:] if args.tail else []
    for line in lines:
        print(line, flush=args.follow)
    return EXIT_OK


def _in_turn(streams: dict[str, Iterator[str]]) -> Iterator[tuple[str, str]]:
    for name, lines in streams.items():
        for line in lines:
            yield name, line


def _interleave(streams: dict[str, Iterator[str]]) -> Iterator[tuple[str, str]]:
    """Lines of several followed pods as they arrive (one reader thread per pod). A reader's error
    is raised here, in the command, so it ends under the exit-code contract."""
    lines: queue.Queue = queue.Queue()
    done = object()

    def read(name: str, stream: Iterator[str]) -> None:
        try:
            for line in stream:
                lines.put((name, line))
        except BaseException as error:  # handed to the main thread, which raises it
            lines.put((name, error))
        lines.put((name, done))

    for name, stream in streams.items():
        threading.Thread(target=read, args=(name, stream), name=f"logs-{name}", daemon=True).start()
    open_streams = len(streams)
    while open_streams:
        name, item = lines.get()
        if item is done:
            open_streams -= 1
        elif isinstance(item, BaseException):
            raise item
        else:
            yield name, item
