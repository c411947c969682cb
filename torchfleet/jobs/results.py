"""`torchfleet checkpoints NAME` and `torchfleet cp NAME:PATH LOCAL`: a job's results, out of the store.

A job's folder is ``<mount>/<job>`` on the shared store (spec.JobRequest.job_dir): ``checkpoints/``
(the trainer's ``ckpt-g<gen>-s<step>/``), ``output/`` (TORCHFLEET_OUTPUT_DIR: the final model,
training-image/README.md "Outputs") and whatever the script writes there (TensorBoard events with
``--tensorboard-dir $TORCHFLEET_OUTPUT_DIR/tensorboard``). Two ways to reach it:

- ``--shared-dir DIR``: the store (or a local run's parent folder: `torchfleet demo --workdir runs/demo1`
  is job ``demo1`` under ``runs``) is on this machine; read ``DIR/NAME`` directly, no cluster;
- otherwise the cluster: a read-only reader pod (reader_pod.py) mounts the claim and the same
  store_script.py runs there, its output streamed back through the API server.

Exit codes as every command: 0 done; 2 the input is wrong (a bad name or path, LOCAL exists, nothing
there); 1 the cluster failed or the stream broke off.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import posixpath
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from torchfleet.jobs import flag_checks, image_ref, reader_pod, store_access, store_folder, terminal_text
from torchfleet.jobs import spec as jobspec
from torchfleet.jobs.errors import EXIT_OK, JobNotFoundError, UsageError
from torchfleet.jobs.session import EXIT_DOC, cluster_options, job_client, resolve_target
from torchfleet.jobs.target import require_cpu_pool

COLUMNS = ("NAME", "STEP", "GEN", "SIZE", "AGE", "VERIFIED")


def _store_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--local", type=Path, metavar="DIR", dest="local_run",  # cp's LOCAL is args.local
                   help="a local run's folder (`torchfleet run --local`, `torchfleet demo --workdir`) instead of a "
                        "job: no cluster")
    p.add_argument("--shared-dir", type=Path,
                   help="where the shared store (or a local run's parent folder) is on this machine: read "
                        "DIR/NAME directly, no cluster")
    p.add_argument("--reader-image", default=None,
                   help="the reader pod's image, one with python3 (default: $TORCHFLEET_READER_IMAGE, the config "
                        "file's reader_image, else the platform's pinned python image; never the job's own: a "
                        "job's image would control what you download)")
    p.add_argument("--mount", default=None,
                   help=f"where the job's pods mount the shared claim (default: the job's, else "
                        f"{jobspec.DEFAULT_MOUNT})")
    cluster_options(p)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("checkpoints", help="a job's checkpoints: step, generation, size, age, verified",
                       usage="torchfleet checkpoints (NAME | --local DIR) [options]",
                       description=f"List a job's committed checkpoints, newest first. {EXIT_DOC}")
    p.add_argument("name", metavar="NAME", nargs="?", help="the job's name")
    p.add_argument("--verify", action="store_true",
                   help="hash every file against its meta.json (reads the whole checkpoint); without it, sizes only")
    p.add_argument("-o", "--output", choices=("table", "json"), default="table", help="table (default) or json")
    _store_options(p)
    p.set_defaults(func=run_checkpoints)

    p = sub.add_parser("cp", help="download a job's outputs: NAME:PATH LOCAL",
                       usage="torchfleet cp NAME:PATH LOCAL | torchfleet cp :PATH LOCAL --local DIR",
                       description="Copy PATH of a job's folder (checkpoints/..., output/..., or NAME: for all of it) "
                                   f"to LOCAL, with a progress bar; never overwrites. {EXIT_DOC}")
    p.add_argument("source", metavar="NAME:PATH", help="e.g. resnet:output/model or resnet:checkpoints")
    p.add_argument("local", metavar="LOCAL", type=Path, help="a new path, or a folder to copy into")
    _store_options(p)
    p.set_defaults(func=run_cp)


def parse_source(source: str, local: Path | None = None) -> tuple[str, str]:
    """``NAME:PATH`` as (job, a normalized relative path; "" for the whole folder); with ``--local DIR``,
    ``:PATH`` (the job is the folder's name)."""
    name, sep, path = source.partition(":")
    if not sep:  # the user's own path in the form that works (it said e.g. resnet:output for output/model)
        if local is not None:
            raise UsageError(f"NAME:PATH: with --local the folder is the run, so give :PATH: :{source}, got {source!r}")
        raise UsageError(f"NAME:PATH: expected a job and a path in its folder: NAME:{source}, e.g. resnet:{source}, "
                         f"got {source!r}")
    if local is not None:
        if name:
            raise UsageError(f"NAME:PATH: with --local the folder is the run, so give :PATH, e.g. :{path or 'output'}")
        name = local.expanduser().absolute().name
    else:
        flag_checks.check_lookup_name(name)
    if path.startswith("/"):
        raise UsageError(f"NAME:PATH: {path!r} is absolute; give a path inside the job's folder, e.g. {name}:output")
    normal = posixpath.normpath(path) if path else ""
    if normal == "..":
        normal = "../"
    if normal.startswith("../") or "\0" in normal:
        raise UsageError(f"NAME:PATH: {path!r} leaves the job's folder; give a path inside it, e.g. {name}:output")
    return name, "" if normal == "." else normal


def reader_image(args: argparse.Namespace) -> str:
    """The platform's reader image, or the mirror the researcher's config or flag names; never the job's."""
    if args.reader_image is None:
        return reader_pod.READER_IMAGE
    try:
        ref = image_ref.parse(args.reader_image)
    except UsageError as error:
        raise UsageError(str(error).replace("--image:", "--reader-image:", 1)) from None
    if not ref.digest:  # what reads every download is pinned, as the platform's own images are
        raise UsageError(f"--reader-image: {args.reader_image!r} has no digest; give REPO[:TAG]@sha256:<64 hex>, "
                         f"e.g. {reader_pod.READER_IMAGE}")
    return args.reader_image


@contextlib.contextmanager
def _runner(args: argparse.Namespace, job: str) -> Iterator[tuple[store_access.Runner, str]]:
    """(how to run store_script.py, the job's folder as that runner sees it)."""
    if args.local_run is not None:
        folder = args.local_run.expanduser()
        if not folder.is_dir():
            raise UsageError(f"--local: {folder} is not a folder; give a local run's folder, e.g. torchfleet-runs/NAME")
        yield store_access.local_runner, str(folder.absolute())
        return
    if args.shared_dir is not None:
        root = args.shared_dir.expanduser()
        if not root.is_dir():
            raise UsageError(f"--shared-dir: {root} is not a folder; give where the shared store is mounted")
        if not (root / job).is_dir():
            raise JobNotFoundError(f"NAME: no folder {root / job} for job {job!r} (--shared-dir {root})")
        yield store_access.local_runner, str((root / job).absolute())
        return
    from torchfleet.jobs.mounts import normalize_mount
    from torchfleet.jobs.tensorboard import _from_job

    mount = normalize_mount(args.mount) if args.mount is not None else None
    image = reader_image(args)
    session = resolve_target(args, need_cluster=True)
    require_cpu_pool(session.target, "the reader pod")  # before anything is made (issue 30)
    jobs = job_client(args, session)
    try:
        owner = jobs.get(job)
        _, job_mount = _from_job(owner)  # only where its pods mount the store: its image is never used
    except JobNotFoundError:  # its results outlive the job
        owner, job_mount = None, None
    mount = mount or job_mount or jobspec.DEFAULT_MOUNT
    pod = reader_pod.build_pod(reader_pod.pod_name(job), job, mount, image, session.target, owner,
                               creator=reader_pod.whoami(jobs))
    store_folder.follow(pod, owner)  # the maker's folder of the job, as its pods mount it
    with reader_pod.running(jobs, pod) as name:
        yield store_access.pod_runner(jobs, name), f"{mount.rstrip('/')}/{job}"


def rows(listing: dict[str, Any], now: float) -> list[tuple[str, ...]]:
    out = []
    for c in listing["checkpoints"]:
        if c["verified"]:
            verified = "sha256 ok" if c["checked"] == "sha256" else "size ok"
        else:
            verified = f"NO: {c.get('problem', '?')}"
        created = c.get("created")
        age = "-" if created is None else _age(now - created)
        # names and problems come from the job's folder (its meta.json names the files): escaped, one line each
        out.append(tuple(terminal_text.cell(x) for x in (
            c["name"], str(c["step"]), str(c["generation"]), store_access.human_bytes(c["bytes"]), age, verified)))
    return out


def _age(seconds: float) -> str:
    seconds = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def render(listing: dict[str, Any], now: float) -> str:
    table = [COLUMNS, *rows(listing, now)]
    widths = [max(len(r[i]) for r in table) for i in range(len(COLUMNS) - 1)]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1]
                     for r in table)


