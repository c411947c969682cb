"""`torchfleet upload LOCAL DEST`: a local folder onto a bucket (a stack's dataset) or onto the shared store.

DEST is one of
- ``s3://BUCKET[/PREFIX]``, ``gs://BUCKET[/PREFIX]``, ``az://ACCOUNT/CONTAINER[/PREFIX]``: the cloud's own
  command line copies it (``aws s3 sync``, ``gcloud storage rsync``, ``azcopy sync`` or ``az storage blob
  upload-batch``), with that tool's progress, retries, parallelism and your login; nothing more is installed
  for it (no cloud SDK is a dependency of the CLI). A sync: running it again after an interruption sends
  only what is missing;
- ``dataset:NAME[/SUB]`` with ``--stack``: the bucket and prefix the stack declares for dataset NAME
  (torchfleet:datasets), so what jobs mount with ``--dataset NAME`` is what was uploaded;
- a folder on this machine, e.g. the shared store mounted here (as ``torchfleet cp --shared-dir``):
  LOCAL is copied to DEST/<LOCAL's name> with a progress line, into a temporary folder renamed into place
  once complete, so a job never sees half a copy. The cluster's store is otherwise reachable only
  through a pod (the read-only reader pod of `cp`); until a writable one exists, upload to a dataset.

Every check runs before anything is copied; a bad argument exits 2 naming it.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from components.spec import datasets as spec_datasets
from torchfleet.jobs import store_access
from torchfleet.jobs import target as targets
from torchfleet.jobs.errors import EXIT_OK, ClusterError, UsageError

SCHEMES = {"s3": "aws", "gs": "gcp", "az": "azure"}
CHUNK = 4 << 20


@dataclass(frozen=True)
class Bucket:
    cloud: str
    bucket: str  # Azure: "<account>/<container>"
    prefix: str = ""  # "" or ending in "/"

    @property
    def url(self) -> str:
        scheme = {v: k for k, v in SCHEMES.items()}[self.cloud]
        return f"{scheme}://{self.bucket}/{self.prefix}"


def parse_bucket(dest: str) -> Bucket:
    scheme, _, rest = dest.partition("://")
    cloud = SCHEMES[scheme]
    parts = [p for p in rest.split("/") if p]
    take = 2 if cloud == "azure" else 1
    if len(parts) < take:
        shape = "az://ACCOUNT/CONTAINER[/PREFIX]" if cloud == "azure" else f"{scheme}://BUCKET[/PREFIX]"
        raise UsageError(f"DEST: expected {shape}, got {dest!r}")
    bucket = "/".join(parts[:take])
    check, source = spec_datasets.BUCKET_RULES[cloud]
    problem = check(bucket)
    if problem:
        raise UsageError(f"DEST: {bucket!r} is not a bucket name {cloud} accepts: {problem} ({source})")
    prefix = "/".join(parts[take:])
    if any(p in (".", "..") for p in parts[take:]):
        raise UsageError(f"DEST: '.' and '..' name no folder in a bucket, got {dest!r}")
    return Bucket(cloud, bucket, f"{prefix}/" if prefix else "")


def dataset_bucket(dest: str, stack: str | None, stacks_dir: Path) -> Bucket:
    """``dataset:NAME[/SUB]``: the stack's bucket and prefix for NAME (checked by the stack's own parse)."""
    name, _, sub = dest.removeprefix("dataset:").partition("/")
    if stack is None:
        raise UsageError(f"DEST: {dest!r} names a stack's dataset; give --stack (or a bucket URL such as "
                         "s3://BUCKET/PREFIX)")
    from torchfleet.preview.runner import stack_spec

    try:
        spec = stack_spec(targets.stack_file(stack, stacks_dir))
    except Exception as error:  # a ConfigError or an unreadable file: the stack is the input to fix
        raise UsageError(f"--stack {stack}: {error}") from None
    found = {d.name: d for d in spec.datasets}
    if not found and spec.cloud == "local":
        raise UsageError(f"DEST: stack {spec.stack} has no datasets: {spec_datasets.LOCAL_DATA_HINT}")
    if name not in found:
        listed = ", ".join(found) or "none (add torchfleet:datasets to the stack file)"
        raise UsageError(f"DEST: stack {spec.stack} has no dataset {name!r}; its datasets: {listed}")
    d = found[name]
    sub = "/".join(p for p in sub.split("/") if p)
    if any(p in (".", "..") for p in sub.split("/")):
        raise UsageError(f"DEST: '.' and '..' name no folder in a bucket, got {dest!r}")
    return Bucket(spec.cloud, d.bucket, d.prefix + (f"{sub}/" if sub else ""))


def bucket_command(source: Path, b: Bucket, which=None) -> list[str]:
    """The cloud CLI's command that makes the bucket prefix hold what ``source`` holds (no deletes);
    ``which`` finds a tool (shutil.which by default)."""
    which = which or shutil.which
    if b.cloud == "aws" and which("aws"):
        return ["aws", "s3", "sync", str(source), b.url]
    if b.cloud == "gcp":
        if which("gcloud"):
            return ["gcloud", "storage", "rsync", "--recursive", str(source), b.url]
        if which("gsutil"):
            return ["gsutil", "-m", "rsync", "-r", str(source), b.url]
    if b.cloud == "azure":
        account, container = b.bucket.split("/", 1)
        https = f"https://{account}.blob.core.windows.net/{container}/{b.prefix}"
        if which("azcopy"):  # Entra ID login: `azcopy login` (or AZCOPY_AUTO_LOGIN_TYPE)
            return ["azcopy", "sync", str(source), https, "--recursive"]
        if which("az"):
            return ["az", "storage", "blob", "upload-batch", "--auth-mode", "login", "--account-name", account,
                    "--destination", container, "--destination-path", b.prefix.rstrip("/"), "--source", str(source)]
    tools = {"aws": "the AWS CLI (aws: https://aws.amazon.com/cli/)",
             "gcp": "the Google Cloud CLI (gcloud: https://cloud.google.com/sdk/docs/install)",
             "azure": "AzCopy (https://learn.microsoft.com/azure/storage/common/storage-use-azcopy-v10) or the "
                      "Azure CLI (az)"}
    raise UsageError(f"DEST: uploading to {b.url} needs {tools[b.cloud]} on PATH, logged in; nothing was copied")


def files_under(source: Path) -> list[Path]:
    """Regular files under ``source``; links are refused (a link out would copy what is not the dataset)."""
    found = []
    for root, dirs, names in os.walk(source):
        for entry in [*dirs, *names]:
            path = Path(root) / entry
            if path.is_symlink():
                raise UsageError(f"LOCAL: {path} is a symbolic link; copy what it points to instead, or remove it")
        found += [Path(root) / n for n in names]
    return found


def copy_folder(source: Path, dest_dir: Path, progress_stream=None) -> Path:
    """``source`` to ``dest_dir/<source's name>``, whole or not at all, with a progress line."""
    if not dest_dir.is_dir():
        raise UsageError(f"DEST: {dest_dir} is not a folder on this machine (nor s3://, gs://, az://, dataset:)")
    final = dest_dir / source.resolve().name
    if final.exists():
        raise UsageError(f"DEST: {final} exists; remove it or upload to another folder (nothing was copied)")
    files = files_under(source)
    progress = store_access.Progress(sum(f.stat().st_size for f in files), progress_stream)
    partial = Path(tempfile.mkdtemp(prefix=f".{final.name}.partial-", dir=dest_dir))
    try:
        for f in files:
            target = partial / f.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(f, "rb") as src, open(target, "wb") as out:
                while chunk := src.read(CHUNK):
                    out.write(chunk)
                    progress.add(len(chunk))
                out.flush()
                os.fsync(out.fileno())
            shutil.copymode(f, target)
        for d in sorted({p.parent for p in partial.rglob("*")} | {partial}, reverse=True):
            # Readable and searchable by any uid a job runs as (--run-as-user); writable by the uploader
            # only: jobs read a dataset, they do not change it.
            os.chmod(d, 0o755)  # noqa: S103
        os.rename(partial, final)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    progress.finish()
    return final


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("upload", help="copy a local folder to a stack's dataset bucket or the shared store",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("local", metavar="LOCAL", type=Path, help="the folder to copy")
    p.add_argument("dest", metavar="DEST",
                   help="s3://BUCKET/PREFIX, gs://BUCKET/PREFIX, az://ACCOUNT/CONTAINER/PREFIX, dataset:NAME[/SUB] "
                        "(with --stack), or a folder on this machine")
    p.add_argument("--stack", default=None, help="the stack whose datasets dataset:NAME names")
    p.add_argument("--stacks-dir", type=Path, default=targets.STACKS_DIR, help=argparse.SUPPRESS)
    p.add_argument("--dry-run", action="store_true", help="print the command that would copy, copy nothing")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    source: Path = args.local
    if not source.is_dir():
        raise UsageError(f"LOCAL: {source} is not a folder on this machine")
    dest: str = args.dest
    scheme = dest.partition("://")[0] if "://" in dest else None
    if scheme is not None and scheme not in SCHEMES:
        raise UsageError(f"DEST: {scheme}:// is not a bucket this can upload to; use s3://, gs://, az://, "
                         "dataset:NAME or a local folder")
    if scheme is None and not dest.startswith("dataset:"):
        if args.dry_run:
            print(f"copy {source} to {Path(dest) / source.resolve().name}")
            return EXIT_OK
        final = copy_folder(source, Path(dest))
        print(f"uploaded {source} to {final}")
        return EXIT_OK
    bucket = parse_bucket(dest) if scheme else dataset_bucket(dest, args.stack, args.stacks_dir)
    files_under(source)  # links refused before the tool starts
    if args.dry_run:
        try:
            command = bucket_command(source, bucket)
        except UsageError as missing:  # show what would run once the tool is installed
            command = bucket_command(source, bucket, which=lambda tool: True)
            print(f"note: {missing}", file=sys.stderr)
        print(shlex.join(command))
        return EXIT_OK
    command = bucket_command(source, bucket)
    print(f"$ {shlex.join(command)}", file=sys.stderr)
    done = subprocess.run(command, check=False)
    if done.returncode != 0:
        raise ClusterError(f"{command[0]} exited {done.returncode} uploading to {bucket.url}; run it again to "
                           "send what is missing (a sync skips what arrived)")
    print(f"uploaded {source} to {bucket.url}")
    return EXIT_OK