def run_checkpoints(args: argparse.Namespace) -> int:
    if (args.name is None) == (args.local_run is None):
        raise UsageError("required: NAME (a job's name) or --local DIR (a local run's folder), one of them, e.g. "
                         "torchfleet checkpoints resnet-a")
    if args.name is not None:
        flag_checks.check_lookup_name(args.name)
    with _runner(args, args.name) as (runner, job_dir):
        listing = store_access.list_checkpoints(runner, job_dir, args.verify)
    if args.output == "json":
        print(json.dumps(listing, indent=1))
    elif not listing["checkpoints"]:
        why = "no checkpoints folder yet" if listing["missing"] else "no committed checkpoint yet"
        print(terminal_text.cell(f"{args.name or args.local_run}: {why} in {listing['dir']}"), file=sys.stderr)
    else:
        print(render(listing, datetime.now(UTC).timestamp()))
    return EXIT_OK


def run_cp(args: argparse.Namespace) -> int:
    job, path = parse_source(args.source, args.local_run)
    store_access.destination(args.local, Path(path).name or job)  # LOCAL checked before a pod is made
    with _runner(args, job) as (runner, job_dir):
        target, size = store_access.download(runner, job_dir, path, args.local)
    print(f"copied {job}:{path or '.'} to {target} ({size['files']} files, {store_access.human_bytes(size['bytes'])})")
    return EXIT_OK
